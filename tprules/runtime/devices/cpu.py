"""The CPU device: each kernel one Numba CPU function; one worker thread per chip.

The functions release the GIL (`nogil`), so chips run concurrently; a big kernel also
runs its outer loop on Numba's threads (`prange`). With fewer chips than cores each chip
gets cores // chips threads. With more chips than cores each chip gets one, and a chip
holds one of `cores` slots while a kernel of its runs, so that no more kernels run at
once than there are cores (Numba's pool is never asked for more threads than it has). A
chip's buffers are numpy arrays, and moving a partial to another chip is a copy made by
that chip's thread once the source chip has finished what it had queued.

Matmul stages call SciPy's BLAS on tiles where it is present (see matmul.py).

Every launch allocates the buffers its kernel writes, and a kernel its tiles of
accumulators; glibc would map each large one afresh and fault its pages in again on every
run. The device asks glibc once to keep freed memory for reuse instead (`mallopt`), which
saves those page faults (5 to 10% of the SwiGLU group's time at the benchmark's size).
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait

import numpy as np

from ...codegen import cache, cpu
from .base import Compiled, Device, Queue
from .matmul import cpu_core

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters
_MALLOC_TUNED: list[bool] = []


def reuse_freed_memory() -> bool:
    """Ask glibc (once a process) to serve allocations below 64 MiB from memory it keeps, not
    from fresh mappings, and to keep up to 128 MiB freed; False where there is no glibc."""
    if not _MALLOC_TUNED:
        import ctypes
        import ctypes.util

        ok = False
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            ok = bool(libc.mallopt(M_MMAP_THRESHOLD, 64 << 20)) and bool(libc.mallopt(M_TRIM_THRESHOLD, 128 << 20))
        except (OSError, AttributeError):
            pass
        _MALLOC_TUNED.append(ok)
    return _MALLOC_TUNED[0]


def thread_shares(cores: int, chips: int) -> tuple[list[int], int | None]:
    """Threads for each chip, and how many kernels may run at once (None: no limit needed).

    >>> thread_shares(2, 1), thread_shares(8, 4), thread_shares(2, 4)
    (([2], None), ([2, 2, 2, 2], None), ([1, 1, 1, 1], 2))
    """
    cores = max(1, cores)
    if chips <= cores:
        return [cores // chips] * chips, None
    return [1] * chips, cores


class CpuQueue(Queue):
    def __init__(self, chip: int, threads: int = 1, slots: threading.Semaphore | None = None,
                 pool: ThreadPoolExecutor | None = None):
        """`pool`: the chip's worker thread, kept by the device from run to run (its Numba
        thread team with it), else one of the queue's own."""
        self.chip = chip
        self.slots = slots  # one held while a kernel runs, when chips outnumber cores
        self.own_pool = pool is None
        self.pool = pool or chip_thread(chip, threads)
        self.last: Future | None = None
        self.busy = 0.0
        self.cpu = 0.0
        self.threads = threads
        self.error: BaseException | None = None
        self.timed: list[tuple[str, float]] = []  # (kernel kind, seconds) per launch

    def _submit(self, work, wait: Future | None = None, slot: bool = False, what: tuple | None = None) -> None:
        def step():
            if self.error is not None:
                return
            try:
                if wait is not None:
                    wait.result()  # another chip's work this one needs
                if slot and self.slots is not None:
                    self.slots.acquire()  # a core, when chips outnumber cores (not counted as busy)
                try:
                    started, cpu = time.perf_counter(), time.thread_time()
                    work()
                    ended = time.perf_counter()
                    self.busy += ended - started
                    if what is not None and what[0] == "kernel":
                        self.timed.append((what[1].kernel.kind, ended - started))
                    self.cpu += time.thread_time() - cpu
                    if self.trace is not None:
                        self.trace.append((what, started, ended))
                finally:
                    if slot and self.slots is not None:
                        self.slots.release()
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
        self._submit(lambda: fn(*buffers), slot=True, what=("kernel", compiled))

    def copy_from(self, source: "CpuQueue", buffer):
        out = np.empty_like(buffer)
        self._submit(lambda: np.copyto(out, buffer), wait=source.last, what=("transfer", source.chip, out.nbytes))
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

    def kernel_seconds(self) -> list[tuple[str, float]]:
        return list(self.timed)

    def cpu_seconds(self) -> float | None:
        # the chip's thread does all its kernels' work only when their loops run on it alone
        return self.cpu if self.threads == 1 else None

    def close(self) -> None:
        if self.own_pool:
            self.pool.shutdown(wait=True)
        elif self.last is not None:
            wait([self.last])  # the device's thread stays, idle, for the next run


def chip_thread(chip: int, threads: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(1, thread_name_prefix=f"tprules-chip{chip}", initializer=_threads, initargs=(threads,))


class CpuCompiled(Compiled):
    def __init__(self, kernel, source: str, fn):
        super().__init__(kernel, source, launches=1)
        self.fn = fn


class CpuDevice(Device):
    name = "cpu"

    def __init__(self, matmul: str = "auto", threads: int | None = None):
        """`threads`: a fixed thread count for every chip (tests), instead of the cores' share."""
        import numba

        self._compiled: dict[str, object] = {}
        self.fixed = threads
        reuse_freed_memory()
        self.core = cpu_core(matmul)
        self.machine = "cpu" if self.core.kind == "blas" else "cpu (own matmul loops)"
        self.cores = numba.config.NUMBA_NUM_THREADS
        self.threads = self.cores  # a chip's threads; set by for_chips
        # (chip, threads) → the chip's worker thread, kept from run to run: a new thread each
        # run would start a new OpenMP team for its parallel loops each run
        self._pools: dict[tuple[int, int], ThreadPoolExecutor] = {}

    def for_chips(self, chips: int) -> None:
        self.threads = self.fixed or thread_shares(self.cores, chips)[0][0]  # every chip gets the same share

    def describe(self) -> str:
        import numba

        n = numba.config.NUMBA_NUM_THREADS
        return f"cpu (numba {numba.__version__}, {n} thread{'' if n == 1 else 's'}; matmul: {self.core.library})"

    def compile(self, kernel) -> Compiled:
        source = cpu.render(kernel, gemm=self.core.kind == "blas", threads=self.threads)
        fn = self._compiled.get(source)
        if fn is None:
            fn = cache.load(source, "cpu").kernel
            fn.compile(signature(kernel))  # now, not at the first launch (or load Numba's cache)
            self._compiled[source] = fn
        return CpuCompiled(kernel, source, fn)

    def queues(self, chips: int) -> list[Queue]:
        shares, at_once = thread_shares(self.cores, chips)
        if self.fixed:
            shares = [self.fixed] * chips
        slots = threading.BoundedSemaphore(at_once) if at_once is not None else None
        return [CpuQueue(c, n, slots, self._pool(c, n)) for c, n in enumerate(shares)]

    def _pool(self, chip: int, threads: int) -> ThreadPoolExecutor:
        pool = self._pools.get((chip, threads))
        if pool is None:
            pool = self._pools[(chip, threads)] = chip_thread(chip, threads)
        return pool


def _threads(n: int) -> None:
    import numba

    numba.set_num_threads(n)  # for parallel loops started from this (the chip's) thread


def signature(kernel) -> tuple:
    from numba import from_dtype, types

    from ...program.model import Tensor

    out = []
    for p in kernel.params:
        dtype = Tensor(p.name, p.shape, p.dtype, None).storage
        out.append(types.Array(from_dtype(dtype), len(p.buffer_shape), "C"))
    return tuple(out)
