"""Run compiled kernels on one device queue per chip, in one process or as one MPI rank.

A kernel runs where its group's place says: on chip K, or on every chip (spine groups and
folds). Every tensor is held by the chips that computed it (a spine tensor by all of
them); a kernel that reads a tensor its chip does not hold first copies it from a chip
that does, once the producer's kernel is done (its queue's `mark`). A fold alone is
therefore a real all-reduce: each chip receives every other chip's partial into its own
buffer and sums them there with the fold's kernel. A fold fused into a bigger group reads
only its own chip's partial (a `local` parameter): the local sum that the collective_fold
rule exists to refuse.

On a device whose chips share the process's memory (`Device.shares_spine`, the CPU) a spine
kernel runs once, on chip 0, and every other chip that reads what it wrote reads chip 0's
buffer where it lies (`Queue.share_from`: no copy, only a wait for the kernel), instead of
each chip computing the same value again. A fold alone reads the other chips' partials
(an all-gather's `cat` their slices) where they lie too: each is still a transfer, counted
and traced (`read from chip k`), but nothing is copied. Nothing ever writes into a buffer a
kernel reads, so sharing it is safe. The ranks of `--ranks`/`--mpi` keep a copy on each chip.
On such a device the kernels are launched in a list schedule's order (runtime/execution/launch_order.py): the spine
kernel that other chips wait for goes ahead of one that none does.

The executor is parameterised by a world (runtime/execution/world.py): which chips this process holds, and
how it reaches the others. In one process (`World`) it holds every chip. As one MPI rank
(`distributed.world.RankWorld`) every rank walks the whole ordered plan, so all ranks know
where every tensor is held (a chip of another rank holds it as `REMOTE`) and take part in
the same exchanges in the same order (so they cannot deadlock):

- a kernel placed on chip k runs on the rank holding k; a spine kernel on every rank, on
  each of its chips (replicated, as in real tensor parallelism);
- a fold alone (a `collective` group) is an all-reduce: each rank first sums the partials
  its own chips hold (in operand order, float32), then the world adds the ranks' sums, and
  every chip receives the fold's value in its destination's dtype; an all-gather's fold
  (a `cat`) is an all-gather of every rank's chips' slices, joined in chip order;
- a reduce-scatter's fold alone (runtime/plan/reduce_scatter.py), in one process as on ranks, is a reduce-scatter:
  chip k receives only block k of the sum (on ranks, the world's reduce-scatter of each
  rank's local partial sum), and its slice reads that block;
- a tensor a chip needs from another rank's chip comes point-to-point through the world.

The collectives run on host buffers: a GPU rank downloads its partials, reduces on the
host, and uploads the result (docs/distributed.md).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ...codegen.ir import Kernel
from ...ops import Ops
from ...program.model import Program
from ..devices.base import Compiled, Queue
from ..plan.collective import CollectiveKernel
from ..plan.reduce_scatter import Scatter, reduce_scatters
from ..trace import HOST, member_modules
from ..values.semantics import store
from .buffers import REMOTE, buffers
from .world import Traffic, World


@dataclass
class Execution:
    """What one run left: program outputs per chip (of this process) that holds them, and
    per-chip counts."""

    outputs: dict[str, dict[int, np.ndarray]]
    kernels: dict[int, int]  # chip → kernels run
    launches: dict[int, int]  # chip → device launches (a CUDA kernel launches once per stage)
    busy: dict[int, float]
    seconds: float
    cpu: dict[int, float | None] = field(default_factory=dict)  # see Queue.cpu_seconds
    transfers: int = 0  # copies between chips of this process
    moved_bytes: int = 0
    held: dict[str, dict[int, object]] = field(default_factory=dict)
    threads: dict[int, int | None] = field(default_factory=dict)  # chip → CPU threads (see Queue.threads)
    process_cpu: float = 0.0  # processor time of the whole process (every thread) while the kernels ran
    kernel_seconds: list[tuple[str, float]] = field(default_factory=list)  # (kind, s) per kernel run, every chip
    traffic: Traffic = field(default_factory=Traffic)  # what this process exchanged with other ranks


def chips_of(kernel: Kernel, chips: int) -> list[int]:
    if kernel.place.startswith("chip:"):
        return [int(kernel.place.split(":")[1])]
    return list(range(chips))  # spine, or a fold's all-reduce


def runs_here(kernel: Kernel, world: World, scatters=frozenset()) -> bool:
    """Whether this process launches the kernel: one of its chips runs it (a fold alone on
    ranks is a collective, not a kernel, and so is a reduce-scatter's fold alone, one of
    `scatters`, everywhere)."""
    if kernel.place == "collective" and (world.collectives or is_scatter(kernel, scatters)):
        return False
    return any(world.holds(c) for c in chips_of(kernel, world.chips_total))


def is_scatter(kernel: Kernel, scatters) -> bool:
    """Whether the kernel is a reduce-scatter's fold alone (`scatters`: their folds)."""
    return kernel.place == "collective" and len(kernel.members) == 1 and kernel.members[0] in scatters


def shares_spine(device, prog: Program, share: bool = True) -> bool:
    """Whether spine kernels run once for all chips (see the module's docstring); `share`
    False keeps one on each chip wherever they run."""
    return share and device.shares_spine and prog.chips > 1


def kernel_timing(runs) -> dict[str, tuple[int, float]]:
    """Kernel kind → (runs, seconds added up), from (kind, seconds) per kernel run."""
    out: dict[str, tuple[int, float]] = {}
    for kind, seconds in runs:
        n, total = out.get(kind, (0, 0.0))
        out[kind] = (n + 1, total + seconds)
    return out


class Executor:
    def __init__(self, prog: Program, device, kernels: list[Kernel], compiled: list[Compiled | None],
                 inputs: dict[str, np.ndarray], share: bool = True, world: World | None = None,
                 spans: dict[int, CollectiveKernel] | None = None):
        """`kernels` in an order where producers come first, `compiled[i]` kernel i as the
        device runs it (None where no chip of this process runs it); `inputs` those of
        this process's chips and the spine's; `share` False: every chip runs each spine
        kernel, even where they could share it; `world`: one process holding every chip
        unless given; `spans`: where each collective kernel's parts begin in `kernels`
        (runtime/plan/collective.py; on ranks each runs as one overlapped kernel, runtime/execution/overlap.py)."""
        self.prog = prog
        self.spans = spans or {}
        self.device = device
        self.kernels = kernels
        self.compiled = compiled
        self.inputs = inputs
        self.share = shares_spine(device, prog, share)
        self.world = world or World(prog.chips)
        self.scatters = reduce_scatters(prog)
        self.order = None  # launch order where it is not plan order
        if self.share and not self.world.collectives:
            from ...codegen.cost import MACHINES, estimate
            from .launch_order import launch_order

            machine = MACHINES["cpu"]
            ks = [c.kernel if c is not None else k for k, c in zip(kernels, compiled)]
            self.order = launch_order(ks, [machine.seconds(estimate(k, machine)) for k in ks])

    def run(self, progress=None, trace=None) -> Execution:
        """One run; `trace` (a runtime/trace.py `Trace`) gets every launch, copy and exchange of it."""
        prog, world = self.prog, self.world
        queues = {q.chip: q for q in self.device.queues(world.chips, world.gpu)}
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
            run = _Run(prog, world, queues, held, self.share, trace, self.scatters)
            started, cpu = time.perf_counter(), time.process_time()
            if self.order is not None:  # chips sharing the cores: a list schedule (runtime/execution/launch_order.py)
                for at in self.order:
                    run.launch(self.kernels[at], self.compiled[at])
                    if progress is not None:
                        progress()
            else:
                self._in_plan_order(run, progress)
            for q in queues.values():
                q.synchronize()
            seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
            if trace is not None:
                trace.host("run", "run", started, started + seconds)
                for q in queues.values():
                    trace.queue_records(q.chip, q.take_trace(), prog, self.device.machine)
            outputs = {t: {c: queues[c].download(buf).reshape(prog.tensors[t].shape)
                           for c, buf in held[t].items() if c in queues}
                       for t in prog.outputs}
            return Execution(outputs, run.kernels, run.launches, {c: q.busy_seconds() for c, q in queues.items()},
                             seconds, {c: q.cpu_seconds() for c, q in queues.items()}, run.transfers, run.moved, held,
                             {c: q.threads for c, q in queues.items()}, cpu,
                             [t for q in queues.values() for t in q.kernel_seconds()], world.traffic.since(before))
        finally:
            for q in queues.values():
                q.close()


    def _in_plan_order(self, run: "_Run", progress) -> None:
        """Every kernel launched in plan order; on ranks a collective kernel's parts as one
        overlapped kernel."""
        at = 0
        while at < len(self.kernels):
            step = 1
            kernel = self.spans.get(at)
            if kernel is not None and self.world.collectives:  # one overlapped collective kernel on ranks
                run.collective_kernel(kernel)
                step = len(kernel.parts)
            else:
                run.launch(self.kernels[at], self.compiled[at])
            at += step
            if progress is not None:
                for _ in range(step):
                    progress()


class _Run:
    def __init__(self, prog: Program, world: World, queues: dict[int, Queue], held: dict, share: bool = False,
                 trace=None, scatters: dict[str, Scatter] | None = None):
        self.prog = prog
        self.scatters = scatters or {}
        self.world = world
        self.queues = queues
        self.held = held
        self.share = share
        self.trace = trace
        self.shared: set[str] = set()  # tensors written by a spine kernel that ran once for all chips
        self.ready: dict[tuple[str, int], object] = {}  # (tensor, chip) → the chip's mark after its writer
        self.kernels = {c: 0 for c in queues}
        self.launches = {c: 0 for c in queues}
        self.transfers = 0
        self.moved = 0

    def source(self, tensor: str) -> int:
        """The chip a copy of `tensor` comes from: its home when that holds it, else the lowest."""
        where = self.held[tensor]
        home = self.prog.tensors[tensor].home
        return home if home is not None and home in where else min(where)

    def in_place(self, tensor: str, chip: int):
        """`on`, for a fold alone on chips that share memory: another chip's partial (or
        slice) is read where it lies once its writer is done, no copy made. It is still a
        transfer, counted and traced as one: what the collective moves."""
        return self.on(tensor, chip, in_place=True)

    def on(self, tensor: str, chip: int, in_place: bool = False):
        """The tensor's buffer on `chip` (REMOTE for another rank's chip), moved there if need be
        (`in_place`: between chips of this process, a transfer that reads it where it lies)."""
        where = self.held[tensor]
        if chip in where:
            return where[chip]
        src = self.source(tensor)
        here, there = chip in self.queues, src in self.queues
        if here and there:
            after = self.ready.get((tensor, src))
            if tensor in self.shared:
                buf = self.queues[chip].share_from(self.queues[src], where[src], after)
            else:
                buf = (self.queues[chip].share_from(self.queues[src], where[src], after, moved=True) if in_place
                       else self.queues[chip].copy_from(self.queues[src], where[src], after))
                self.transfers += 1
                self.moved += buf.nbytes
        elif there:
            what = f"{tensor} from chip {src} to chip {chip}"
            began = time.perf_counter()
            data = self.queues[src].download(where[src])
            self.world.send(data, self.world.owner(chip), what)
            self._traced(f"send {what}", began, bytes=data.nbytes, to_rank=self.world.owner(chip))
            buf = REMOTE
        elif here:
            what, info = f"{tensor} from chip {src} to chip {chip}", self.prog.tensors[tensor]
            began = time.perf_counter()
            data = self.world.recv(info.buffer_shape, info.storage, self.world.owner(src), what)
            buf = self.queues[chip].upload(data)
            self._traced(f"recv {what}", began, bytes=data.nbytes, from_rank=self.world.owner(src))
        else:
            buf = REMOTE
        where[chip] = buf
        return buf

    def launch(self, kernel: Kernel, compiled: Compiled | None) -> None:
        """Kernel `kernel` on each of its chips this process holds (`compiled`: as the device
        runs it), or, on ranks, a fold alone as a collective (a reduce-scatter's everywhere)."""
        if is_scatter(kernel, self.scatters):
            fold = self.prog.statement(kernel.members[0])
            self.reducescatter(fold, self.scatters[fold.name], kernel.group)
            return
        if kernel.place == "collective" and self.world.collectives:
            for name in kernel.members:
                fold = self.prog.statement(name)
                self.allgather(fold, kernel.group) if fold.cls == Ops.CAT else self.allreduce(fold, kernel.group)
            return
        kernel = compiled.kernel if compiled is not None else kernel
        chips = chips_of(kernel, self.prog.chips)
        on = self.in_place if self.share and kernel.place == "collective" else self.on
        if self.share and kernel.place == "spine":
            chips = chips[:1]
            self.shared.update(p.tensor for p in kernel.params if p.role == "out" and p.tensor is not None)
        for chip in chips:
            q = self.queues.get(chip)
            bufs = buffers(kernel, chip, q, on, self.held, REMOTE)
            if q is None:  # another rank's chip: only where its outputs are held was recorded
                continue
            assert compiled is not None  # compiled for every kernel that runs on a chip held here
            q.launch(compiled, bufs)
            mark = q.mark()
            for p in kernel.params:
                if p.role == "out" and p.tensor is not None:
                    self.ready[(p.tensor, chip)] = mark
            self.kernels[chip] += 1
            self.launches[chip] += compiled.launches

    def collective_kernel(self, kernel: CollectiveKernel) -> None:
        """A collective kernel on ranks, overlapping its transfer with its compute (runtime/execution/overlap.py)."""
        from .overlap import RUNS, blas_threads

        with blas_threads(self.world):
            RUNS[kernel.pattern](self, kernel)
        for chip in self.queues:
            self.kernels[chip] += 1

    # -- a fold alone on ranks: a collective on the world's communicator ----------------------

    def allreduce(self, fold, group: str = "") -> None:
        """The fold as a collective: local partials summed first, then the world's all-reduce.
        Its trace slice begins once the local partials are here (the wait for this rank's
        chips is theirs)."""
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
        self._hold_everywhere(fold.writes, value)
        self._traced(f"all_reduce {group or fold.name}", began, "collective", kind="all_reduce", group=group,
                     members=[fold.name], bytes=partial.size * 4, peers=self._peers(), chips=list(self.world.chips),
                     **member_modules(self.prog, [fold.name]))

    def allgather(self, fold, group: str = "") -> None:
        """An all-gather's fold as a collective: each rank gives its chips' slices (operand k
        is chip k's), the world's all-gather, and every chip joins them in chip order along the axis."""
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
        self._hold_everywhere(fold.writes, value)
        self._traced(f"all_gather {group or fold.name}", began, "collective", kind="all_gather", group=group,
                     members=[fold.name], bytes=int(sum(sizes.values())) * np.dtype(dtype).itemsize,
                     peers=self._peers(), chips=list(self.world.chips), **member_modules(self.prog, [fold.name]))

    def reducescatter(self, fold, scatter: Scatter, group: str = "") -> None:
        """A reduce-scatter's fold and its slices as one reduce-scatter: chip k receives
        block k of the sum and nothing more. In one process each chip adds block k of every
        partial (operand order, float32); on ranks each rank adds its chips' partials and
        the world's reduce-scatter leaves each rank its chips' blocks of the sum."""
        out = self.prog.tensors[fold.writes]
        shape, nbytes = out.buffer_shape, 0
        local: dict[int, np.ndarray] = {}  # the partials this process holds, on the host
        for t in fold.reads:
            src = self.source(t)
            if src in self.queues:
                local[src] = self.queues[src].download(self.held[t][src]).reshape(self.prog.tensors[t].shape)
        began = time.perf_counter()
        if self.world.collectives:
            blocks = self._scatter_on_ranks(fold, scatter, local, out.shape)
        else:
            blocks = {chip: self._scatter_here(fold, scatter, local, chip, group) for chip in self.queues}
        for chip, total in blocks.items():
            value = scatter.holding(store(total, out.dtype), chip, out.shape, out.storage)
            nbytes += total.size * 4
            self.held.setdefault(fold.writes, {})[chip] = self.queues[chip].upload(value.reshape(shape))
        for chip in range(self.prog.chips):
            self.held[fold.writes].setdefault(chip, REMOTE)
        if self.world.collectives:
            self._traced(f"reduce_scatter {group or fold.name}", began, "collective", kind="reduce_scatter",
                         group=group, members=[fold.name], bytes=nbytes, axis=scatter.axis, block=scatter.block,
                         peers=self._peers(), chips=list(self.world.chips), **member_modules(self.prog, [fold.name]))

    def _scatter_here(self, fold, scatter: Scatter, local: dict[int, np.ndarray], chip: int, group: str) -> np.ndarray:
        """Chip `chip`'s block of the sum in one process: block `chip` of every chip's partial
        (operand order, float32), each other chip's copied to it (a transfer of one block)."""
        start, total, received = time.perf_counter(), None, 0
        for src, x in local.items():  # operand order: one operand per chip
            moving = time.perf_counter()
            part = scatter.take(x, chip).astype(np.float32, copy=False)
            total = part if total is None else total + part
            if src != chip:
                received += part.size * x.dtype.itemsize
                self.transfers += 1
                if self.trace is not None:
                    self.trace.slice(f"copy from chip {src}", "transfer", chip, moving, time.perf_counter(),
                                     source=src, to=chip, bytes=part.size * x.dtype.itemsize)
        assert total is not None
        self.moved += received
        if self.trace is not None:
            self.trace.slice(f"reduce_scatter {group or fold.name}", "collective", chip, start, time.perf_counter(),
                             kind="reduce_scatter", group=group, members=[fold.name], bytes=received,
                             axis=scatter.axis, block=scatter.block,
                             peers=[c for c in range(self.prog.chips) if c != chip],
                             **member_modules(self.prog, [fold.name]))
        return total

    def _scatter_on_ranks(self, fold, scatter: Scatter, local: dict[int, np.ndarray], shape) -> dict[int, np.ndarray]:
        """This rank's chips' blocks of the sum, from the world's reduce-scatter of this
        rank's partial sum (its blocks laid out in rank order, each rank's chips in order)."""
        partial = None
        for chip in sorted(local):
            x = local[chip].astype(np.float32, copy=False)
            partial = x if partial is None else partial + x
        partial = np.broadcast_to(np.float32(0) if partial is None else partial, shape)
        world = self.world
        order = [c for r in range(world.size) for c in world.chips_of(r)]
        send = np.concatenate([np.ravel(scatter.take(partial, c)) for c in order])
        per_block = send.size // len(order)
        counts = [per_block * len(world.chips_of(r)) for r in range(world.size)]
        got = world.reduce_scatter(send, counts, f"the reduce-scatter {fold.name}")
        block_shape = scatter.take(partial, 0).shape
        return {c: got[i * per_block:(i + 1) * per_block].reshape(block_shape) for i, c in enumerate(world.chips)}

    def _hold_everywhere(self, tensor: str, value: np.ndarray) -> None:
        shape = self.prog.tensors[tensor].buffer_shape
        self.held[tensor] = {c: (self.queues[c].upload(value.reshape(shape)) if c in self.queues else REMOTE)
                             for c in range(self.prog.chips)}

    def _peers(self) -> list[int]:
        return [r for r in range(self.world.size) if r != self.world.rank]

    def _traced(self, name: str, began: float, cat: str = "transfer", **args) -> None:
        if self.trace is not None:
            self.trace.slice(name, cat, HOST, began, time.perf_counter(), **args)
