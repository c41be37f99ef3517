"""Compile every CUDA kernel of the examples to PTX, with no GPU: a check of the CUDA
renderer's code (typing, lowering) where only NVVM is installed.

    python benchmarks/ptx_check.py [--cc 9.0] [EXAMPLE...]

Needs numba-cuda with NVVM and NVRTC (e.g. `pip install "cuda-toolkit[nvvm,nvrtc]==13.*"`,
with LD_LIBRARY_PATH naming their lib folder if Numba does not find them), and must run
with NUMBA_ENABLE_CUDASIM unset. Exit 0 when every kernel compiles, 1 otherwise, 77 when
NVVM cannot be loaded (nothing was checked).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# Fused groups worth checking beyond the examples' plans (every stage kind).
EXTRA = {
    "llama-layer-tp4": [["q_0", "k_0"], ["gate_0", "up_0", "silu_0", "swiglu_0"], ["res1", "rms2"],
                        ["qk_1", "scale_1", "softmax_1", "pv_1"], ["k_2", "kt_2"]],
    "int8-mlp-tp2": [["mm1_0", "relu_0"], ["square_1", "mm2_1"], ["inv", "rescale", "flip", "sm"],
                     ["relu_0", "addb0", "addb1", "addb2", "addb3"]],
    "megatron-mlp-tp2": [["allreduce", "bias"]],
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("examples", nargs="*")
    parser.add_argument("--cc", default="9.0", help="compute capability to compile for (default 9.0)")
    args = parser.parse_args(argv)
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0"):
        print("unset NUMBA_ENABLE_CUDASIM first", file=sys.stderr)
        return 2
    from numba import cuda, from_dtype, types

    cc = tuple(int(x) for x in args.cc.split("."))
    try:
        cuda.compile_ptx(_probe, (types.float32[:],), cc=cc)
    except Exception as err:  # noqa: BLE001 - no NVVM here: nothing to check
        print(f"skipped: NVVM cannot be loaded ({' '.join(str(err).split())[:200]})", file=sys.stderr)
        return 77

    # Device functions compile for the current GPU's capability; there is no GPU here.
    import numba.cuda.dispatcher as dispatcher

    dispatcher.get_current_device = lambda: type("NoGpu", (), {"compute_capability": cc})()

    from tprules.codegen import cache, lower
    from tprules.codegen import cuda as render
    from tprules.planner import plan as make_plan
    from tprules.planner.plan import Group
    from tprules.runtime import RunProgram
    from tprules.runtime.groups import unfused
    from tprules.workspace import Workspace

    target = render.Target(16)
    examples = args.examples or sorted(p.name for p in (ROOT / "facts").iterdir() if (p / "op.facts").exists())
    seen: set[str] = set()
    failed = 0
    for name in examples:
        ws = Workspace(ROOT / "facts" / name)
        prog = RunProgram.from_workspace(ws)
        groups = list(unfused(prog).groups) + list(make_plan(ws).groups)
        for members in EXTRA.get(name, []):
            if all(o in prog.by_name for o in members):
                places = sorted({prog.places[o] for o in members} - {"collective"})
                groups.append(Group("+".join(members), tuple(members), places[0] if places else "collective"))
        for g in groups:
            kernel = lower(g, prog)
            source, _ = render.render(kernel, target)
            if source in seen:
                continue
            seen.add(source)
            sig = [types.int64] + [types.Array(from_dtype(_storage(p.dtype)), len(p.buffer_shape), "C")
                                   for p in kernel.params]
            try:
                fn = cache.load(source, "ptx").kernel
                cuda.compile_ptx(fn.py_func, tuple(sig), cc=cc)
                print(f"ok      {name}: {g.group} ({kernel.kind})")
            except Exception as err:  # noqa: BLE001 - report every kernel that fails
                failed += 1
                print(f"FAILED  {name}: {g.group} ({kernel.kind}): {type(err).__name__}: {err}")
    print(f"{len(seen)} distinct kernels, {failed} failed")
    return 1 if failed else 0


def _storage(dtype: str):
    import numpy as np

    return np.dtype({"i8": np.int8, "i32": np.int32}.get(dtype, np.float32))


def _probe(a):
    a[0] = 1


if __name__ == "__main__":
    sys.exit(main())
