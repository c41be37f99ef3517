"""Which chips this process holds, and how it reaches the processes that hold the others.

The executor (runtime/execution/executor.py) runs the same way in one process and on MPI ranks; what differs
is this object, as in mpi4py's demos and Megatron's `parallel_state`: one object owns the
communicator and knows which chips a process holds, and kernels, the planner and the
executor never see MPI.

- `World` (here) is one process holding every chip: nothing is exchanged, and a fold runs
  as its kernel (each chip copies the other chips' partials and adds them).
- `RankWorld` (distributed/world.py) is one MPI rank of N, holding the chips k with
  k mod N == r: a fold alone is a collective on the communicator, and a tensor another
  rank's chip holds comes point-to-point.

>>> world = World(chips=4)
>>> world.chips, world.holds(3), world.holds(None)
((0, 1, 2, 3), True, True)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Traffic:
    """What a process exchanged with the others (nothing, in one process)."""

    allreduces: int = 0
    allreduce_bytes: int = 0  # the rank's payload, summed over its all-reduces
    allreduce_s: float = 0.0  # time in all-reduces, waiting for slower ranks included
    messages: int = 0  # point-to-point, sent and received
    message_bytes: int = 0
    message_s: float = 0.0
    allgathers: int = 0
    allgather_bytes: int = 0  # the rank's payload (its chips' slices), summed over its all-gathers
    allgather_s: float = 0.0
    reducescatters: int = 0
    reducescatter_bytes: int = 0  # what the rank received (its chips' blocks of the sums), over its reduce-scatters
    reducescatter_s: float = 0.0

    def since(self, before: "Traffic") -> "Traffic":
        return Traffic(*(a - b for a, b in zip(self.astuple(), before.astuple())))

    def astuple(self) -> tuple:
        return (self.allreduces, self.allreduce_bytes, self.allreduce_s, self.messages, self.message_bytes,
                self.message_s, self.allgathers, self.allgather_bytes, self.allgather_s, self.reducescatters,
                self.reducescatter_bytes, self.reducescatter_s)


class World:
    """One process that holds every chip of the program (the communicator of size one)."""

    rank = 0
    size = 1
    local_rank = 0  # this process among those on its node
    local_size = 1
    # whether a fold alone is a collective on the communicator (ranks), not a kernel (here)
    collectives = False

    def __init__(self, chips: int = 0):
        self.traffic = Traffic()
        self.assign(chips)

    def assign(self, chips: int) -> None:
        """Hold the chips k with k mod size == rank, of a program on `chips` chips."""
        self.chips_total = chips
        self.chips: tuple[int, ...] = tuple(range(self.rank, chips, self.size))

    def owner(self, chip: int) -> int:
        return chip % self.size

    def chips_of(self, rank: int) -> tuple[int, ...]:
        return tuple(range(rank, self.chips_total, self.size))

    def holds(self, chip: int | None) -> bool:
        """Whether this process holds `chip` (None: the spine, which every process holds)."""
        return chip is None or self.owner(chip) == self.rank

    # -- the communicator: one process holds every chip, so it never exchanges anything
    # (the executor calls these only where `collectives` is set or a chip is another rank's)

    def send(self, array: np.ndarray, to: int, what: str) -> None:
        raise AssertionError(f"one process sends nothing: {what}")

    def recv(self, shape, dtype, source: int, what: str) -> np.ndarray:
        raise AssertionError(f"one process receives nothing: {what}")

    def allreduce(self, partial: np.ndarray, what: str) -> np.ndarray:
        raise AssertionError(f"one process runs a fold as its kernel: {what}")

    def allgather(self, pieces: dict[int, np.ndarray], sizes: dict[int, int], dtype, what: str) -> dict[int, np.ndarray]:
        raise AssertionError(f"one process runs a fold as its kernel: {what}")

    def reduce_scatter(self, send: np.ndarray, counts: list[int], what: str) -> np.ndarray:
        raise AssertionError(f"one process adds each chip's block itself: {what}")

    @property
    def gpu(self) -> int | None:
        """The node's GPU (an index, mod the GPUs there) all this process's chips share;
        None: chip i on GPU i mod k (`Device.queues`)."""
        return None

    def reference(self, prog, inputs: dict):
        """The unfused reference of what this process checks (runtime/values/reference.py: every tensor)."""
        from ..values.reference import reference

        return reference(prog, inputs)
