"""Collective kernels as MPI ranks run them, overlapping the transfer with the compute
(runtime/plan/collective.py says what a collective kernel is; runtime/execution/executor.py calls these on ranks).

Each runs on the rank's host, as the ranks' collectives do (docs/distributed.md), with
nonblocking sends and receives of the world (distributed/world.py), and computes every
value with the reference's semantics (runtime/values/semantics.py), so the outputs are the unfused
program's:

- `all_gather_matmul`: a ring. At step s each rank holds the blocks of rank r - s; it sends
  them on to rank r + 1 and receives rank r - s - 1's from rank r - 1, and multiplies the
  blocks it holds while those are in flight. A block of rows gives the rows of the product;
  a block of the contracted axis, a partial product added up in float32.
- `matmul_reduce_scatter`: the receives are posted first; then, one destination rank at a
  time (the next rank first, its own last), the rank computes its chips' partial of that
  rank's blocks and sends it while computing the next. Each rank adds what it received in
  rank order.
- `all_reduce_norm`: the partial sum is all-reduced in row chunks, all started at once; the
  residual add and the norm are applied to each chunk as it arrives.

Every compute and transfer is a slice of `run --trace`: computes on their chip's row,
transfers on the host's, so the overlap shows as slices that run at the same time; each
kernel ends with a slice on the host that says how much of its transfer time its compute hid.
"""

from __future__ import annotations

import contextlib
import os
import time

import numpy as np

from ...ops import Ops
from ..plan.collective import CollectiveKernel
from ..trace import HOST, member_modules
from ..values.semantics import CLASSES, F32, apply, store

CHUNKS = 4  # row chunks of an all_reduce_norm's all-reduce
PIECES = 4  # bands of rows a block's product is computed in, MPI given a turn between them


_BLAS: list = []  # threadpoolctl's controller, made on the first kernel


def blas_threads(world):
    """numpy's BLAS limited to this rank's share of the node's cores while a kernel runs:
    OpenBLAS's default of a thread per core, in every rank of a node, spins against the
    others (a 128 x 256 x 256 product: 0.14 ms alone, 46 ms so on a loaded 2-core machine)."""
    if not _BLAS:
        try:
            from threadpoolctl import ThreadpoolController

            _BLAS.append(ThreadpoolController())
        except ImportError:  # a declared dependency; without it the BLAS keeps its own threads
            _BLAS.append(None)
    if _BLAS[0] is None:
        return contextlib.nullcontext()
    share = max(1, (os.cpu_count() or 1) // max(1, world.local_size))
    return _BLAS[0].limit(limits=share, user_api="blas")


class Timeline:
    """The compute and transfer intervals of one kernel run, for its trace slices and the
    time hidden by overlap (compute time while a transfer was in flight)."""

    def __init__(self, run, kernel: CollectiveKernel):
        self.run, self.kernel = run, kernel
        self.started = time.perf_counter()
        self.computes: list[tuple[float, float]] = []
        self.transfers: list[tuple[float, float]] = []

    def compute(self, name: str, chip: int, start: float, **args) -> None:
        end = time.perf_counter()
        self.computes.append((start, end))
        if self.run.trace is not None:
            self.run.trace.slice(name, "kernel", chip, start, end, group=self.kernel.group,
                                 pattern=self.kernel.pattern, **args)

    def transfer(self, name: str, pending, **args) -> None:
        self.transfers.append((pending.started, pending.done))
        if self.run.trace is not None:
            self.run.trace.slice(name, "transfer", HOST, pending.started, pending.done, group=self.kernel.group,
                                 pattern=self.kernel.pattern, bytes=int(pending.data.nbytes), **args)

    def close(self) -> float:
        """The kernel's slice; returns the seconds of compute that ran while a transfer was in flight."""
        end = time.perf_counter()
        busy = _union(self.transfers)
        hidden = sum(_overlap(c, busy) for c in self.computes)
        if self.run.trace is not None:
            k = self.kernel
            self.run.trace.slice(f"{k.pattern} {k.group}", "collective", HOST, self.started, end, kind=k.pattern,
                                 group=k.group, members=list(k.members), hidden_s=hidden,
                                 transfer_s=sum(b - a for a, b in busy),
                                 compute_s=sum(b - a for a, b in _union(self.computes)), peers=self.run._peers(),
                                 chips=list(self.run.world.chips), **member_modules(self.run.prog, list(k.members)))
        return hidden


def _union(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _overlap(span: tuple[float, float], busy: list[tuple[float, float]]) -> float:
    a, b = span
    return sum(max(0.0, min(b, y) - max(a, x)) for x, y in busy)


def host_value(run, tensor: str, chip: int) -> np.ndarray:
    """Tensor `tensor` as chip `chip` (of this rank) holds it, on the host, in its shape."""
    return run.queues[chip].download(run.held[tensor][chip]).reshape(run.prog.tensors[tensor].shape)


def chip_of(run, statement: str) -> int:
    return int(run.prog.places[statement].split(":")[1])


def _hold(run, tensor: str, values: dict[int, np.ndarray]) -> None:
    """`values` (chip → value) held on this rank's chips; the other chips' as REMOTE."""
    from .buffers import REMOTE

    shape = run.prog.tensors[tensor].buffer_shape
    held = run.held.setdefault(tensor, {})
    for chip in range(run.prog.chips):
        held[chip] = run.queues[chip].upload(np.ascontiguousarray(values[chip]).reshape(shape)) \
            if chip in values else REMOTE


def _matmul(attrs: dict, a: np.ndarray, b: np.ndarray, poke=None) -> np.ndarray:
    """A @ B in float32, not yet stored in a destination's dtype. With `poke` (a call that
    lets MPI move the transfers in flight: an MPI library without a progress thread moves a
    large message only inside its calls), a 2-D A is multiplied in `PIECES` bands of rows,
    poked between them."""
    a, b = np.asarray(a, F32), np.asarray(b, F32)
    with np.errstate(all="ignore"):
        if poke is None or a.ndim != 2 or len(a) < 2 * PIECES:
            return np.asarray(CLASSES[Ops.MATMUL](attrs, a, b), F32)
        bounds = np.linspace(0, len(a), PIECES + 1).astype(int).tolist()
        out = []
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            out.append(np.asarray(CLASSES[Ops.MATMUL](attrs, a[lo:hi], b), F32))
            poke()
        return np.concatenate(out)


def _block(axis: int, start: int, size: int, ndim: int) -> tuple:
    at = [slice(None)] * ndim
    at[axis] = slice(start, start + size)
    return tuple(at)


# -- all_gather_matmul: a ring -------------------------------------------------------------

def all_gather_matmul(run, kernel: CollectiveKernel) -> None:
    prog, world = run.prog, run.world
    fold = prog.statement(kernel.fold)
    out = prog.tensors[fold.writes]
    ndim = len(out.shape)
    axis = int(dict(fold.attrs)["axis"]) % ndim
    mms = [prog.statement(o) for o in kernel.members if o != kernel.fold]
    for m in mms:  # every rank, in order: the operands a matmul's chip lacks come point-to-point
        for t in m.reads[1:]:
            run.on(t, chip_of(run, m.name))
    mine = [m for m in mms if world.holds(chip_of(run, m.name))]
    weights = {m.name: host_value(run, m.reads[1], chip_of(run, m.name)) for m in mine}
    shapes = [prog.tensors[t].shape for t in fold.reads]
    offset = np.concatenate(([0], np.cumsum([s[axis] for s in shapes]))).tolist()
    dtype = np.dtype(out.storage)
    contracted = axis == ndim - 1
    whole = any(m.quantized for m in mine)  # a quantized read's scale is the whole tensor's: after the ring
    results: dict[str, np.ndarray] = {}
    for m in mine:
        shape = prog.tensors[m.writes].shape
        results[m.name] = np.zeros(shape, F32)
    gathered: dict[int, np.ndarray] = {}
    line = Timeline(run, kernel)

    def multiply(chip: int, x: np.ndarray) -> None:
        gathered[chip] = x
        if whole:
            return
        size = shapes[chip][axis]
        for m in mine:
            began = time.perf_counter()
            attrs, w = dict(m.attrs), weights[m.name]
            if contracted:  # a block of the contracted axis: a partial product
                rows = (slice(None), slice(offset[chip], offset[chip] + size)) if m.attr("transpose_b") == "1" \
                    else (slice(offset[chip], offset[chip] + size), slice(None))
                results[m.name] += _matmul(attrs, x, w[rows], poke)
            else:  # a block of rows of the product
                results[m.name][_block(axis, offset[chip], size, ndim)] = \
                    store(_matmul(attrs, x, w, poke), prog.tensors[m.writes].dtype)
            line.compute(f"matmul {m.name} block {chip}", chip_of(run, m.name), began, block=chip)

    size, rank = world.size, world.rank
    current = {c: store(host_value(run, fold.reads[c], c), out.dtype).astype(dtype) for c in world.chips}
    pending: list = []

    def poke() -> None:
        world.progress(pending)

    for step in range(size):
        holder = (rank - step) % size
        pending = []
        if step < size - 1:
            flat = np.concatenate([np.ravel(current[c]) for c in world.chips_of(holder)])
            nxt = (rank - step - 1) % size
            count = sum(int(np.prod(shapes[c])) for c in world.chips_of(nxt))
            pending = [world.isend(flat, (rank + 1) % size), world.irecv(count, dtype, (rank - 1) % size)]
        for c in world.chips_of(holder):
            multiply(c, np.asarray(current[c], F32))
        if pending:
            what = f"the all-gather {fold.name}, ring step {step + 1} of {size - 1}"
            world.wait(pending[0], what)
            got = world.wait(pending[1], what)
            line.transfer(f"ring send {fold.name} blocks of rank {holder}", pending[0], to_rank=(rank + 1) % size)
            line.transfer(f"ring recv {fold.name} blocks of rank {nxt}", pending[1], from_rank=(rank - 1) % size)
            current, at = {}, 0
            for c in world.chips_of(nxt):
                n = int(np.prod(shapes[c]))
                current[c] = got[at:at + n].reshape(shapes[c])
                at += n
    x = store(np.concatenate([gathered[c] for c in range(len(fold.reads))], axis=axis), out.dtype)
    run._hold_everywhere(fold.writes, x)
    for m in mine:
        info = prog.tensors[m.writes]
        value = apply(m.cls, dict(m.attrs), [x, weights[m.name]], dict(m.quantized), info.dtype) if whole else \
            store(results[m.name], info.dtype)
        _hold(run, m.writes, {chip_of(run, m.name): value})
    for m in mms:
        if m not in mine:
            _hold(run, m.writes, {})
    line.close()


# -- matmul_reduce_scatter: one destination block at a time -------------------------------

def matmul_reduce_scatter(run, kernel: CollectiveKernel) -> None:
    prog, world = run.prog, run.world
    fold = prog.statement(kernel.fold)
    scatter = run.scatters[fold.name]
    out = prog.tensors[fold.writes]
    ndim = len(out.shape)
    members = [prog.statement(o) for o in kernel.members if o != kernel.fold]
    mms = {chip_of(run, m.name): m for m in members if m.writes in fold.reads}
    slices = {chip_of(run, s.name): s for s in members if s.writes not in fold.reads}
    for chip, m in sorted(mms.items()):
        for t in m.reads:
            run.on(t, chip)
    mine = sorted(c for c in mms if world.holds(c))
    operands = {c: [host_value(run, t, c) for t in mms[c].reads] for c in mine}
    size, rank = world.size, world.rank
    line = Timeline(run, kernel)
    block_shape = list(out.shape)
    block_shape[scatter.axis] = scatter.block
    own = len(world.chips) * int(np.prod(block_shape))
    receives = {p: world.irecv(own, np.float32, p) for p in range(size) if p != rank}
    sends: list = []
    got: dict[int, np.ndarray] = {}

    def partial(chip: int, j: int) -> np.ndarray:
        """Block j of chip `chip`'s partial, as the matmul stores it."""
        m = mms[chip]
        a, b = operands[chip]
        attrs, dtype = dict(m.attrs), prog.tensors[m.writes].dtype
        if m.quantized or scatter.axis < ndim - 2 or np.ndim(a) != ndim:  # computed whole, its block taken
            return scatter.take(apply(m.cls, attrs, [a, b], dict(m.quantized), dtype), j)
        if scatter.axis == ndim - 1:  # a block of columns: the columns of B
            cols = (slice(j * scatter.block, (j + 1) * scatter.block), slice(None)) if m.attr("transpose_b") == "1" \
                else (slice(None), slice(j * scatter.block, (j + 1) * scatter.block))
            return store(_matmul(attrs, a, b[cols], poke), dtype)
        return store(_matmul(attrs, scatter.take(a, j), b, poke), dtype)  # a block of rows: the rows of A

    def poke() -> None:
        world.progress([*receives.values(), *(p for _, p in sends)])

    for step in range(1, size + 1):
        dest = (rank + step) % size
        blocks = []
        for j in world.chips_of(dest):
            total = np.zeros(block_shape, F32)
            for c in mine:  # this rank's chips' partials, in operand order (0 + x is x exactly)
                began = time.perf_counter()
                total = total + partial(c, j).astype(F32, copy=False)
                line.compute(f"matmul {mms[c].name} block {j}", c, began, block=j, to_rank=dest)
            blocks.append(np.ravel(total))
        payload = np.concatenate(blocks)
        if dest == rank:
            got[rank] = payload
        else:
            sends.append((dest, world.isend(payload, dest)))
    what = f"the reduce-scatter {fold.name}"
    for source, pending in receives.items():
        got[source] = world.wait(pending, what)
        line.transfer(f"recv {fold.name} blocks of rank {rank} from rank {source}", pending, from_rank=source)
    for dest, pending in sends:
        world.wait(pending, what)
        line.transfer(f"send {fold.name} blocks of rank {dest}", pending, to_rank=dest)
    totals = got[0]
    for source in range(1, size):  # rank order
        totals = totals + got[source]
    n = int(np.prod(block_shape))
    held, taken = {}, {}
    for i, j in enumerate(world.chips):
        value = scatter.holding(store(totals[i * n:(i + 1) * n].reshape(block_shape), out.dtype), j, out.shape,
                                out.storage)
        held[j] = value
        s = slices[j]
        taken[j] = apply(s.cls, dict(s.attrs), [value], dict(s.quantized), prog.tensors[s.writes].dtype)
    _hold(run, fold.writes, held)
    for j, s in slices.items():
        _hold(run, s.writes, {j: taken[j]} if j in taken else {})
    for m in mms.values():
        _hold(run, m.writes, {})  # never written whole (shared_partial: nothing else reads it)
    line.close()


# -- all_reduce_norm: the norm applied as reduced rows arrive ------------------------------

def all_reduce_norm(run, kernel: CollectiveKernel) -> None:
    prog, world = run.prog, run.world
    fold = prog.statement(kernel.fold)
    out = prog.tensors[fold.writes]
    after = [prog.statement(o) for o in kernel.members if o != kernel.fold]  # the add (if any), the norm
    first = world.chips[0]
    for s in after:  # operands from outside, on every chip, as a spine kernel's chips receive them
        for t in s.reads:
            if prog.writer.get(t) not in kernel.members:
                for c in range(prog.chips):
                    run.on(t, c)
    partial = None
    for t in fold.reads:
        src = run.source(t)
        if src in run.queues:
            x = host_value(run, t, src).astype(F32, copy=False)
            partial = x if partial is None else partial + x
    rows = int(np.prod(out.shape[:-1]))
    flat = np.broadcast_to(F32(0) if partial is None else partial, out.shape).reshape(rows, out.shape[-1])
    bounds = np.linspace(0, rows, min(CHUNKS, rows) + 1).astype(int).tolist()
    line = Timeline(run, kernel)
    pending = [world.iallreduce(flat[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
    inputs = {t: host_value(run, t, first) for s in after for t in s.reads if prog.writer.get(t) not in kernel.members}
    done: dict[str, list[np.ndarray]] = {s.writes: [] for s in [fold, *after]}
    for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
        total = world.wait(pending[i], f"the all-reduce {fold.name}, rows {a}:{b}")
        line.transfer(f"all_reduce {fold.name} rows {a}:{b}", pending[i])
        began = time.perf_counter()
        chunk = {fold.writes: store(total, out.dtype)}
        for s in after:
            info = prog.tensors[s.writes]
            xs = [chunk[t] if t in chunk else _rows(inputs[t], prog.tensors[t].shape, out.shape, a, b) for t in s.reads]
            chunk[s.writes] = apply(s.cls, dict(s.attrs), xs, dict(s.quantized), info.dtype)
        for t, v in chunk.items():
            done[t].append(v)
        line.compute(f"{'+'.join(s.cls for s in after)} rows {a}:{b}", first, began, rows=[a, b])
    for t, parts in done.items():
        run._hold_everywhere(t, np.concatenate(parts).reshape(prog.tensors[t].shape))
    line.close()


def _rows(value: np.ndarray, shape, like, a: int, b: int) -> np.ndarray:
    """Rows a:b of an operand shaped like the sum (flattened to rows); any other (a norm's
    weight) whole."""
    if tuple(shape) != tuple(like):
        return value
    return value.reshape(-1, like[-1])[a:b]


HOW = {"all_gather_matmul": "a ring of nonblocking sends and receives; each rank multiplies the blocks it holds "
                              "while the next are in flight",
       "matmul_reduce_scatter": "one destination rank's blocks at a time, each sent while the next is computed; "
                                "each rank adds what it receives in rank order",
       "all_reduce_norm": f"the partial sum all-reduced in {CHUNKS} row chunks, the members after the fold applied "
                          "to each chunk as it arrives"}


def shown(kernel: CollectiveKernel):
    """A collective kernel as `run --show kernels` prints it on ranks: no source, what it does."""
    from ..plan.reduce_scatter import Shown

    return (Shown(kernel.group, kernel.members, f"collective kernel {kernel.pattern}", "collective"),
            f"// {kernel.pattern} on each rank's host (runtime/execution/overlap.py): {HOW[kernel.pattern]}")


RUNS = {"all_gather_matmul": all_gather_matmul, "matmul_reduce_scatter": matmul_reduce_scatter,
        "all_reduce_norm": all_reduce_norm}
