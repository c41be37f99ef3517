"""Ranks as threads of the test process: `RankWorld` with its transport replaced by queues
and a barrier, so the rank code itself (executor, reference, collect) runs for many plans
and rank counts without starting processes. The real MPI path is tested through the
command line (test_ranks_cli.py)."""

from __future__ import annotations

import queue
import threading
import time

import numpy as np

from tprules.runtime.distributed.job import Job
from tprules.runtime.distributed.rank import RankOptions, run_job
from tprules.runtime.distributed.world import Pending, RankWorld, Traffic


class _Hub:
    def __init__(self, size: int):
        self.size = size
        self.barrier = threading.Barrier(size, timeout=120)
        self.slots: list = [None] * size
        self.pipes = {(a, b): queue.Queue() for a in range(size) for b in range(size)}


class ThreadWorld(RankWorld):
    def __init__(self, hub: _Hub, rank: int):
        self.hub, self.rank, self.size = hub, rank, hub.size
        self.timeout, self.pid, self.host = 120.0, 1000 + rank, "thread"
        self.local_rank, self.local_size = rank, hub.size
        self.chips_total, self.chips, self.traffic = 0, (), Traffic()

    @property
    def library(self) -> str:
        return "threads"

    def _exchange(self, value):
        self.hub.slots[self.rank] = value
        self.hub.barrier.wait()
        everything = list(self.hub.slots)
        self.hub.barrier.wait()
        return everything

    def allreduce(self, partial, what):
        started = time.perf_counter()
        parts = self._exchange(np.ascontiguousarray(partial, np.float32))
        total = parts[0].copy()
        for p in parts[1:]:
            total = total + p
        self.traffic.allreduces += 1
        self.traffic.allreduce_bytes += parts[self.rank].nbytes
        self.traffic.allreduce_s += time.perf_counter() - started
        return total

    def _allgatherv(self, send, counts, displs, what):
        parts = self._exchange(np.array(send, copy=True))
        assert [len(p) for p in parts] == counts, what
        return np.concatenate(parts)

    def _reduce_scatter(self, send, counts, what):
        parts = self._exchange(np.array(send, copy=True))
        assert [len(p) for p in parts] == [sum(counts)] * self.size, what
        total = parts[0].copy()
        for p in parts[1:]:
            total = total + p
        at = sum(counts[:self.rank])
        return total[at:at + counts[self.rank]].copy()  # only this rank's part leaves the exchange

    def send(self, array, to, what):
        self.hub.pipes[self.rank, to].put(np.array(array, copy=True))
        self._count(array.nbytes, time.perf_counter())

    def recv(self, shape, dtype, source, what):
        data = self.hub.pipes[source, self.rank].get(timeout=120)
        assert data.shape == tuple(shape) and data.dtype == np.dtype(dtype), what
        self._count(data.nbytes, time.perf_counter())
        return data

    # nonblocking (collective kernels, runtime/execution/overlap.py): a send is put at once, a receive
    # taken at its wait, an all-reduce exchanged when started (every rank starts them in order)
    def isend(self, array, to):
        self.hub.pipes[self.rank, to].put(np.array(array, copy=True))
        sent = Pending(None, np.asarray(array), time.perf_counter(), "message")
        sent.finished = sent.started
        return sent

    def irecv(self, shape, dtype, source):
        pending = Pending(None, np.empty(shape, dtype), time.perf_counter(), "message")
        pending.source = source
        return pending

    def iallreduce(self, partial):
        total = Pending(None, self.allreduce(partial, "an all-reduce started"), time.perf_counter(), "allreduce")
        total.finished = total.started
        return total

    def progress(self, pending):
        pass  # the queues move everything at once

    def wait(self, pending, what):
        if getattr(pending, "source", None) is not None:
            data = self.hub.pipes[pending.source, self.rank].get(timeout=120)
            assert data.shape == pending.data.shape and data.dtype == pending.data.dtype, what
            pending.data, pending.source = data, None
        if pending.finished is None:
            pending.finished = time.perf_counter()
        return pending.data

    def gather(self, obj, what):
        everything = self._exchange(obj)
        return everything if self.rank == 0 else None

    def bcast(self, obj, what, root=0):
        return self._exchange(obj)[root]

    def barrier(self, what):
        self.hub.barrier.wait()


def run_on_threads(prog, plan, ranks: int, device: str = "cpu", repeat: int = 1, matmul: str = "auto",
                   show_kernels=None):
    """The report rank 0 makes of `plan` run on `ranks` thread ranks (a DistributedReport);
    `show_kernels(modules, inputs)` makes rank 0's printer of its kernels, as `run --show kernels`."""
    hub = _Hub(ranks)
    reports, failures = [], []

    def one(rank):
        world = ThreadWorld(hub, rank)
        world.assign(prog.chips)
        try:
            options = RankOptions(str(prog.directory), device, repeat, matmul=matmul, show_kernels=show_kernels)
            run_job(world, Job(prog, plan), options, reports.append, time.time())
        except BaseException as err:  # noqa: BLE001 - raised again in the test's thread
            failures.append(err)
            hub.barrier.abort()

    threads = [threading.Thread(target=one, args=(r,), name=f"rank{r}") for r in range(ranks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise failures[0]
    (report,) = reports
    return report
