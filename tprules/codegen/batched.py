"""Batched matmul (`bmm`, attention over heads): one matmul per batch index, its own stage.

Kept beside the 2-D matmul stage rather than inside it: the operands are read at
(batch, row, k) and (batch, k, column), so their prologues (layout chains that split the
heads, RoPE, a transposed key) are evaluated at the batch's index; the stores are the
epilogue at [batch, row, column].

- CPU with BLAS (`render_cpu_gemm`): one BLAS call per batch index and tile of rows, the
  operands read as views where they are (views.py: the heads split by a reshape and a
  permute, GQA's expanded key/value heads read at the same rows for every head of the
  group, a transposed key), else computed once into a buffer; the epilogue runs over each
  tile while it is in cache;
- CPU, own core: the outer loop (a `prange`) runs over batch x rows, each with one
  accumulator row per bmm, as the matmul stage does per row;
- CUDA: the matmul stage's T x T shared-memory tiles, with the tile loop running over
  batch x tiles.
"""

from __future__ import annotations

from .emit import Scope, Source, store
from .ir import BatchedMatmulStage, Expr, Kernel
from .tiles import tile_products
from .views import View, block, view_of

TILE_ROWS = 256  # rows of one BLAS call at most (cpu_gemm.py's tiles)


def render_cpu_gemm(src: Source, stage: BatchedMatmulStage, kernel: Kernel, parallel: bool) -> None:
    """Each batch index's products as BLAS calls on tiles of rows, the epilogue on each tile."""
    b_, m, n, k = stage.batch, stage.m, stage.n, stage.k
    operands = [(_operand(src, mm.a, kernel, parallel), _operand(src, mm.b, kernel, parallel))
                for mm in stage.matmuls]
    tm = min(m, TILE_ROWS)
    tiles = -(-m // tm)
    t, b, i0, mb, i, j, ii = (src.fresh(s) for s in ("t", "b", "i0", "mb", "i", "j", "ii"))
    src.line(f"# {b_} x {tiles} BLAS calls of {tm} x {n} x {k} per product")
    with src.block(f"for {t} in {'prange' if parallel else 'range'}({b_ * tiles}):"):
        src.line(f"{b} = {t} // {tiles}")
        src.line(f"{i0} = ({t} % {tiles}) * {tm}")
        src.line(f"{mb} = min({tm}, {m} - {i0})")
        accs = []
        for (a, va, ta, lda), (bb, vb, tb, ldb) in operands:
            acc = src.fresh("acc")
            accs.append(acc)
            a_off = " + ".join(x for x in (str(va.offset) if va.offset else "", _batch(va, b),
                                           f"{i0} * {lda}" if not ta else i0) if x and x != "0")
            b_off = " + ".join(x for x in (str(vb.offset) if vb.offset else "", _batch(vb, b)) if x and x != "0")
            src.line(f"{acc} = np.empty(({tm}, {n}), np.float32)")
            src.line(f"gemm({int(ta)}, {int(tb)}, {mb}, {n}, {k}, {a}, {a_off or 0}, {lda}, {bb}, {b_off or 0}, {ldb}, "
                     f"{acc}, 0, {n})")
        with src.block(f"for {i} in range({mb}):"):
            src.line(f"{ii} = {i0} + {i}")
            with src.block(f"for {j} in range({n}):"):
                store(src, Scope(src, acc=lambda x: f"{accs[x]}[{i}, {j}]"), stage, (b, ii, j), kernel)


def _batch(v: View, b: str) -> str:
    return v.offset_of(0, b)


def _operand(src: Source, e: Expr, kernel: Kernel, parallel: bool) -> tuple[str, View, bool, int]:
    """(buffer, its view, transposed, leading dimension) of a [B, R, C] operand: a view where
    `e` is one, else `e` computed once into a buffer of the kernel's own."""
    v = view_of(e, {p.name: p.dtype for p in kernel.params})
    how = block(v, *e.shape[1:]) if v is not None else None
    if how is None:
        batch, rows, cols = e.shape
        name, r, c = src.fresh("opnd"), src.fresh("r"), src.fresh("c")
        src.line(f"{name} = np.empty({batch * rows * cols}, np.float32)")
        with src.block(f"for {r} in {'prange' if parallel else 'range'}({batch * rows}):"):
            with src.block(f"for {c} in range({cols}):"):
                src.line(f"{name}[{r} * {cols} + {c}] = {Scope(src).at(e, (f'{r} // {rows}', f'{r} % {rows}', c))}")
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
