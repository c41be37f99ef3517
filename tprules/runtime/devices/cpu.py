"""The CPU device: each kernel one Numba CPU function; one worker thread per chip.

The functions release the GIL (`nogil`), so chips run concurrently; a big kernel also
runs its outer loop on Numba's threads (`prange`), each chip on its share of them (all
threads / chips, at least one). A chip's buffers are numpy arrays, and
moving a partial to another chip is a copy made by that chip's thread once the source
chip has finished what it had queued.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from ...codegen import cache, cpu
from .base import Compiled, Device, Queue


class CpuQueue(Queue):
    def __init__(self, chip: int, threads: int = 1):
        self.chip = chip
        self.pool = ThreadPoolExecutor(1, thread_name_prefix=f"tprules-chip{chip}", initializer=_threads,
                                       initargs=(threads,))
        self.last: Future | None = None
        self.busy = 0.0
        self.cpu = 0.0
        self.threads = threads
        self.error: BaseException | None = None

    def _submit(self, work, wait: Future | None = None) -> None:
        def step():
            if self.error is not None:
                return
            try:
                if wait is not None:
                    wait.result()  # another chip's work this one needs
                started, cpu = time.perf_counter(), time.thread_time()
                work()
                self.busy += time.perf_counter() - started
                self.cpu += time.thread_time() - cpu
            except BaseException as err:  # noqa: BLE001 - kept, and raised by synchronize()
                self.error = err

        self.last = self.pool.submit(step)

    def upload(self, array):
        return np.array(array, copy=True)

    def empty(self, shape, dtype):
        return np.empty(shape, dtype)

    def zeros(self, shape, dtype):
        return np.zeros(shape, dtype)

    def launch(self, compiled: Compiled, buffers: list) -> None:
        fn = compiled.fn
        self._submit(lambda: fn(*buffers))

    def copy_from(self, source: "CpuQueue", buffer):
        out = np.empty_like(buffer)
        self._submit(lambda: np.copyto(out, buffer), wait=source.last)
        return out

    def download(self, buffer) -> np.ndarray:
        self.synchronize()
        return np.array(buffer, copy=True)

    def synchronize(self) -> None:
        if self.last is not None:
            self.last.result()
        if self.error is not None:
            raise self.error

    def busy_seconds(self) -> float:
        return self.busy

    def cpu_seconds(self) -> float | None:
        # the chip's thread does all its kernels' work only when their loops run on it alone
        return self.cpu if self.threads == 1 else None

    def close(self) -> None:
        self.pool.shutdown(wait=True)


class CpuCompiled(Compiled):
    def __init__(self, kernel, source: str, fn):
        super().__init__(kernel, source, launches=1)
        self.fn = fn


class CpuDevice(Device):
    name = "cpu"

    def __init__(self):
        self._compiled: dict[str, object] = {}

    def describe(self) -> str:
        import numba

        n = numba.config.NUMBA_NUM_THREADS
        return f"cpu (numba {numba.__version__}, {n} thread{'' if n == 1 else 's'})"

    def compile(self, kernel) -> Compiled:
        source = cpu.render(kernel)
        fn = self._compiled.get(source)
        if fn is None:
            fn = cache.load(source, "cpu").kernel
            fn.compile(signature(kernel))  # now, not at the first launch (or load Numba's cache)
            self._compiled[source] = fn
        return CpuCompiled(kernel, source, fn)

    def queues(self, chips: int) -> list[Queue]:
        import numba

        share = max(1, numba.config.NUMBA_NUM_THREADS // chips)  # the chips share the cores
        return [CpuQueue(c, share) for c in range(chips)]


def _threads(n: int) -> None:
    import numba

    numba.set_num_threads(n)  # for parallel loops started from this (the chip's) thread


def signature(kernel) -> tuple:
    from numba import from_dtype, types

    from ..program import Tensor

    out = []
    for p in kernel.params:
        dtype = Tensor(p.name, p.shape, p.dtype, None).storage
        out.append(types.Array(from_dtype(dtype), len(p.buffer_shape), "C"))
    return tuple(out)
