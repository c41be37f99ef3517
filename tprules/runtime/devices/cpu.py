"""The CPU device: each kernel one Numba CPU function; one worker thread per chip.

The functions release the GIL (`nogil`), so chips run concurrently; a big kernel also
runs its outer loop on Numba's threads (`prange`). With fewer chips than cores each chip
gets cores // chips threads. With more chips than cores each chip gets one. A kernel
holds one of the `cores` for each of its threads while it runs, so that no more kernels
run at once than there are cores (Numba's pool is never asked for more threads than it
has). A chip's buffers are numpy arrays, and moving a partial to another chip is a copy
made by that chip's thread once the source chip has finished what it had queued.

The chips share the process's memory (`shares_spine`): a spine kernel, whose result is the
same on every chip, runs once, on chip 0's thread with every core, and the other chips
read its buffers where they lie once it is done (runtime/execution/executor.py).

Matmul stages call SciPy's BLAS on tiles where it is present (see matmul.py).

Every launch allocates the buffers its kernel writes, and a kernel its tiles of
accumulators; glibc would map each large one afresh and fault its pages in again on every
run. The device asks glibc once to keep freed memory for reuse instead (`mallopt`), which
saves those page faults (5 to 10% of the SwiGLU group's time at the benchmark's size).

Kernels of one thread run beside kernels on every core (a shared spine kernel), so an
OpenMP team that keeps spinning after its loop would take a core from the next chip's
kernel: the device asks OpenMP to wait passively (`OMP_WAIT_POLICY`, unless set already,
before Numba's OpenMP pool loads).
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import replace
from typing import Sequence, cast

import numpy as np

from ...codegen import cache, moves
from ...codegen.cpu import function as cpu
from ...codegen.lowering import attention
from ...errors import CompileFailed
from ...heap import keep_freed_memory
from . import pool
from .base import Compiled, Device, Queue
from .matmul import cpu_core

_MALLOC_TUNED: list[bool] = []


def reuse_freed_memory() -> bool:
    """Ask glibc (once a process) to serve allocations below 64 MiB from memory it keeps, not
    from fresh mappings, and to keep up to 128 MiB freed; False where there is no glibc."""
    if not _MALLOC_TUNED:
        _MALLOC_TUNED.append(keep_freed_memory(64 << 20, 128 << 20))
    return _MALLOC_TUNED[0]


def thread_shares(cores: int, chips: int) -> list[int]:
    """Threads for each chip.

    >>> thread_shares(2, 1), thread_shares(8, 4), thread_shares(2, 4)
    ([2], [2, 2, 2, 2], [1, 1, 1, 1])
    """
    return [max(1, max(1, cores) // chips)] * chips


class Cores:
    """The machine's cores, as a count: a kernel takes one for each of its threads, all at
    once (so a kernel wanting every core cannot hold some while others hold the rest)."""

    def __init__(self, cores: int):
        self.cores = self.free = max(1, cores)
        self.changed = threading.Condition()

    def take(self, n: int) -> None:
        n = min(n, self.cores)  # threads fixed above the cores (tests) take them all
        with self.changed:
            self.changed.wait_for(lambda: self.free >= n)
            self.free -= n

    def give(self, n: int) -> None:
        with self.changed:
            self.free += min(n, self.cores)
            self.changed.notify_all()


class CpuQueue(Queue):
    threads: int

    def __init__(self, chip: int, threads: int = 1, cores: Cores | None = None,
                 pool: ThreadPoolExecutor | None = None):
        """`cores`: shared by the chips of a run (None: no count kept); `pool`: the chip's
        worker thread, kept by the device from run to run (its Numba thread team with it),
        else one of the queue's own."""
        self.chip = chip
        self.cores = cores  # one held for each thread of a running kernel
        self.own_pool = pool is None
        self.pool = pool or chip_thread(chip, threads)
        self.last: Future | None = None
        self.busy = 0.0
        self.cpu = 0.0
        self.threads = threads
        self.error: BaseException | None = None
        self.timed: list[tuple[str, float]] = []  # (kernel kind, seconds) per launch

    def _submit(self, work, wait: Future | None = None, threads: int = 0, what: tuple | None = None) -> None:
        """`threads`: the cores the work holds while it runs (0: none counted)."""
        def step():
            if self.error is not None:
                return
            try:
                if wait is not None:
                    wait.result()  # another chip's work this one needs
                if threads and self.cores is not None:
                    self.cores.take(threads)  # (waiting for cores is not counted as busy)
                try:
                    started, cpu = time.perf_counter(), time.thread_time()
                    work()
                    ended = time.perf_counter()
                    self.busy += ended - started
                    if what is not None and what[0] == "kernel":
                        self.timed.append((what[1].kernel.kind, ended - started))
                    self.cpu += time.thread_time() - cpu
                    if self.trace is not None and what is not None:
                        self.trace.append((what, started, ended))
                finally:
                    if threads and self.cores is not None:
                        self.cores.give(threads)
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
        kernel = cast(CpuCompiled, compiled)  # this device's own
        fn, threads = kernel.fn, kernel.threads or self.threads
        if threads == self.threads:
            work = lambda: fn(*buffers)  # noqa: E731
        else:  # a shared spine kernel: every core, from this chip's thread

            def work():
                _threads(threads)
                try:
                    fn(*buffers)
                finally:
                    _threads(self.threads)

        self._submit(work, threads=threads, what=("kernel", compiled))

    def mark(self):
        return self.last

    def copy_from(self, source: "CpuQueue", buffer, after=None):
        out = np.empty_like(buffer)
        self._submit(lambda: np.copyto(out, buffer), wait=after or source.last,
                     what=("transfer", source.chip, out.nbytes))
        return out

    def share_from(self, source: "CpuQueue", buffer, after=None, moved: bool = False):
        """(`moved`: a transfer read in place, traced as one.)"""
        self._submit(lambda: None, wait=after or source.last,  # this chip's next work waits for the buffer
                     what=("transfer", source.chip, buffer.nbytes, "read") if moved else None)
        return buffer

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
    def __init__(self, kernel, source: str, fn, threads: int | None = None, compiles: bool = True):
        """`threads`: a shared spine kernel's (every core); None: the chip's own share."""
        super().__init__(kernel, source, launches=1, compiles=compiles)
        self.fn = fn
        self.threads = threads


class CpuDevice(Device):
    name = "cpu"
    shares_spine = True

    def __init__(self, matmul: str = "auto", threads: int | None = None):
        """`threads`: a fixed thread count for every chip (tests), instead of the cores' share."""
        import numba

        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # read when OpenMP loads (the module's docstring)
        self._compiled: dict[str, object] = {}
        self._rendered: dict[tuple, tuple] = {}  # (kernel, shared, threads) → render's
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
        self.threads = self.fixed or thread_shares(self.cores, chips)[0]  # every chip gets the same share

    def describe(self) -> str:
        import numba

        n = numba.config.NUMBA_NUM_THREADS
        return f"cpu (numba {numba.__version__}, {n} thread{'' if n == 1 else 's'}; matmul: {self.core.library})"

    def compile(self, kernel, shared: bool = False) -> Compiled:
        move = moves.mover(kernel)
        if move is not None:  # moves memory or adds exactly: numpy runs it, nothing to compile (codegen/moves.py)
            return CpuCompiled(kernel, moves.describe(kernel), move, self._threads(shared) if shared else None,
                               compiles=False)
        kernel, source, threads = self.render(kernel, shared)
        fn = self._compiled.get(source)
        if fn is None:
            try:  # now, not at the first launch (or load Numba's cache)
                fn = cache.compiled(source, "cpu", signature(kernel))
            except Exception as err:  # noqa: BLE001 - Numba's many errors, as one line naming the group
                raise CompileFailed(failed_line(kernel, err)) from None
            self._compiled[source] = fn
        return CpuCompiled(kernel, source, fn, threads if shared else None)

    def _threads(self, shared: bool) -> int:
        """A kernel's threads: a shared spine kernel's every core, else the chip's share."""
        return max(self.threads, self.cores) if shared and not self.fixed else self.threads

    def render(self, kernel, shared: bool = False):
        """The kernel as the rendered source runs it (its scratch parameters added), the
        source, and the threads it runs on (kept: `warm` renders what `compile` then takes)."""
        key = (kernel, shared, self.threads)
        if key not in self._rendered:
            self._rendered[key] = self._render(kernel, shared)
        return self._rendered[key]

    def _render(self, kernel, shared: bool):
        threads = self._threads(shared)
        blas = self.core.kind == "blas"
        source, scratch = cpu.render_params(kernel, gemm=blas, threads=threads)
        if blas:  # attention's stages run tile by tile: their scratch buffers are never made
            kernel = attention.without_tiled_buffers(kernel)
        else:
            kernel = attention.unfold(kernel)  # (as cpu.render runs it)
        if scratch:  # operand buffers the runtime allocates (codegen/render/emit.py RUNTIME_BUFFER_BYTES)
            kernel = replace(kernel, params=kernel.params + scratch)
        return kernel, source, threads

    def warm(self, kernels: Sequence[tuple], jobs: int, done=None) -> dict[str, float]:
        """Compile the distinct sources of `kernels` ((kernel, shared) each) that Numba's cache
        lacks in `jobs` worker processes (runtime/devices/pool.py), so that `compile` then loads
        each from the cache; returns source → the seconds a worker took to compile it.
        `done()` is called once for each source compiled."""
        work: dict[str, tuple] = {}
        if jobs < 2:
            return {}
        for kernel, shared in kernels:
            if moves.mover(kernel) is not None:
                continue
            kernel, source, _ = self.render(kernel, shared)
            if source not in self._compiled and source not in work and not cache.machine_code(source, "cpu"):
                work[source] = (source, "cpu", signature_spec(kernel))
        items = list(work.values())
        found = pool.compile_all(items, jobs, (lambda i: done()) if done else None)
        return {items[i][0]: seconds for i, (seconds, error) in found.items() if error is None}

    def queues(self, chips: Sequence[int], gpu: int | None = None) -> list[Queue]:
        shares = [self.fixed] * len(chips) if self.fixed else thread_shares(self.cores, len(chips))
        cores = Cores(self.cores)
        return [CpuQueue(c, n, cores, self._pool(c, n)) for c, n in zip(chips, shares)]

    def _pool(self, chip: int, threads: int) -> ThreadPoolExecutor:
        pool = self._pools.get((chip, threads))
        if pool is None:
            pool = self._pools[(chip, threads)] = chip_thread(chip, threads)
        return pool


def _threads(n: int) -> None:
    import numba

    numba.set_num_threads(n)  # for parallel loops started from this (the chip's) thread


def signature(kernel) -> tuple:
    return cache.signature_of(signature_spec(kernel))


def signature_spec(kernel) -> tuple[tuple[str, int], ...]:
    """The kernel's arguments as (numpy dtype, ndim): C-contiguous arrays of its storage."""
    from ...program.model import Tensor

    return tuple((np.dtype(Tensor(p.name, p.shape, p.dtype, None).storage).str, len(p.buffer_shape))
                 for p in kernel.params)


def failed_line(kernel, err: BaseException) -> str:
    """A kernel that does not compile, in one line: its group, its members, the compiler's first line."""
    first = next((line.strip() for line in str(err).splitlines() if line.strip()), "")
    return (f"the kernel of group {kernel.group} [{', '.join(kernel.members)}] does not compile: "
            f"{type(err).__name__}{': ' + first if first else ''}")
