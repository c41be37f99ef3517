"""The libraries a GPU matmul stage can hand its gemm to (codegen/render/extern.py splits the stage).

Each provider computes a `Gemm` stage's `c = op(a) @ op(b)` on device buffers (Numba-CUDA
arrays, shared without a copy through `__cuda_array_interface__`), enqueued on the chip's
stream, so it is ordered with our kernels' stages like any launch. An operand that is a
view (the stage's `a_at`, `b_at`: an offset and a leading dimension into the buffer) is
read as a strided array over the buffer's memory, not copied (`operands`):

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

from collections.abc import Callable

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


def held(g) -> tuple[tuple[int, int], tuple[int, int]]:
    """The shapes of the blocks the gemm's operands hold: [m, k] or [k, m]; [k, n] or [n, k]."""
    return ((g.k, g.m) if g.ta else (g.m, g.k)), ((g.n, g.k) if g.tb else (g.k, g.n))


def operands(g, x, y, strided):
    """op(a), op(b) of gemm `g` over arrays x, y: each the whole array, or with `a_at`/`b_at`
    the block `strided(array, offset, shape, (ld, 1))` of its memory; transposed where held so."""
    shapes = held(g)
    blocks = []
    for v, at, shape, flip in ((x, g.a_at, shapes[0], g.ta), (y, g.b_at, shapes[1], g.tb)):
        if at is not None:
            v = strided(v, at[0], shape, (at[1], 1))
        blocks.append(v.T if flip else v)
    return blocks


class CupyGemm:
    name = "cupy"

    def __init__(self):
        import cupy

        self.cupy = cupy

    def gemm(self, queue, g, a, b, c) -> None:
        cp = self.cupy

        def strided(v, offset, shape, steps):
            flat = v.reshape(-1)[offset:]
            return cp.lib.stride_tricks.as_strided(flat, shape, tuple(s * flat.itemsize for s in steps))

        with cp.cuda.Device(queue.gpu.id), cp.cuda.ExternalStream(stream_pointer(queue.stream)):
            x, y = operands(g, cp.asarray(a), cp.asarray(b), strided)
            cp.matmul(x, y, out=cp.asarray(c))


class TorchGemm:
    name = "torch"

    def __init__(self):
        import torch

        self.torch = torch

    def gemm(self, queue, g, a, b, c) -> None:
        torch = self.torch
        device = torch.device("cuda", queue.gpu.id)

        def strided(v, offset, shape, steps):
            return torch.as_strided(v.reshape(-1), shape, steps, offset)

        with torch.cuda.stream(torch.cuda.ExternalStream(stream_pointer(queue.stream), device=device)):
            x, y, out = (torch.as_tensor(v, device=device) for v in (a, b, c))
            torch.matmul(*operands(g, x, y, strided), out=out)


class NumpyOnSimulator:
    name = "numpy"

    def gemm(self, queue, g, a, b, c) -> None:
        def strided(v, offset, shape, steps):
            flat = v.reshape(-1)[offset:]
            return np.lib.stride_tricks.as_strided(flat, shape, tuple(s * flat.itemsize for s in steps))

        # the simulator's device arrays wrap numpy arrays
        x, y = operands(g, a._ary, b._ary, strided)
        np.matmul(x, y, out=c._ary)


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
PROVIDERS: dict[str, Callable[[], object]] = {"cupy": CupyGemm, "torch": TorchGemm}
