"""Attention as one pass per head: a bmm, the work over its result, and the bmm that reads
it, tiled per batch index and tile of rows.

Scheduled stage by stage (schedule.py), attention's QKᵀ → scale → mask → softmax → ·V is a
bmm stage, a row stage and a bmm stage, with the [heads, seq, seq] scores and
probabilities in scratch buffers between them. The stages between the two products read
those buffers only at the index they compute when their work is elementwise and reshapes
that keep the last two axes (the same head, row and column): then one tile at a time is
enough. A *chain* is such a run of stages:

- a bmm stage [B, M, N] whose stores are all scratch buffers of B·M·N elements, [.., M, N];
- row and pointwise stages over [.., M, N] (B·M·N elements) that read the chain's buffers
  only that way and store only such scratch buffers;
- a bmm stage [B, M, N2] with K = N whose left operands read the chain's buffers that way
  and whose right operands and stores do not read them; nothing after it reads them.

Per batch index and tile of rows (the heads and tiles shared out over the chip's threads),
BLAS writes the tile's scores, the epilogue, row ops and pointwise work run over the tile
while it is in cache, and BLAS multiplies the tile's probabilities by the head's values: the
chain's buffers are arrays of the tile's own ([rows, N]), never whole. A store of the first
product as it is (the scores before the scale) is the BLAS accumulator itself.

The CPU renders chains with BLAS (cpu.py); the cost model (cost.py) counts no memory traffic
for the chain's buffers on a machine that tiles them (`Machine.chains`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from math import prod

from ..ops import Ops
from . import batched
from .emit import Scope, Source, store, subscript, unflatten
from .ir import (
    AbsMax,
    Acc,
    BatchedMatmulStage,
    Expr,
    Gemm,
    Kernel,
    Load,
    Op,
    Pointwise,
    Remap,
    RowStage,
    children,
    params_read,
)

FLOAT = ("f32", "f16", "bf16")  # kept as float32 (a tile is a float32 array)


@dataclass(frozen=True)
class Chain:
    """Stages first .. last (inclusive) of a kernel, run tile by tile; `local`: the scratch
    parameters that live in the tile."""

    first: int
    last: int
    local: tuple[str, ...]


def chains(kernel: Kernel) -> list[Chain]:
    """The kernel's chains, in stage order."""
    found, n = [], 0
    while n < len(kernel.stages):
        chain = _chain_from(kernel, n)
        if chain is None:
            n += 1
        else:
            found.append(chain)
            n = chain.last + 1
    return found


def _chain_from(kernel: Kernel, first: int) -> Chain | None:
    stages = kernel.stages
    head = stages[first]
    if not isinstance(head, BatchedMatmulStage):
        return None
    tile = (head.batch, head.m, head.n)
    local: list[str] = []
    if not _stores_tile(head, kernel, tile, local):
        return None
    for n in range(first + 1, len(stages)):
        s = stages[n]
        if isinstance(s, BatchedMatmulStage):
            ok = ((s.batch, s.m, s.k) == tile and n > first
                  and all(_reads_tile(mm.a, local, tile) and not params_read(mm.b) & set(local) for mm in s.matmuls)
                  and not any(params_read(st.value) & set(local) for st in s.stores)
                  and not any(_reads(later) & set(local) for later in stages[n + 1:]))
            return Chain(first, n, tuple(local)) if ok else None
        if not isinstance(s, (RowStage, Pointwise)) or not _tiled(s.shape, tile):
            return None
        if not all(_reads_tile(e, local, tile) for e in _expressions(s)) or not _stores_tile(s, kernel, tile, local):
            return None
    return None


def _tiled(shape, tile) -> bool:
    """Whether `shape` is [.., M, N] with B·M·N elements: the tile's head, row and column."""
    batch, m, n = tile
    return len(shape) >= 2 and tuple(shape[-2:]) == (m, n) and prod(shape[:-2]) == batch


def _stores_tile(stage, kernel: Kernel, tile, local: list[str]) -> bool:
    """Whether every store of `stage` is a chain buffer (then added to `local`)."""
    for st in stage.stores:
        p = kernel.param(st.param)
        if p.role != "scratch" or st.flip or p.dtype not in FLOAT or not _tiled(p.shape, tile):
            return False
    local.extend(st.param for st in stage.stores)
    return True


def _reads_tile(e: Expr, local: list[str], tile) -> bool:
    """Whether `e` reads the chain's buffers only at the index it computes: through
    elementwise classes and reshapes that keep the head, row and column."""
    if isinstance(e, Load):
        return e.param not in local or _tiled(e.shape, tile)
    if not params_read(e) & set(local):
        return True
    if not _tiled(e.shape, tile):
        return False
    if isinstance(e, Op) or (isinstance(e, Remap) and e.kind == Ops.RESHAPE):
        return all(_reads_tile(c, local, tile) for c in children(e))
    return False


def _expressions(stage) -> list[Expr]:
    rows = [x for r in getattr(stage, "rows", ()) for x in (r.x, r.w, r.b) if x is not None]
    return [st.value for st in getattr(stage, "stores", ())] + rows


def _reads(stage) -> set[str]:
    """The parameters a stage reads."""
    if isinstance(stage, Gemm):
        return {stage.a, stage.b}
    exprs = _expressions(stage) + [x for mm in getattr(stage, "matmuls", ()) for x in (mm.a, mm.b)]
    if isinstance(stage, AbsMax):
        exprs.append(stage.value)
    return set().union(set(), *(params_read(e) for e in exprs))


def _tile_of(e: Expr, local: tuple[str, ...]) -> str | None:
    """The chain buffer `e` is as it lies (a load, or reshapes of one), else None."""
    while isinstance(e, Remap) and e.kind == Ops.RESHAPE:
        e = e.arg
    return e.param if isinstance(e, Load) and e.param in local else None


class TileScope(Scope):
    """A scope whose reads and writes of the chain's buffers go to the tile's arrays: element
    [.., row, column] of a chain buffer is element [row - i0, column] of its tile."""

    def __init__(self, src: Source, tiles: dict[str, str], i0: str, acc=None, row=None):
        super().__init__(src, acc, row)
        self.tiles = tiles
        self.i0 = i0

    def again(self, acc=None, row=None) -> "TileScope":
        return TileScope(self.src, self.tiles, self.i0, acc, row)

    def element(self, param: str, idx: tuple[str, ...]) -> str:
        if param in self.tiles:
            return f"{self.tiles[param]}[{idx[-2]} - {self.i0}, {idx[-1]}]"
        return subscript(param, idx)


def render_cpu(src: Source, chain: Chain, kernel: Kernel, parallel: bool, one_row) -> None:
    """The chain's stages tile by tile with BLAS (see the module); `one_row(src, stage,
    kernel, lead, scope)` renders a row of a row stage (cpu.py)."""
    stages = kernel.stages[chain.first:chain.last + 1]
    head, middle, last = stages[0], stages[1:-1], stages[-1]
    _, m, n = head.batch, head.m, head.n
    src.line(f"# stages {chain.first} to {chain.last} per head and tile of rows: {', '.join(chain.local)} "
             "live in the tile")
    first_operands = [(batched.operand(src, mm.a, kernel, parallel), batched.operand(src, mm.b, kernel, parallel))
                      for mm in head.matmuls]
    right = [batched.operand(src, mm.b, kernel, parallel) for mm in last.matmuls]
    with batched.row_tiles(src, head.batch, m, parallel) as (b, i0, mb, tm):
        accs = batched.products(src, head, first_operands, b, i0, mb, tm)
        tiles: dict[str, str] = {}
        scope = TileScope(src, tiles, i0)
        rest = []
        for st in head.stores:
            if isinstance(st.value, Acc) and st.value.dtype == "f32" and kernel.param(st.param).dtype == "f32":
                tiles[st.param] = accs[st.value.index]  # stored as it is: BLAS's accumulator is the tile
            else:
                rest.append(st)
                tiles[st.param] = _tile(src, tm, n)
        if rest:
            batched.epilogue(src, replace(head, stores=tuple(rest)), kernel, accs, (b, i0, mb), scope)
        for stage in middle:
            for st in stage.stores:
                tiles[st.param] = _tile(src, tm, n)
            i, ii = src.fresh("i"), src.fresh("ii")
            with src.block(f"for {i} in range({mb}):"):
                src.line(f"{ii} = {i0} + {i}")
                lead = unflatten(src, b, stage.shape[:-2]) + (ii,)
                if isinstance(stage, RowStage):
                    one_row(src, stage, kernel, lead, scope)
                else:
                    j = src.fresh("j")
                    with src.block(f"for {j} in range({n}):"):
                        store(src, scope.again(), stage, lead + (j,), kernel)
        operands = []
        for mm, b_operand in zip(last.matmuls, right):
            a = _tile_of(mm.a, chain.local)
            left = tiles[a] if a else _left(src, mm.a, tm, n, (b, i0, mb), scope)
            operands.append(((left, None, False, n), b_operand))  # a tile: rows from i0, at offset 0
        accs = batched.products(src, last, operands, b, i0, mb, tm)
        batched.epilogue(src, last, kernel, accs, (b, i0, mb), scope)


def without_tiled_buffers(kernel: Kernel) -> Kernel:
    """The kernel as a device that renders its chains tile by tile runs it: the chains'
    scratch parameters are one element each (the kernel never touches them), so their
    [heads, seq, seq] buffers are never allocated."""
    local = {p for c in chains(kernel) for p in c.local}
    if not local:
        return kernel
    params = tuple(replace(p, shape=()) if p.name in local else p for p in kernel.params)
    return replace(kernel, params=params)


def _tile(src: Source, rows: int, cols: int) -> str:
    name = src.fresh("tile")
    src.line(f"{name} = np.empty(({rows}, {cols}), np.float32)")
    return name


def _left(src: Source, e: Expr, rows: int, cols: int, at: tuple[str, str, str], scope: TileScope) -> str:
    """The last product's left operand computed over the tile into an array of its own."""
    b, i0, mb = at
    name = _tile(src, rows, cols)
    i, ii, j = src.fresh("i"), src.fresh("ii"), src.fresh("j")
    with src.block(f"for {i} in range({mb}):"):
        src.line(f"{ii} = {i0} + {i}")
        with src.block(f"for {j} in range({cols}):"):
            src.line(f"{name}[{i}, {j}] = {scope.again().at(e, (b, ii, j))}")
    return name


__all__ = ["Chain", "TileScope", "chains", "render_cpu", "without_tiled_buffers"]
