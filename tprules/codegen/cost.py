"""What a kernel costs: FLOPs, bytes moved and pointwise work, read off its IR, and a time
estimate for a kind of machine.

The estimate follows the rendered kernels (cpu/function.py, cpu/gemm.py, cuda/kernel.py): a matmul's
FLOPs at the machine's matmul rate; every pointwise operation evaluated, counting each
time a fused value is computed again where it is read (a prologue, a row op's input read
in each of its passes); every byte a stage loads from or stores to a buffer; and a fixed
overhead per launch. Layouts are views (render/views.py): a layout member costs only the index
arithmetic of its reader, and a matmul operand that is a view of a buffer goes to BLAS as it
lies, costing its bytes once; a layout that must be computed into a buffer first (not a view,
or read by a core that takes only whole buffers) costs that buffer's bytes, stored and read
back. The estimate counts both (`views`, `copied`) so that `plan --show cost` can say why.
Where the machine runs attention's chain as one stage (`Machine.attention`, lowering/attention.py) the
chain's buffers are tiles in cache: reading and writing them moves no memory.
Planning compares the estimate of a fusion with the estimates of its
parts (planner/cost.py), so only the differences need to be right: launches saved, bytes
not stored and loaded again, work done twice.

>>> CPU.seconds(Estimate(flops=2e9, bytes=0, ops=0, transcendental=0, launches=1)) > 0.02
True
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from math import prod

from .. import ops
from .ir import (
    AbsMax,
    Acc,
    AttentionStage,
    BatchedMatmulStage,
    Concat,
    Expr,
    Gather,
    GroupedMatmulStage,
    Kernel,
    Load,
    MatmulStage,
    Op,
    Pointwise,
    Quant,
    Remap,
    RowOut,
    RowStage,
    ScatterStage,
    Transpose,
    Window,
    children,
    params_read,
)
from .lowering import attention
from .render.views import block, view_of

TRANSCENDENTAL = frozenset(op for op, c in ops.CLASSES.items() if c.transcendental)  # a libm call, not a few instructions


@dataclass(frozen=True)
class Estimate:
    flops: float  # matmul floating point operations (2 m n k each)
    bytes: float  # loaded from and stored to buffers
    ops: float  # pointwise operations evaluated (recomputations included)
    transcendental: float  # of which exp, tanh, sqrt, division
    launches: int
    views: int = 0  # matmul operands read as views of a buffer (layouts that cost nothing)
    copied: float = 0.0  # bytes of matmul operands computed into a buffer first (of `bytes`)

    def __add__(self, other: "Estimate") -> "Estimate":
        return Estimate(self.flops + other.flops, self.bytes + other.bytes, self.ops + other.ops,
                        self.transcendental + other.transcendental, self.launches + other.launches,
                        self.views + other.views, self.copied + other.copied)


ZERO = Estimate(0.0, 0.0, 0.0, 0.0, 0)


@dataclass(frozen=True)
class Link:
    """How a machine's chips send each other a collective's tensors. `direct`: each chip
    receives every other chip's operand, one transfer each (`run` in one process: a fold's
    all-reduce receives N − 1 partials, an all-gather N − 1 slices, a reduce-scatter block k
    of N − 1 partials: 1/N of the all-reduce's bytes; runtime/execution/executor.py);
    `ring`: NCCL's ring, an all-reduce sending 2 (N − 1) / N of the tensor through each chip,
    an all-gather or a reduce-scatter (N − 1) / N (the all-reduce's first half), for one
    latency per collective."""

    name: str
    bandwidth: float  # bytes per second into one chip
    latency_s: float  # per transfer (direct) or per collective (ring)
    algorithm: str  # direct | ring

    def collective(self, kind: str, nbytes: float, chips: int) -> tuple[float, float]:
        """(bytes into one chip, seconds) of an `all_reduce`, `all_gather` or `reduce_scatter`
        whose whole (spine) tensor holds `nbytes`, over `chips`."""
        if chips < 2:
            return 0.0, 0.0
        gather = kind in ("all_gather", "reduce_scatter")  # each chip receives a block of each other chip's
        if self.algorithm == "ring":
            moved = (chips - 1) / chips * nbytes * (1 if gather else 2)
            return moved, self.latency_s + moved / self.bandwidth
        moved = (chips - 1) * (nbytes / chips if gather else nbytes)
        return moved, (chips - 1) * self.latency_s + moved / self.bandwidth


# One process on the CPU: the chips are worker threads over the host's memory, and a
# transfer is an np.copyto queued on the receiving chip (devices/cpu.py): 19 GB/s for a
# 64 MiB float32 buffer on the project's machine (best of 20, load 4.9; 26 GB/s at 16 MiB),
# and a queue submission like a launch, 20 µs.
HOST = Link("host memory", bandwidth=20e9, latency_s=20e-6, algorithm="direct")
# H100/H200 SXM over NVLink 4 (18 links): 450 GB/s each way by NVIDIA's datasheet, 376 GB/s
# measured for P2P writes on an HGX H100 (p2pBandwidthLatencyTest, NVIDIA/nccl issue 1264);
# a small NCCL all-reduce over NVLink takes about 10 µs (nccl-tests' all_reduce_perf of 8
# bytes on two A100s: 9.9 µs, NVIDIA/nccl-tests issue 331). Not what `run --device cuda` does in one process, which
# copies between GPUs through the host (devices/cuda.py), but what a deployment pays.
NVLINK = Link("NVLink 4", bandwidth=376e9, latency_s=10e-6, algorithm="ring")


@dataclass(frozen=True)
class Machine:
    """Rates of one kind of chip, per chip (so per thread share on a CPU)."""

    name: str
    matmul_flops: float  # per second
    bandwidth: float  # bytes per second
    op_s: float  # seconds per pointwise operation
    transcendental_s: float  # seconds per transcendental operation
    launch_s: float  # per launch
    per_stage_launch: bool = False  # a GPU launches a kernel once per stage
    # How a matmul reads an operand computed by a fused prologue: `library` computes it
    # once into a buffer; our CPU `loops` compute A once per element and B once per row
    # of the result; our GPU `tiles` compute each once per tile that reads it.
    operands: str = "library"
    # Whether the matmul core reads a view of a buffer (render/views.py) as it lies: the CPU's
    # BLAS tiles do (an offset, a leading dimension, a flag), and so does the GPU's library
    # split (render/extern.py: a strided block handed to cuBLAS) for a 2-D matmul's operands.
    views: bool = False
    link: Link = HOST  # between its chips: a collective's transfers (plan --show cost)
    # Which of attention's chains (a bmm, the work on its result, the bmm that reads it) run as
    # one stage per head and tile of rows, their buffers tiles that stay in cache (lowering/attention.py):
    # `tiles` every one (the CPU with BLAS), `online` those of a softmax (a GPU), "" none.
    attention: str = ""

    def seconds(self, e: Estimate) -> float:
        return (e.flops / self.matmul_flops + e.bytes / self.bandwidth + e.ops * self.op_s
                + e.transcendental * self.transcendental_s + e.launches * self.launch_s)


# Fitted to the kernels of the benchmark's Llama layer on the project's CPU, one thread each
# (benchmarks/bench_kernels.py): BLAS sgemm on tiles 55 to 80 GFLOP/s, our own loops about
# 20; pointwise code about 40 GB/s (its buffers mostly in cache) and 0.1 ns an operation;
# an exp 5 ns. Launching a kernel on a chip's queue: about 20 µs.
CPU = Machine("cpu", matmul_flops=70e9, bandwidth=40e9, op_s=0.1e-9, transcendental_s=5e-9, launch_s=20e-6,
              views=True, attention="tiles")
CPU_OWN = Machine("cpu (own matmul loops)", matmul_flops=20e9, bandwidth=40e9, op_s=0.1e-9, transcendental_s=5e-9,
                  launch_s=20e-6, operands="loops")
# A data-centre GPU (H100/H200 class), float32 in and out: cuBLAS with TF32 tensor cores
# about 200 TFLOP/s; our shared-memory tiles without tensor cores about 10. Memory about
# 3 TB/s; a launch about 5 µs, one per stage.
GPU = Machine("gpu", matmul_flops=200e12, bandwidth=3e12, op_s=2e-14, transcendental_s=1e-13, launch_s=5e-6,
              per_stage_launch=True, attention="online", views=True, link=NVLINK)
GPU_OWN = Machine("gpu (own tiles)", matmul_flops=10e12, bandwidth=3e12, op_s=2e-14, transcendental_s=1e-13,
                  launch_s=5e-6, per_stage_launch=True, operands="tiles", attention="online", link=NVLINK)
TILE = 16  # the GPU tiles' size (codegen/cuda/kernel.py)
MACHINES = {m.name: m for m in (CPU, CPU_OWN, GPU, GPU_OWN)}

WORD = 4  # every buffer element is kept as a float32, or smaller


def estimate(kernel: Kernel, machine: Machine = CPU) -> Estimate:
    """The work of one run of `kernel` on one chip."""
    total = ZERO
    dtypes = {p.name: p.dtype for p in kernel.params}
    kernel = as_run(kernel, machine)
    for stage in kernel.stages:
        total = total + _stage(stage, machine, dtypes)
    launches = len(kernel.stages) if machine.per_stage_launch else 1
    return replace(total, launches=launches)


def as_run(kernel: Kernel, machine: Machine) -> Kernel:
    """The kernel with the attention stages `machine` does not run as one stage unfolded."""
    if machine.attention == "tiles":
        return kernel
    return attention.unfold(kernel, attention.online if machine.attention == "online" else lambda s: False)


def _stage(stage, machine: Machine, dtypes: dict[str, str], tiled: frozenset[str] = frozenset()) -> Estimate:
    """`tiled`: buffers that are tiles in cache (lowering/attention.py), whose reads and writes move no memory."""
    if isinstance(stage, AttentionStage):
        total = ZERO
        for inner in stage.stages:
            total = total + _stage(inner, machine, dtypes, frozenset(stage.local))
        return total
    stores = sum(st.param not in tiled for st in getattr(stage, "stores", ()))
    if isinstance(stage, Pointwise):
        n = prod(stage.shape)
        return _evaluate([st.value for st in stage.stores], n, stores, tiled)
    if isinstance(stage, MatmulStage):
        mn = stage.m * stage.n
        flops = 2.0 * mn * stage.k * len(stage.matmuls)
        operands = ZERO
        for mm in stage.matmuls:
            for e, side in ((mm.a, "a"), (mm.b, "b")):
                operands = operands + _operand(e, _repeats(machine, stage, side), machine, dtypes, tiled)
        epilogue = _evaluate([st.value for st in stage.stores], mn, stores, tiled)
        return operands + epilogue + Estimate(flops, 0.0, 0.0, 0.0, 0)
    if isinstance(stage, BatchedMatmulStage):  # BLAS per batch on the CPU, else our own loops (render/batched.py)
        mn = stage.batch * stage.m * stage.n
        operands = ZERO
        for mm in stage.matmuls:
            for e, side in ((mm.a, "a"), (mm.b, "b")):
                operands = operands + _operand(e, _repeats(machine, stage, side), machine, dtypes, tiled)
        epilogue = _evaluate([st.value for st in stage.stores], mn, stores, tiled)
        return operands + epilogue + Estimate(2.0 * mn * stage.k * len(stage.matmuls), 0.0, 0.0, 0.0, 0)
    if isinstance(stage, GroupedMatmulStage):
        return _grouped(stage, machine, dtypes, stores, tiled)
    if isinstance(stage, RowStage):
        n = prod(stage.shape)
        # the pass that stores evaluates every row op's input once, with the stores
        total = _evaluate([st.value for st in stage.stores] + [op.x for op in stage.rows], n, stores, tiled)
        for op in stage.rows:
            # each reduction pass evaluates the input again: rmsnorm's sum of squares;
            # softmax's max, then its sum of exp (and an exp again in the pass that stores)
            passes: float = ops.CLASSES[op.cls].passes
            if ops.CLASSES[op.cls].reduction == "select":  # the t-th of k selects t + 1 times over the row
                passes = (stage.shape[-1] + 1) / 2 * op.x.shape[-1]
            elif ops.CLASSES[op.cls].reduction == "count":  # the row's input once, into the sort
                passes = 1
            reads = _evaluate([op.x], n, 0, tiled)
            exps = 2 * n if ops.CLASSES[op.cls].reduction == "max_exp" else 0
            # a stable sort's rank: a merge sort's comparisons, about log2(h) an element
            # (cpu.rank_row, cuda/sort.py)
            sort = n * max(1, op.x.shape[-1] - 1).bit_length() if ops.CLASSES[op.cls].reduction == "count" else 0
            total = total + Estimate(0.0, reads.bytes * passes, reads.ops * passes + 3 * n + sort,
                                     reads.transcendental * passes + exps, 0)
        return total
    if isinstance(stage, AbsMax):
        return _evaluate([stage.value], prod(stage.value.shape))
    if isinstance(stage, ScatterStage):
        # per entry its id and its source, a bounds check and a store (the copy of x before
        # it is a pointwise stage of its own; none where the put_along writes x's buffer)
        n = prod(stage.shape)
        return _evaluate([v for v in (stage.put.index, stage.put.source) if v is not None], n, 1, tiled) \
            + Estimate(0.0, 0.0, 2.0 * n, 0.0, 0)
    raise TypeError(f"not a stage: {stage!r}")


def _grouped(stage: GroupedMatmulStage, machine: Machine, dtypes: dict[str, str], stores: int,
             tiled: frozenset[str]) -> Estimate:
    """A grouped matmul reads A once and each expert's matrix once for all its rows: of E
    experts at most M hold rows, so B's bytes (or its prologue's work) are those of
    min(E, M) experts; the offsets are read once per expert."""
    mm = stage.matmul
    used = min(stage.experts, stage.m) / stage.experts
    a = _operand(mm.a, _repeats(machine, stage, "a"), machine, dtypes, tiled)
    b = _operand(mm.b, _repeats(machine, stage, "b"), machine, dtypes, tiled)
    b = Estimate(b.flops, b.bytes * used, b.ops * used, b.transcendental * used, 0, b.views, b.copied * used)
    offsets = _evaluate([stage.offsets], stage.experts)
    epilogue = _evaluate([st.value for st in stage.stores], stage.m * stage.n, stores, tiled)
    return a + b + offsets + epilogue + Estimate(2.0 * stage.m * stage.n * stage.k, 0.0, 0.0, 0.0, 0)


def _repeats(machine: Machine, stage: MatmulStage | BatchedMatmulStage | GroupedMatmulStage, side: str) -> int:
    """How many times each element of a computed operand is computed (see Machine.operands)."""
    if machine.operands == "loops":
        return 1 if side == "a" else stage.m
    if machine.operands == "tiles":
        return -(-(stage.n if side == "a" else stage.m) // TILE)
    return 1


def _operand(e: Expr, repeats: int, machine: Machine, dtypes: dict[str, str],
             tiled: frozenset[str] = frozenset()) -> Estimate:
    """A matmul operand: read where it lies (a buffer, or on a core that reads views a view
    of one; a tile in cache costs nothing), or (a prologue) computed `repeats` times per element."""
    n = prod(e.shape)
    if isinstance(e, Load) or (isinstance(e, Transpose) and isinstance(e.arg, Load)):
        return Estimate(0.0, 0.0 if params_read(e) <= tiled else n * WORD, 0.0, 0.0, 0)
    if machine.views and machine.operands == "library":
        v = view_of(e, dtypes)
        if v is not None and block(v, *e.shape[-2:]) is not None:
            return Estimate(0.0, 0.0 if v.param in tiled else n * WORD, 0.0, 0.0, 0, views=1)
    work = _evaluate([e], n * repeats, 0, tiled)
    # a library's buffer: stored, read back
    return work + Estimate(0.0, 2 * n * WORD, 0.0, 0.0, 0, copied=2 * n * WORD if _layout(e) else 0.0)


def _layout(e: Expr) -> bool:
    """Whether `e` moves elements only (a layout chain over a buffer), computing nothing."""
    while isinstance(e, (Remap, Transpose)):
        e = e.arg
    return isinstance(e, Load)


def _evaluate(values: list[Expr], n: int, stores: int = 0, tiled: frozenset[str] = frozenset()) -> Estimate:
    """Evaluating `values` at each of `n` indices (shared subexpressions once), and storing
    `stores` values there; loads of `tiled` buffers (tiles in cache) move no memory, and a
    buffer smaller than the pass (a broadcast mask, a norm's weight) is read from memory once."""
    seen: set[Expr] = set()
    loads: dict[str, int] = {}  # buffer → its elements
    ops: float = 0
    transcendental: float = 0

    def walk(e: Expr) -> None:
        nonlocal ops, transcendental
        if e in seen:
            return
        seen.add(e)
        if isinstance(e, Load):
            loads[e.param] = prod(e.shape)
        elif isinstance(e, Op):
            ops += 1
            transcendental += e.cls in TRANSCENDENTAL
            for a in e.args:
                walk(a)
        elif isinstance(e, Remap):  # a layout read: index arithmetic only
            ops += 1
            walk(e.arg)
        elif isinstance(e, (Concat, Gather)):
            ops += 1
            for a in (e.args if isinstance(e, Concat) else (e.table, e.ids)):
                walk(a)
        elif isinstance(e, Window):
            # per tap a multiply-add; what a tap reads (the input) is computed again at every tap
            ops += 2 * e.taps + (e.bias is not None)
            inner = _evaluate(list(e.tapped), 1)
            ops += inner.ops * (e.taps - 1)
            transcendental += inner.transcendental * (e.taps - 1)
            for a in e.operands:
                walk(a)
        elif isinstance(e, (Transpose, Quant)):
            ops += isinstance(e, Quant) * 8  # a rounding to int8 is a handful of operations
            walk(e.arg)
        elif not isinstance(e, (Acc, RowOut)):
            raise TypeError(f"not an expression: {e!r}")

    for v in values:
        walk(v)
    read = sum(min(n, size) for p, size in loads.items() if p not in tiled)
    return Estimate(0.0, float(WORD * (read + n * stores)), float(n * ops), float(n * transcendental), 0)


def weight_bytes(kernel: Kernel, inputs: set[str] | frozenset[str]) -> float:
    """Bytes a run of `kernel` reads from the program's inputs `inputs` (tensors no statement
    writes: weights and constants), as its matmul cores consume them: a matmul's operand
    once per element it holds (a gather of an expert's weights per (token, expert) pair: the
    pairs' matrices, each a copy), a grouped matmul's experts once for the min(E, M) that
    can hold rows, any other read once per element loaded (at most the tensor's size)."""
    read = {p.name for p in kernel.params if p.role == "in" and p.tensor in inputs}
    total = 0.0
    for stage in [s for st in kernel.stages for s in (st.stages if isinstance(st, AttentionStage) else (st,))]:
        if isinstance(stage, (MatmulStage, BatchedMatmulStage, GroupedMatmulStage)):
            used = min(stage.experts, stage.m) / stage.experts if isinstance(stage, GroupedMatmulStage) else 1.0
            for mm in stage.matmuls:
                total += _reads(mm.a, prod(mm.a.shape), read) + used * _reads(mm.b, prod(mm.b.shape), read)
            if isinstance(stage, GroupedMatmulStage):
                total += _reads(stage.offsets, stage.experts, read)
            values = [st.value for st in stage.stores]
            n = stage.m * stage.n * getattr(stage, "batch", 1)
        elif isinstance(stage, (Pointwise, RowStage)):
            values = [st.value for st in stage.stores] + [op.x for op in getattr(stage, "rows", ())]
            n = prod(stage.shape)
        elif isinstance(stage, AbsMax):
            values, n = [stage.value], prod(stage.value.shape)
        elif isinstance(stage, ScatterStage):
            values, n = [v for v in (stage.put.index, stage.put.source) if v is not None], prod(stage.shape)
        else:  # a library's gemm reads buffers the stages before it wrote
            continue
        total += sum(_reads(v, n, read) for v in values)
    return total


def _reads(e: Expr, n: int, read: set[str]) -> float:
    """Bytes of `read` buffers that evaluating `e` at n indices loads: a buffer smaller than
    the pass once (a broadcast weight), but a gather's table once per element gathered."""
    found: dict[str, float] = {}

    def walk(x: Expr, gathered: bool) -> None:
        if isinstance(x, Load):
            if x.param in read:
                found[x.param] = max(found.get(x.param, 0.0), float(n if gathered else min(n, prod(x.shape))))
            return
        if isinstance(x, Gather):
            walk(x.table, True)
            walk(x.ids, gathered)
            return
        for c in (x.operands if isinstance(x, Window) else children(x)):
            walk(c, gathered)

    walk(e, False)
    return WORD * sum(found.values())
