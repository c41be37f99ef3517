"""The one object that owns the MPI communicator and knows which chips each rank holds
(as mpi4py's demos and Megatron's `parallel_state` do): kernels, the planner and the
executor never see MPI, and nothing else in tprules imports mpi4py. A `RankWorld` is the
one-process `World` (runtime/execution/world.py) with a communicator: the executor takes either.

Rank r of a world of size N holds the chips k with k mod N == r.

Every wait on other ranks is polled against a deadline (`timeout`): a rank that stops
answering ends the run with an error naming what it waited for, never a hang. Polling
also keeps a waiting rank from spinning a core that a working rank needs (MPICH's
blocking calls busy-wait, which hurts when ranks outnumber cores).
"""

from __future__ import annotations

import os
import socket
import sys
import time
from typing import NoReturn

import numpy as np

from ...errors import BadInput
from ..execution.world import Traffic, World

INSTALL = "pip install -e '.[mpi]' (mpi4py and the mpich wheel)"
DEFAULT_TIMEOUT = 600.0  # seconds, as torch.distributed's default: long compiles stay legal


class MpiMissing(BadInput):
    """No MPI to run ranks with: says in one line what to install."""

    kind = "mpi"


class RankTimeout(Exception):
    """Other ranks did not arrive at a collective within the world's timeout."""


def import_mpi(start: bool = True):
    """`mpi4py.MPI`, or MpiMissing saying what to install. `start=False` only loads the MPI
    library (a launcher checks that its ranks will find one, without becoming a rank)."""
    try:
        import mpi4py

        if not start and "mpi4py.MPI" not in sys.modules:
            mpi4py.rc.initialize = mpi4py.rc.finalize = False
        from mpi4py import MPI
    except ImportError as err:
        raise MpiMissing(f"MPI is not installed ({err}); install it with {INSTALL}") from None
    except (RuntimeError, OSError) as err:  # mpi4py present, no MPI library it can load
        reason = (str(err).strip().splitlines() or ["no reason given"])[0]
        raise MpiMissing(f"mpi4py cannot load an MPI library ({reason}); install one with {INSTALL}") from None
    return MPI


class RankWorld(World):
    """One rank's view of the run: its communicator, rank, host, and chips.

    >>> world = RankWorld.connect(timeout=60)                   # doctest: +SKIP
    >>> world.assign(chips=4); world.chips                      # on rank 1 of 2
    (1, 3)
    """

    def __init__(self, MPI, comm, timeout: float = DEFAULT_TIMEOUT):
        self.MPI = MPI
        self.comm = comm
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self.timeout = timeout
        self.pid = os.getpid()
        self.host = socket.gethostname()
        node = comm.Split_type(MPI.COMM_TYPE_SHARED)
        self.local_rank, self.local_size = node.Get_rank(), node.Get_size()  # ranks on this node (GPU choice)
        node.Free()
        self.chips_total = 0
        self.chips: tuple[int, ...] = ()
        self.traffic = Traffic()

    @classmethod
    def connect(cls, timeout: float = DEFAULT_TIMEOUT) -> "RankWorld":
        MPI = import_mpi()
        return cls(MPI, MPI.COMM_WORLD, timeout)

    @property
    def library(self) -> str:
        """The MPI library in a few words, e.g. `MPICH 5.0.2`."""
        first = self.MPI.Get_library_version().strip().splitlines()[0]
        words = first.replace("Version:", "").replace(",", " ").split()
        return " ".join(words[:2]) if words else "MPI"

    collectives = True  # a fold alone is an all-reduce (or all-gather) on the communicator

    @property
    def gpu(self) -> int:
        """Every chip of a rank shares its node-local GPU (local rank mod the node's GPUs)."""
        return self.local_rank

    def reference(self, prog, inputs: dict):
        """The reference of every tensor this rank computes or receives (reference.py)."""
        from .reference import rank_reference

        return rank_reference(prog, inputs, self)

    def describe(self, rank: int | None = None) -> str:
        """`rank 1 (chips 1, 3)`: how messages name a rank."""
        rank = self.rank if rank is None else rank
        return describe_rank(rank, self.chips_of(rank))

    # -- collectives, each polled against the deadline -------------------------------

    def allreduce(self, partial: np.ndarray, what: str) -> np.ndarray:
        """The sum over every rank of `partial` (float32)."""
        send = np.ascontiguousarray(partial, np.float32)
        total = np.empty_like(send)
        started = time.perf_counter()
        self._wait(self.comm.Iallreduce(send, total, op=self.MPI.SUM), what)
        self.traffic.allreduces += 1
        self.traffic.allreduce_bytes += send.nbytes
        self.traffic.allreduce_s += time.perf_counter() - started
        return total

    def allgather(self, pieces: dict[int, np.ndarray], sizes: dict[int, int], dtype, what: str) -> dict[int, np.ndarray]:
        """Every chip's slice, flat, on every rank (MPI Allgatherv): this rank gives `pieces`
        (its chips' slices); `sizes` is every chip's element count."""
        send = np.concatenate([np.ravel(pieces[c]).astype(dtype, copy=False) for c in self.chips]) \
            if self.chips else np.zeros(0, dtype)
        counts = [sum(sizes[c] for c in self.chips_of(r)) for r in range(self.size)]
        displs = np.concatenate(([0], np.cumsum(counts[:-1]))).astype(int).tolist() if counts else []
        started = time.perf_counter()
        recv = self._allgatherv(send, counts, displs, what)
        self.traffic.allgathers += 1
        self.traffic.allgather_bytes += send.nbytes
        self.traffic.allgather_s += time.perf_counter() - started
        out = {}
        for r in range(self.size):
            at = displs[r]
            for c in self.chips_of(r):
                out[c] = recv[at:at + sizes[c]]
                at += sizes[c]
        return out

    def reduce_scatter(self, send: np.ndarray, counts: list[int], what: str) -> np.ndarray:
        """The sum over every rank of `send` (float32, laid out in rank order), of which this
        rank receives only its part, `counts[rank]` elements (MPI Reduce_scatter): no rank
        ever holds the whole sum."""
        send = np.ascontiguousarray(send, np.float32)
        started = time.perf_counter()
        recv = self._reduce_scatter(send, counts, what)
        self.traffic.reducescatters += 1
        self.traffic.reducescatter_bytes += recv.nbytes
        self.traffic.reducescatter_s += time.perf_counter() - started
        return recv

    def _reduce_scatter(self, send: np.ndarray, counts: list[int], what: str) -> np.ndarray:
        recv = np.empty(counts[self.rank], np.float32)
        self._wait(self.comm.Ireduce_scatter(send, recv, counts, op=self.MPI.SUM), what)
        return recv

    def _allgatherv(self, send: np.ndarray, counts: list[int], displs: list[int], what: str) -> np.ndarray:
        """Every rank's `send` (counts[r] elements from rank r), joined in rank order."""
        recv = np.empty(sum(counts), send.dtype)
        self._wait(self.comm.Iallgatherv(send, [recv, (counts, displs)]), what)
        return recv

    def send(self, array: np.ndarray, to: int, what: str) -> None:
        data = np.ascontiguousarray(array)
        started = time.perf_counter()
        self._wait(self.comm.Isend(data, dest=to), what)
        self._count(data.nbytes, started)

    def recv(self, shape, dtype, source: int, what: str) -> np.ndarray:
        data = np.empty(shape, dtype)
        started = time.perf_counter()
        self._wait(self.comm.Irecv(data, source=source), what)
        self._count(data.nbytes, started)
        return data

    # -- nonblocking, for collective kernels that overlap (runtime/execution/overlap.py) -----------

    def isend(self, array: np.ndarray, to: int) -> "Pending":
        """Start sending `array` to rank `to`; `wait` ends it."""
        data = np.ascontiguousarray(array)
        return Pending(self.comm.Isend(data, dest=to), data, time.perf_counter(), "message")

    def irecv(self, shape, dtype, source: int) -> "Pending":
        """Start receiving an array from rank `source`; `wait` returns it."""
        data = np.empty(shape, dtype)
        return Pending(self.comm.Irecv(data, source=source), data, time.perf_counter(), "message")

    def iallreduce(self, partial: np.ndarray) -> "Pending":
        """Start the sum over every rank of `partial` (float32); `wait` returns it."""
        send = np.ascontiguousarray(partial, np.float32)
        total = np.empty_like(send)
        return Pending(self.comm.Iallreduce(send, total, op=self.MPI.SUM), total, time.perf_counter(), "allreduce",
                       send)

    def progress(self, pending: list["Pending"]) -> None:
        """Let MPI move the transfers started (a Test of each): without a progress thread of
        its own, an MPI library moves a large message only inside its calls."""
        for p in pending:
            if p.finished is None and p.request.Test():
                p.finished = time.perf_counter()

    def wait(self, pending: "Pending", what: str) -> np.ndarray:
        """Wait for a started transfer (polled against the deadline, as every wait); its array."""
        if pending.finished is None:
            self._wait(pending.request, what)
            pending.finished = time.perf_counter()
        if pending.kind == "allreduce":
            self.traffic.allreduces += 1
            self.traffic.allreduce_bytes += pending.data.nbytes
            self.traffic.allreduce_s += pending.done - pending.started
        else:
            self._count(pending.data.nbytes, pending.started)
        return pending.data

    def gather(self, obj, what: str):
        """Every rank's `obj` in rank order on rank 0 (None elsewhere)."""
        self.barrier(what)
        return self.comm.gather(obj, root=0)

    def bcast(self, obj, what: str, root: int = 0):
        """Rank `root`'s `obj` on every rank."""
        self.barrier(what)
        return self.comm.bcast(obj, root=root)

    def barrier(self, what: str) -> None:
        self._wait(self.comm.Ibarrier(), what)

    def abort(self, code: int) -> NoReturn:
        """End every rank of the run now (the launcher reports the exit status)."""
        sys.stdout.flush()
        sys.stderr.flush()
        self.comm.Abort(code)
        os._exit(code)  # MPICH's Abort can return before the process manager ends this process

    def _count(self, nbytes: int, started: float) -> None:
        self.traffic.messages += 1
        self.traffic.message_bytes += nbytes
        self.traffic.message_s += time.perf_counter() - started

    def _wait(self, request, what: str) -> None:
        deadline = time.monotonic() + self.timeout
        pause = 0.0
        while not request.Test():
            if time.monotonic() > deadline:
                raise RankTimeout(f"waited {self.timeout:g} s for {what}; another rank stopped answering")
            time.sleep(pause)
            pause = min(pause * 2 or 2e-6, 1e-3)


class Pending:
    """A started nonblocking transfer: its request, its array (sent, or received into), when it
    started and when it was seen finished (by a `progress` or the `wait`; None before)."""

    def __init__(self, request, data: np.ndarray, started: float, kind: str, keep: np.ndarray | None = None):
        self.request, self.data, self.started, self.kind = request, data, started, kind
        self._keep = keep  # an all-reduce's send buffer, alive until the request ends
        self.finished: float | None = None

    @property
    def done(self) -> float:
        """When it was seen finished (its start, before)."""
        return self.started if self.finished is None else self.finished


def describe_rank(rank: int, chips) -> str:
    chips = list(chips)
    return f"rank {rank} (chip{'' if len(chips) == 1 else 's'} {', '.join(map(str, chips)) or 'none'})"
