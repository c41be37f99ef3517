"""The libraries a GPU matmul stage can hand its gemm to (codegen/extern.py splits the stage).

Each provider computes `c = op(a) @ op(b)` on device buffers (Numba-CUDA arrays, shared
without a copy through `__cuda_array_interface__`), enqueued on the chip's stream, so it
is ordered with our kernels' stages like any launch:

- `CupyGemm`: cuBLAS through CuPy (`cupy.matmul` on the chip's stream);
- `TorchGemm`: cuBLAS through PyTorch (`torch.matmul` on the chip's stream);
- `NumpyOnSimulator`: numpy on the simulator's arrays, standing in for cuBLAS so the
  library path's kernels and launches are tested without a GPU.

nvmath-python's host `matmul` (cuBLASLt with its fixed epilogues) takes CuPy or PyTorch
operands and would add nothing here: the fused epilogues are general and run in our own
pointwise stage. Its device-side matmul (cuBLASDx inside a Numba kernel) is not used.

`PROBES` are tried in order; the first library that imports and sees a GPU is used.
"""

from __future__ import annotations

import numpy as np


def stream_pointer(stream) -> int:
    """The CUDA stream handle of a Numba-CUDA stream, as an integer (0: the default stream)."""
    handle = getattr(stream, "handle", None)
    if handle is None:
        return 0
    for get in (lambda: int(handle), lambda: handle.value, lambda: int(handle.getPtr())):
        try:
            value = get()
        except (TypeError, AttributeError, ValueError):
            continue
        return int(value or 0)
    raise TypeError(f"cannot read the handle of stream {stream!r}")


class CupyGemm:
    name = "cupy"

    def __init__(self):
        import cupy

        self.cupy = cupy

    def gemm(self, queue, a, ta: bool, b, tb: bool, c) -> None:
        cp = self.cupy
        with cp.cuda.Device(queue.gpu.id), cp.cuda.ExternalStream(stream_pointer(queue.stream)):
            x, y, out = cp.asarray(a), cp.asarray(b), cp.asarray(c)
            cp.matmul(x.T if ta else x, y.T if tb else y, out=out)


class TorchGemm:
    name = "torch"

    def __init__(self):
        import torch

        self.torch = torch

    def gemm(self, queue, a, ta: bool, b, tb: bool, c) -> None:
        torch = self.torch
        device = torch.device("cuda", queue.gpu.id)
        with torch.cuda.stream(torch.cuda.ExternalStream(stream_pointer(queue.stream), device=device)):
            x, y, out = (torch.as_tensor(v, device=device) for v in (a, b, c))
            torch.matmul(x.T if ta else x, y.T if tb else y, out=out)


class NumpyOnSimulator:
    name = "numpy"

    def gemm(self, queue, a, ta: bool, b, tb: bool, c) -> None:
        x, y = a._ary, b._ary  # the simulator's device arrays wrap numpy arrays
        np.matmul(x.T if ta else x, y.T if tb else y, out=c._ary)


def probe_cupy() -> tuple[bool, str]:
    try:
        import cupy
    except ImportError as err:
        return False, f"cannot be imported ({err})"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as err:  # noqa: BLE001 - CuPy's own CUDA error, shortened
        return False, f"sees no GPU ({' '.join(str(err).split())[:120]})"
    return (count > 0, f"cuBLAS through cupy {cupy.__version__}" if count else "sees no GPU")


def probe_torch() -> tuple[bool, str]:
    try:
        import torch
    except ImportError as err:
        return False, f"cannot be imported ({err})"
    if not torch.cuda.is_available():
        return False, f"torch {torch.__version__} sees no GPU"
    return True, f"cuBLAS through torch {torch.__version__}"


PROBES = (("cupy", probe_cupy), ("torch", probe_torch))
PROVIDERS = {"cupy": CupyGemm, "torch": TorchGemm}
