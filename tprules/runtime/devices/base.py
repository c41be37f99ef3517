"""What the executor asks of a device, and of each chip's queue on it.

A queue runs its work in order (a stream); `copy_from` and `share_from` are the only points
where one chip waits for another, so chips run concurrently between all-reduces. A chip
waits for the work that wrote the buffer (a `mark` taken right after it was enqueued), not
for everything its source has enqueued since: the executor enqueues the chips' kernels in
one order, and chip 0's next kernel is often enqueued before chip 1 asks for what chip 0's
previous one wrote.
"""

from __future__ import annotations

from typing import Self, Sequence

import numpy as np

from ...errors import BadInput


class DeviceUnavailable(BadInput):
    """The device asked for cannot run here (no GPU, the simulator is on, ...)."""

    kind = "device"


class Compiled:
    """A kernel ready to launch: `launch(queue, buffers)` enqueues every stage."""

    def __init__(self, kernel, source: str, launches: int, compiles: bool = True):
        self.kernel = kernel
        self.source = source
        self.launches = launches  # launches per run of the kernel (CUDA: one per stage)
        self.compiles = compiles  # False: numpy runs it (it only moves memory or adds exactly: codegen/moves.py)


class Queue:
    """One chip's stream of work on a device; buffers are the device's arrays."""

    chip: int
    threads: int | None = None  # CPU threads the chip's kernels run on (None: not a CPU)
    trace: list | None = None  # while a run is traced: (what, start, end) of each launch and copy

    def start_trace(self) -> None:
        """From now on, record each launch (("kernel", compiled)) and copy (("transfer", source
        chip, bytes)) with its start and end (runtime/trace.py)."""
        self.trace = []

    def take_trace(self) -> list[tuple]:
        """The records since `start_trace`, times as `time.perf_counter()` seconds (call after
        `synchronize`); recording stops."""
        found, self.trace = self.trace or [], None
        return found

    def upload(self, array: np.ndarray):
        raise NotImplementedError

    def empty(self, shape, dtype: np.dtype):
        raise NotImplementedError

    def zeros(self, shape, dtype: np.dtype):
        raise NotImplementedError

    def launch(self, compiled: Compiled, buffers: list) -> None:
        raise NotImplementedError

    def mark(self):
        """A token for the point this chip's queue has reached: the work enqueued so far
        (None where nothing has been enqueued, or the device keeps no such point)."""
        return None

    def copy_from(self, source: Self, buffer, after=None):
        """A copy, in this chip's memory, of `buffer` held by `source`'s chip; it is taken
        once `source` has done the work up to `after` (a `source.mark()`; None: everything
        `source` has enqueued so far)."""
        raise NotImplementedError

    def share_from(self, source: Self, buffer, after=None, moved: bool = False):
        """`buffer` itself, held by `source`'s chip, for this chip to read once `source` has
        done the work up to `after` (as `copy_from`; devices whose chips share memory:
        `Device.shares_spine`); `moved`: a transfer read in place, traced as one."""
        raise NotImplementedError

    def download(self, buffer) -> np.ndarray:
        raise NotImplementedError

    def synchronize(self) -> None:
        raise NotImplementedError

    def busy_seconds(self) -> float:
        """Time this chip spent running work since the queue was made."""
        raise NotImplementedError

    def cpu_seconds(self) -> float | None:
        """Processor time of that work where the device can tell (a loaded machine's
        waits for a core left out), else None."""
        return None

    def kernel_seconds(self) -> list[tuple[str, float]]:
        """(kernel kind, wall seconds) of each kernel run, where the device times them
        (`run --show timing`); empty where it does not."""
        return []

    def close(self) -> None:
        pass


class Device:
    name: str = "?"
    machine: str = "cpu"  # the planner's cost model for this device (codegen/cost.py MACHINES)
    # whether the chips of one process share memory, so that a spine kernel (the same value on
    # every chip) may run once for all of them and leave its buffers for them to read
    shares_spine: bool = False

    def describe(self) -> str:
        return self.name

    def for_chips(self, chips: int) -> None:
        """Called once before compiling the kernels of a program on `chips` chips."""

    def compile(self, kernel, shared: bool = False) -> Compiled:
        """`shared`: the kernel runs once for every chip of the process (a spine kernel on a
        device that `shares_spine`), not once on each."""
        raise NotImplementedError

    def queues(self, chips: Sequence[int], gpu: int | None = None) -> list[Queue]:
        """A queue for each of `chips` (those of this process; after `for_chips`). `gpu`: the
        GPU (mod the node's) that every chip shares (a rank's: `World.gpu`); None: chip i on
        GPU i mod k."""
        raise NotImplementedError
