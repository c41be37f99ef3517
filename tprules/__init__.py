"""tprules: declarative fusion legality for tensor-parallel programs.

Rule text → AST (`datalog.lang`) → checks and strata (`datalog.analysis`) → engines
(`datalog.engine`) → verdicts (`verdicts`) → planner (`planner`) → kernels (`codegen`) →
devices (`runtime`);
the REPL, reports, golden snapshots and the Shim API sit beside that pipeline.

The Shim API is the package's face, as a compiler's fusion optimizer uses it:

>>> import tprules
>>> base = tprules.FactShim.load("cuda-lane:h100:Bf16")
>>> tp = tprules.TensorParallelShim(base, tprules.Manifest.load("facts/megatron-mlp-tp2"))
>>> g = tprules.TensorGraph.load("facts/megatron-mlp-tp2")
>>> tp.fits(g.fuse("f", ["gelu_0", "gelu_1"]), g).reasons
('spans_chips',)

The names are loaded on first use, so `import tprules` stays as cheap as the command line needs.
"""

from .version import __version__

# The Shim API (tprules.shim), exported from the package's face.
_SHIM_API = ("FactShim", "Fit", "FusedOp", "Manifest", "Op", "QuantFormat", "Refusal", "Shim", "Support",
             "Tensor", "TensorGraph", "TensorParallelShim", "fits_all")

__all__ = ["__version__", *_SHIM_API]


def __getattr__(name: str):
    if name in _SHIM_API:
        from . import shim

        return getattr(shim, name)
    raise AttributeError(f"module 'tprules' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_SHIM_API))
