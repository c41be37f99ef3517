"""Render a matmul stage for the CPU as BLAS tiles, the prologue before and the epilogue on each tile.

The stage's [M, N] result is cut into tiles (`blas.tile_plan`: as tall as allowed, the
columns cut into a multiple of the chip's threads), and the tiles are shared out over
the chip's Numba threads (`prange`). For each tile, every matmul of the stage is one
single-threaded BLAS call (`blas.gemm`) into the tile's accumulators, and the epilogue
(the stage's stores) runs over the tile at once, while it is in cache: this is XLA's and
Inductor's "library matmul plus fused epilogue", done tile by tile.

Operands go to BLAS as they lie in memory when they can: a view of a float32 buffer
(render/views.py: the buffer, a reshape, permute, slice or expand of it that keeps one stride per
axis, its transpose: an offset, a leading dimension and a flag, no copy). Any other operand (a fused prologue: a pointwise
chain, an int8 quantized read, an integer buffer) is first computed once into a buffer
of the kernel's own (from emit.RUNTIME_BUFFER_BYTES up a scratch parameter the runtime
allocates), in a parallel pass over its rows, and then read by every tile.

A result that a store keeps as it is (float32, not transposed) is written by BLAS straight
into the output buffer; the epilogue reads it from there.
"""

from __future__ import annotations

from ..ir import Acc, Expr, Kernel, MatmulStage
from ..render.emit import Scope, Source, store_cast, subscript
from ..render.extern import direct_stores
from ..render.views import block, view_of

# In the header of every kernel that calls the BLAS core: a new version of codegen/blas.py
# must change it, so that kernels cached by Numba with the old one are compiled again.
CORE = "tprules.codegen.blas 1"
TILE_ROWS = 256  # rows of a tile at most: BLAS is efficient only on tall tiles
TILE_COLS = 512  # columns of a tile at most: a tile of accumulators stays in the L2 cache
TILE_ALIGN = 16  # tile widths are a multiple of this (whole vector registers)
# OpenBLAS computes a product of M·N·K ≤ 1e6 with its small-matrix kernels, straight from the
# operands; a bigger one first packs B. For a skinny A (a decode step's few rows) packing
# costs more than the product: a [1, 2048] x [2048, 512] tile ran at 5 GB/s, a [1, 2048] x
# [2048, 256] one at 60 GB/s (benchmarks/bench_decode.py; docs/decode.md).
SMALL_MNK = 1_000_000


def tile_plan(m: int, n: int, threads: int, accumulators: int = 1, k: int = 0) -> tuple[int, int, int, int]:
    """(row tiles, column tiles, tile rows, tile columns) for an [m, n] result on `threads`
    threads: tiles as tall as allowed (BLAS is fastest on tall blocks), the columns cut
    into a multiple of the thread count so that every thread gets the same work, and
    narrower when several matmuls' `accumulators` must stay in cache together, or when a
    skinny product over `k` fits the BLAS's small-matrix kernels in narrower tiles (SMALL_MNK).

    >>> tile_plan(128, 2816, 2), tile_plan(128, 704, 1), tile_plan(8, 16, 2), tile_plan(128, 704, 1, 2)
    ((1, 6, 128, 480), (1, 2, 128, 352), (2, 1, 4, 16), (1, 3, 128, 240))
    >>> tile_plan(1, 2048, 2, k=2048), tile_plan(8, 5632, 2, k=2048), tile_plan(128, 2816, 2, k=1024)
    ((1, 6, 1, 352), (1, 118, 8, 48), (1, 6, 128, 480))
    """
    threads = max(1, threads)
    widest = max(4 * TILE_ALIGN, TILE_COLS // max(1, accumulators))
    if 0 < m * TILE_ALIGN * k <= SMALL_MNK:  # a skinny product: tiles the small-matrix kernels take
        widest = min(widest, SMALL_MNK // (m * k) // TILE_ALIGN * TILE_ALIGN)
    cols = threads * -(-n // (threads * widest))
    cols = max(1, min(cols, -(-n // TILE_ALIGN)))
    tn = -(-n // cols)
    tn = -(-tn // TILE_ALIGN) * TILE_ALIGN
    cols = -(-n // tn)
    rows = -(-m // TILE_ROWS)
    if rows * cols < threads:  # a narrow result: cut the rows instead
        rows = min(m, -(-threads // cols))
    tm = -(-m // rows)
    rows = -(-m // tm)
    return rows, cols, tm, tn


def materialize(src: Source, e: Expr, kernel: Kernel, parallel: bool) -> str:
    """Compute `e` over its shape into a new float32 buffer; returns the buffer's name."""
    rows, cols = e.shape
    name = src.buffer("opnd", (rows, cols))
    r, c = src.fresh("r"), src.fresh("c")
    with src.block(f"for {r} in {'prange' if parallel else 'range'}({rows}):"):
        with src.block(f"for {c} in range({cols}):"):
            src.line(f"{name}[{r}, {c}] = {Scope(src).at(e, (r, c))}")
    return name


def blas_operand(src: Source, e: Expr, kernel: Kernel, parallel: bool) -> tuple[str, int, int, bool]:
    """(buffer, offset, leading dimension, transposed) of a 2-D operand: a view where `e` is
    one (render/views.py), else `e` computed into a buffer of the kernel's own."""
    v = view_of(e, {p.name: p.dtype for p in kernel.params})
    how = block(v, *e.shape) if v is not None else None
    if v is None or how is None:
        return materialize(src, e, kernel, parallel), 0, e.shape[1], False
    return v.param, v.offset, how[1], how[0]


def matmul(src: Source, stage: MatmulStage, kernel: Kernel, threads: int) -> None:
    """`threads`: the chip's threads (the tiles are shared out over them when more than one)."""
    m, n, k = stage.m, stage.n, stage.k
    parallel = threads > 1
    operands = []
    for mm in stage.matmuls:
        a_block = blas_operand(src, mm.a, kernel, parallel)
        b_block = blas_operand(src, mm.b, kernel, parallel)
        operands.append((a_block, (*b_block[:3], b_block[3] != mm.transpose_b)))  # B's block: [K, N], or [N, K] when transposed
    direct = direct_stores(stage, kernel)
    rows, cols, tm, tn = tile_plan(m, n, threads, len(stage.matmuls), k)
    t, i0, j0, mb, nb = (src.fresh(s) for s in ("t", "i0", "j0", "mb", "nb"))
    src.line(f"# {rows} x {cols} tiles of {tm} x {tn}")
    with src.block(f"for {t} in {'prange' if parallel else 'range'}({rows * cols}):"):
        src.line(f"{i0} = ({t} // {cols}) * {tm}")
        src.line(f"{j0} = ({t} % {cols}) * {tn}")
        src.line(f"{mb} = min({tm}, {m} - {i0})")
        src.line(f"{nb} = min({tn}, {n} - {j0})")
        accs = {}
        for index, ((a, a0, lda, ta), (b, b0, ldb, tb)) in enumerate(operands):
            a_off = _plus(a0, f"{i0} * {lda}" if not ta else i0)
            b_off = _plus(b0, j0 if not tb else f"{j0} * {ldb}")
            c_off: int | str
            if index in direct:
                c, c_off, ldc = direct[index], f"{i0} * {n} + {j0}", n
            else:
                c, c_off, ldc = src.fresh("acc"), 0, tn
                src.line(f"{c} = np.empty(({tm}, {tn}), np.float32)")
            accs[index] = c
            src.line(f"gemm({int(ta)}, {int(tb)}, {mb}, {nb}, {k}, {a}, {a_off}, {lda}, {b}, {b_off}, {ldb}, "
                     f"{c}, {c_off}, {ldc})")
        epilogue = [st for st in stage.stores
                    if not (isinstance(st.value, Acc) and direct.get(st.value.index) == st.param)]
        # a transposed store walks the tile column by column, so that it writes whole rows
        # of its output (row by row it would write one element a cache line)
        for flip, order in ((False, "rows"), (True, "columns")):
            stores = [st for st in epilogue if st.flip == flip]
            if stores:
                _epilogue(src, stores, kernel, accs, direct, (i0, j0, mb, nb), order)


def _plus(offset: int, text: str) -> str:
    return f"{offset} + {text}" if offset else text


def _epilogue(src: Source, stores: list, kernel: Kernel, accs: dict, direct: dict, tile: tuple, order: str) -> None:
    """Loops over a tile evaluating and writing `stores`; `order`: rows (i outer) or columns."""
    i0, j0, mb, nb = tile
    i, j, ii, jj = (src.fresh(s) for s in ("i", "j", "ii", "jj"))

    def acc(index: int) -> str:  # the epilogue reads a result where BLAS left it
        return f"{accs[index]}[{ii}, {jj}]" if index in direct else f"{accs[index]}[{i}, {j}]"

    outer, inner = ((i, mb, ii, i0), (j, nb, jj, j0)) if order == "rows" else ((j, nb, jj, j0), (i, mb, ii, i0))
    with src.block(f"for {outer[0]} in range({outer[1]}):"):
        src.line(f"{outer[2]} = {outer[3]} + {outer[0]}")
        with src.block(f"for {inner[0]} in range({inner[1]}):"):
            src.line(f"{inner[2]} = {inner[3]} + {inner[0]}")
            scope = Scope(src, acc=acc)
            for st in stores:
                v = scope.at(st.value, (ii, jj))
                where = (jj, ii) if st.flip else (ii, jj)
                src.line(f"{subscript(st.param, where)} = {store_cast(v, kernel.param(st.param).dtype)}")
