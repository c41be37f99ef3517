"""Compile a plan's distinct kernel sources in a pool of processes (`run --jobs N`, `compile`).

Numba compiles one function at a time under the GIL, so a cold run of a program of many
kernels is one core's work, source after source. Here each distinct source that Numba's
on-disk cache does not hold yet is compiled by one of N processes: this one and N − 1
workers (spawned once a process and kept, so a second plan pays no start-up). A worker writes what it compiles into
the shared cache (codegen/cache.py: whole files or none), and the process that runs then
loads each kernel from there. A compile that fails in a worker comes back as its message, not
a traceback, and is compiled again here, where it fails as a compile fails in-process (the
device's error names the group and its members); a worker that dies (killed, out of memory)
leaves its sources to be compiled here.

>>> jobs_count("2"), jobs_count(None) >= 1
(2, True)
"""

from __future__ import annotations

import atexit
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from ...codegen import cache
from ...errors import UsageError

MIN_POOLED = 2  # fewer uncached sources than this are compiled in-process (a worker's start-up costs ~1 s)

_pool: list = []  # (jobs, ProcessPoolExecutor), one a process


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def idle_cores() -> int:
    """The cores that the machine's load leaves to this process (at least 1): a worker
    started while every core is busy only slows the compiles down (its start-up is a second
    of processor time; measured in docs/runtime.md)."""
    n = cores()
    try:
        busy = int(os.getloadavg()[0])  # (this process's own work counts as one)
    except OSError:
        return n
    return max(1, min(n, n - busy + 1))


def jobs_count(text: str | None) -> int:
    """`--jobs`'s value: a count of at least 1 (default: one per idle core, `idle_cores`);
    else a usage error."""
    if text is None:
        return idle_cores()
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise UsageError(f"--jobs takes a count of compiling processes of at least 1, not {text!r}")
    return n


def executor(jobs: int) -> ProcessPoolExecutor:
    """The process's pool of `jobs` workers (made again when another count is asked for)."""
    import multiprocessing

    if _pool and _pool[0][0] == jobs:
        return _pool[0][1]
    shutdown()
    # spawned, not forked: the parent may already run threads (chips' queues, Numba's pool)
    pool = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"))
    _pool.append((jobs, pool))
    return pool


def shutdown(wait: bool = False) -> None:
    """Let the process's pool go (`wait`: until its workers have stopped)."""
    while _pool:
        _pool.pop()[1].shutdown(wait=wait, cancel_futures=True)


atexit.register(shutdown)


def compile_all(work: Sequence[tuple[str, str, tuple]], jobs: int,
                done: Callable[[int], None] | None = None) -> dict[int, tuple[float, str | None]]:
    """Compile work item i = (source, flavour, spec) for each i, `jobs` at a time: this
    process is one of the `jobs` (it takes the items no worker has started, last first), and
    jobs − 1 worker processes take the rest; returns i → (seconds, error or None) for those
    finished (a dead worker's are left out: the caller compiles them itself). `done(i)` is
    called as each ends."""
    if jobs < 2 or len(work) < MIN_POOLED:
        return {}
    found: dict[int, tuple[float, str | None]] = {}
    try:
        pool = executor(jobs - 1)
        futures = [pool.submit(cache.compile_source, *w) for w in work]
    except (OSError, BrokenProcessPool):  # no processes to be had here: compile in-process
        shutdown()
        return found
    for i in reversed(range(len(work))):  # this process's share: what no worker has started yet
        if futures[i].cancel():
            found[i] = cache.compile_source(*work[i])
            if done:
                done(i)
    for i, f in enumerate(futures):
        if i in found:
            continue
        try:
            found[i] = f.result()
        except BrokenProcessPool:
            shutdown(wait=True)  # a worker died (the others are stopped): the rest are compiled in-process
            for flavour in {w[1] for w in work}:
                cache.sweep(flavour)  # what the pool's workers were writing as they were stopped
            break
        if done:
            done(i)
    return found
