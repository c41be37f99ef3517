"""The BLAS core of generated CPU matmul kernels: `gemm` on tiles, and how to cut a matmul into tiles.

Generated CPU kernels (codegen/cpu/gemm.py) import this module. `gemm` calls the single
precision matrix product of the BLAS that SciPy ships (`scipy.linalg.cython_blas`),
through the same entry point Numba's own `np.dot` uses (`numba_xxgemm`, a named symbol,
so kernels calling it are cached like any other), but on any sub-block of a buffer:
operands are a buffer, an element offset and a leading dimension. Every call computes one
tile; the kernel runs its tiles on the chip's Numba threads (`prange`), so the BLAS itself
must run single-threaded (`single_threaded()`, done by the CPU device). How a result is
cut into tiles is decided when the kernel is rendered (`cpu_gemm.tile_plan`).

>>> import numpy as np
>>> a, b = np.arange(6, dtype=np.float32).reshape(2, 3), np.ones((3, 2), np.float32)
>>> c = np.zeros((2, 2), np.float32)
>>> gemm(0, 0, 2, 2, 3, a, 0, 3, b, 0, 2, c, 0, 2)   # c = a @ b
>>> c.tolist()
[[3.0, 3.0], [12.0, 12.0]]
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import intrinsic
from numba.np.linalg import ensure_blas

ensure_blas()  # imports scipy.linalg.cython_blas, where Numba's helper finds sgemm

# Numba's helper: c = alpha * op(a) @ op(b) + beta * c in column-major order
_XXGEMM = types.ExternalFunction("numba_xxgemm", types.intc(
    types.char, types.char, types.char, types.intp, types.intp, types.intp,
    types.CPointer(types.float32), types.CPointer(types.float32), types.intp,
    types.CPointer(types.float32), types.intp, types.CPointer(types.float32),
    types.CPointer(types.float32), types.intp))

KIND_S, NOTRANS, TRANS = 115, 78, 84  # 's', 'N', 'T'


@intrinsic
def _at(typingctx, arr, offset):
    """A pointer to element `offset` (flat, in elements) of an array's buffer."""
    sig = types.CPointer(arr.dtype)(arr, offset)

    def codegen(context, builder, signature, args):
        ary = context.make_array(arr)(context, builder, args[0])
        return builder.gep(ary.data, [args[1]])

    return sig, codegen


@njit(nogil=True, cache=True)
def gemm(ta, tb, m, n, k, a, a_off, lda, b, b_off, ldb, c, c_off, ldc):
    """Row-major C[m, n] = op(A)[m, k] @ op(B)[k, n], each a block of a float32 buffer:
    element (r, s) of a block is buffer[off + r * ld + s]; `ta`, `tb` = 1 when the block
    holds the operand transposed."""
    scalars = np.empty(2, np.float32)
    scalars[0] = 1.0
    scalars[1] = 0.0
    # row-major C = A B is column-major C^T = B^T A^T: swap the operands, keep the blocks
    _XXGEMM(np.int8(KIND_S), np.int8(TRANS if tb else NOTRANS), np.int8(TRANS if ta else NOTRANS), n, m, k,
            _at(scalars, 0), _at(b, b_off), ldb, _at(a, a_off), lda, _at(scalars, 1), _at(c, c_off), ldc)


def library() -> str:
    """The BLAS behind `gemm`, as threadpoolctl names it (e.g. `openblas 0.3.30`), or `blas`."""
    lib = _controller()
    if lib is None:
        return "blas"
    return f"{lib.internal_api} {lib.version or ''}".strip()


def single_threaded() -> None:
    """Make the BLAS behind `gemm` run every call on the calling thread: the kernels
    parallelise over tiles themselves, one tile per Numba thread."""
    lib = _controller()
    if lib is not None:
        lib.set_num_threads(1)


_CONTROLLER: list = []


def _controller():
    """threadpoolctl's controller of the library that holds scipy's sgemm (not numpy's own
    BLAS, which the rest of the process keeps as it is)."""
    if not _CONTROLLER:
        _CONTROLLER.append(_find_controller())
    return _CONTROLLER[0]


def _find_controller():
    import ctypes
    import os

    from numba.extending import get_cython_function_address

    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # a declared dependency; without it the BLAS keeps its own threads
        return None

    address = get_cython_function_address("scipy.linalg.cython_blas", "sgemm")
    path = _shared_object_of(ctypes, address)
    libs = ThreadpoolController().select(user_api="blas").lib_controllers
    for lib in libs:
        if path is not None and os.path.realpath(lib.filepath) == os.path.realpath(path):
            return lib
    scipy_libs = [lib for lib in libs if "scipy" in os.path.basename(lib.filepath) and "64_" not in lib.filepath]
    return scipy_libs[0] if len(scipy_libs) == 1 else None


def _shared_object_of(ctypes, address: int) -> str | None:
    """The file of the shared library that holds `address` (dladdr), or None."""

    class DlInfo(ctypes.Structure):
        _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                    ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]

    try:
        libc = ctypes.CDLL(None)
        info = DlInfo()
        if libc.dladdr(ctypes.c_void_p(address), ctypes.byref(info)) and info.dli_fname:
            return info.dli_fname.decode()
    except (OSError, AttributeError):
        pass
    return None
