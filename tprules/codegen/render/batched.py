"""Batched matmul (`bmm`, attention over heads): one matmul per batch index, its own stage.

Kept beside the 2-D matmul stage rather than inside it: the operands are read at
(batch, row, k) and (batch, k, column), so their prologues (layout chains that split the
heads, RoPE, a transposed key) are evaluated at the batch's index; the stores are the
epilogue at [batch, row, column].

- CPU with BLAS (`render_cpu_gemm`): one BLAS call per batch index and tile of rows, the
  operands read as views where they are (render/views.py: the heads split by a reshape and a
  permute, GQA's expanded key/value heads read at the same rows for every head of the
  group, a transposed key), else computed once into a buffer; the epilogue runs over each
  tile while it is in cache;
- CPU, own core: the outer loop (a `prange`) runs over batch x rows, each with one
  accumulator row per bmm, as the matmul stage does per row;
- CUDA: the matmul stage's T x T shared-memory tiles, with the tile loop running over
  batch x tiles.
"""

from __future__ import annotations

from contextlib import contextmanager

from ..ir import BatchedMatmulStage, Expr, Kernel
from .emit import Scope, Source, store
from .tiles import tile_products
from .views import View, block, view_of

TILE_ROWS = 256  # rows of one BLAS call at most (cpu/gemm.py's tiles)


def render_cpu_gemm(src: Source, stage: BatchedMatmulStage, kernel: Kernel, parallel: bool) -> None:
    """Each batch index's products as BLAS calls on tiles of rows, the epilogue on each tile."""
    operands = [(operand(src, mm.a, kernel, parallel), operand(src, mm.b, kernel, parallel))
                for mm in stage.matmuls]
    with row_tiles(src, stage.batch, stage.m, parallel) as (b, i0, mb, tm):
        accs = products(src, stage, operands, b, i0, mb, tm)
        epilogue(src, stage, kernel, accs, (b, i0, mb), Scope(src))


@contextmanager
def row_tiles(src: Source, batch: int, m: int, parallel: bool):
    """A loop over every batch index and tile of up to TILE_ROWS rows; yields the names of
    the batch index, the tile's first row and its rows, and the tile's most rows."""
    tm = min(m, TILE_ROWS)
    tiles = -(-m // tm)
    t, b, i0, mb = (src.fresh(s) for s in ("t", "b", "i0", "mb"))
    src.line(f"# {batch} x {tiles} tiles of up to {tm} rows")
    with src.block(f"for {t} in {'prange' if parallel else 'range'}({batch * tiles}):"):
        src.line(f"{b} = {t} // {tiles}")
        src.line(f"{i0} = ({t} % {tiles}) * {tm}")
        src.line(f"{mb} = min({tm}, {m} - {i0})")
        yield b, i0, mb, tm


def products(src: Source, stage: BatchedMatmulStage, operands: list, b: str, i0: str, mb: str, tm: int) -> list[str]:
    """One BLAS call per bmm of the stage for batch `b`, rows i0 .. i0 + mb; `operands` are
    (buffer, view, transposed, leading dimension) pairs (`operand`, or a tile of the kernel's
    own: its view None, the tile's rows from offset 0). Returns the [tm, n] accumulators."""
    n, k = stage.n, stage.k
    accs = []
    for (a, va, ta, lda), (bb, vb, tb, ldb) in operands:
        acc = src.fresh("acc")
        accs.append(acc)
        a_off = "0" if va is None else _plus(str(va.offset) if va.offset else "", _batch(va, b),
                                             f"{i0} * {lda}" if not ta else i0)
        b_off = _plus(str(vb.offset) if vb.offset else "", _batch(vb, b))
        src.line(f"{acc} = np.empty(({tm}, {n}), np.float32)")
        src.line(f"gemm({int(ta)}, {int(tb)}, {mb}, {n}, {k}, {a}, {a_off}, {lda}, {bb}, {b_off}, {ldb}, {acc}, 0, {n})")
    return accs


def epilogue(src: Source, stage: BatchedMatmulStage, kernel: Kernel, accs: list[str], tile: tuple[str, str, str],
             scope: Scope) -> None:
    """The stage's stores over a tile (batch b, rows i0 .. i0 + mb), reading the accumulators."""
    b, i0, mb = tile
    i, j, ii = src.fresh("i"), src.fresh("j"), src.fresh("ii")
    with src.block(f"for {i} in range({mb}):"):
        src.line(f"{ii} = {i0} + {i}")
        with src.block(f"for {j} in range({stage.n}):"):
            store(src, scope.again(acc=lambda x: f"{accs[x]}[{i}, {j}]"), stage, (b, ii, j), kernel)


def _plus(*terms: str) -> str:
    return " + ".join(x for x in terms if x and x != "0") or "0"


def _batch(v: View, b: str) -> str:
    return v.offset_of(0, b)


def operand(src: Source, e: Expr, kernel: Kernel, parallel: bool) -> tuple[str, View, bool, int]:
    """(buffer, its view, transposed, leading dimension) of a [B, R, C] operand: a view where
    `e` is one, else `e` computed once into a buffer of the kernel's own."""
    v = view_of(e, {p.name: p.dtype for p in kernel.params})
    how = block(v, *e.shape[1:]) if v is not None else None
    if v is None or how is None:
        batch, rows, cols = e.shape
        # a loop per axis, the buffer indexed [batch, row, column]: Numba's copy of a gathered
        # expert's weights takes 1.25x as long through one loop over batch x rows (its row
        # and batch a division each), 1.4x through a flat index r * cols + c
        name = src.buffer("opnd", (batch, rows, cols))
        b, r, c = src.fresh("b"), src.fresh("r"), src.fresh("c")
        with src.block(f"for {b} in {'prange' if parallel and batch > 1 else 'range'}({batch}):"):
            with src.block(f"for {r} in {'prange' if parallel and batch == 1 else 'range'}({rows}):"):
                with src.block(f"for {c} in range({cols}):"):
                    src.line(f"{name}[{b}, {r}, {c}] = {Scope(src).at(e, (b, r, c))}")
        v = View(name, 0, (((batch, rows * cols),), ((rows, cols),), ((cols, 1),)))
        how = (False, cols)
    return v.param, v, how[0], how[1]


def render_cpu(src: Source, stage: BatchedMatmulStage, kernel: Kernel) -> None:
    bi, b, i, k, j = (src.fresh(s) for s in ("bi", "b", "i", "k", "j"))
    accs = [src.fresh("acc") for _ in stage.matmuls]
    with src.block(f"for {bi} in prange({stage.batch * stage.m}):"):
        src.line(f"{b} = {bi} // {stage.m}")
        src.line(f"{i} = {bi} % {stage.m}")
        for acc in accs:
            src.line(f"{acc} = np.zeros({stage.n}, np.float32)")
        with src.block(f"for {k} in range({stage.k}):"):
            outer = Scope(src)
            a = [outer.at(mm.a, (b, i, k)) for mm in stage.matmuls]
            with src.block(f"for {j} in range({stage.n}):"):
                inner = Scope(src)
                for mm, acc, av in zip(stage.matmuls, accs, a):
                    src.line(f"{acc}[{j}] += {av} * {inner.at(mm.b, (b, k, j))}")
        with src.block(f"for {j} in range({stage.n}):"):
            store(src, Scope(src, acc=lambda n: f"{accs[n]}[{j}]"), stage, (b, i, j), kernel)


def render_cuda(src: Source, stage: BatchedMatmulStage, kernel: Kernel, target) -> None:
    tn = -(-stage.n // target.tile)
    per_batch = -(-stage.m // target.tile) * tn
    ty, tx, tile, b, t, i, j = (src.fresh(s) for s in ("ty", "tx", "tile", "b", "t", "i", "j"))
    src.line(f"{ty} = tid // T")
    src.line(f"{tx} = tid % T")
    with src.block(f"for {tile} in range(bid, {stage.batch * per_batch}, nb):"):
        src.line(f"{b} = {tile} // {per_batch}")
        src.line(f"{t} = {tile} % {per_batch}")
        src.line(f"{i} = ({t} // {tn}) * T + {ty}")
        src.line(f"{j} = ({t} % {tn}) * T + {tx}")
        tile_products(src, stage, kernel, (b,), i, j, ty, tx)
