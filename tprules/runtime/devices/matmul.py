"""Which matmul core a device uses, and why: a library where one is present, else our own kernels.

`--matmul auto` (the default) takes the library when it is there, `library` insists on it
(a clean error when it is missing), `own` takes our own kernels.

- cpu: SciPy's BLAS (`codegen/blas.py`: single-threaded sgemm on tiles, the kernel's
  prologue and epilogue around them), else plain Numba loops;
- cuda: cuBLAS through CuPy, or through PyTorch (whichever imports and sees the GPU
  first), called between our kernels' stages on the chip's stream; else our own
  shared-memory tiles;
- sim: our own tiles (what the tests use). `--matmul library` there stands numpy in for
  cuBLAS, so that the library path's kernels and launches are tested without a GPU.

Every probe returns (found, what it found or why not), so the choice is testable with
any probe standing in for a real one.

>>> cpu_core("auto", probe=lambda: (False, "scipy cannot be imported")).reason
'no BLAS: scipy cannot be imported'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .base import DeviceUnavailable

CHOICES = ("auto", "library", "own")
Probe = Callable[[], tuple[bool, str]]


@dataclass(frozen=True)
class MatmulCore:
    """`kind`: blas | loops (cpu), library | tiles (cuda, sim); `library`: what computes
    the matmuls; `reason`: why this core; `provider`: the library's call (None for own kernels)."""

    kind: str
    library: str
    reason: str
    provider: object = None

    @property
    def own(self) -> bool:
        return self.provider is None and self.kind in ("loops", "tiles")


def _check(want: str) -> None:
    if want not in CHOICES:
        raise DeviceUnavailable(f"unknown matmul core {want}; choose one of {', '.join(CHOICES)}")


# -- cpu -----------------------------------------------------------------------------


def probe_blas() -> tuple[bool, str]:
    """SciPy's BLAS, set to run each call on its caller's thread."""
    try:
        from ...codegen import blas
    except ImportError as err:
        return False, f"scipy cannot be imported ({err})"
    except RuntimeError as err:  # numba's check that scipy's BLAS has the integer width it was built for
        return False, " ".join(str(err).split())
    blas.single_threaded()
    return True, blas.library()


def cpu_core(want: str = "auto", probe: Probe = probe_blas) -> MatmulCore:
    _check(want)
    if want == "own":
        return MatmulCore("loops", "own loops", "asked for (--matmul own)")
    found, what = probe()
    if found:
        return MatmulCore("blas", f"{what} tiles", "a BLAS is present")
    if want == "library":
        raise DeviceUnavailable(f"--matmul library: no BLAS for the cpu device: {what}")
    return MatmulCore("loops", "own loops", f"no BLAS: {what}")


# -- cuda and the simulator ----------------------------------------------------------


def gpu_core(want: str = "auto", simulator: bool = False, probes: tuple[tuple[str, Probe], ...] | None = None,
             providers: dict[str, Callable[[], object]] | None = None) -> MatmulCore:
    """The core of the cuda device (or, with `simulator`, of the sim device)."""
    _check(want)
    own = MatmulCore("tiles", "own shared-memory tiles", "asked for (--matmul own)")
    if want == "own":
        return own
    if simulator:
        if want == "library":
            from .gemm_providers import NumpyOnSimulator

            return MatmulCore("library", "numpy standing in for cuBLAS", "asked for on the simulator",
                              NumpyOnSimulator())
        return MatmulCore("tiles", "own shared-memory tiles", "the simulator runs our own kernels")
    from . import gemm_providers

    probes = gemm_providers.PROBES if probes is None else probes
    providers = gemm_providers.PROVIDERS if providers is None else providers
    missing = []
    for name, probe in probes:
        found, what = probe()
        if found:
            return MatmulCore("library", what, "a GPU matmul library is present", providers[name]())
        missing.append(f"{name}: {what}")
    why = "; ".join(missing)
    if want == "library":
        raise DeviceUnavailable(f"--matmul library: no GPU matmul library ({why})")
    return MatmulCore("tiles", "own shared-memory tiles", f"no GPU matmul library ({why})")
