"""Attention's chain on the CPU (lowering/attention.py): per batch index and tile of rows, the heads
and tiles shared out over the chip's threads, BLAS writes the tile's scores, the epilogue,
row ops and pointwise work run over the tile while it is in cache, and BLAS multiplies the
tile's probabilities by the head's values. The chain's buffers are arrays of the tile's own
([rows, N]), never whole; a store of the first product as it is (the scores before the
scale) is the BLAS accumulator itself.
"""

from __future__ import annotations

from dataclasses import replace

from ..ir import Acc, AttentionStage, Expr, Kernel, RowStage
from ..lowering.attention import tile_of
from ..render import batched
from ..render.emit import Scope, Source, store, subscript, unflatten


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


def render(src: Source, stage: AttentionStage, kernel: Kernel, parallel: bool, one_row) -> None:
    """The chain's stages tile by tile with BLAS (see the module); `one_row(src, stage,
    kernel, lead, scope)` renders a row of a row stage (cpu/function.py)."""
    head, middle, last = stage.stages[0], stage.stages[1:-1], stage.stages[-1]
    m, n = head.m, head.n
    src.line(f"# per head and tile of rows: {', '.join(stage.local)} live in the tile")
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
        for inner in middle:
            for st in inner.stores:
                tiles[st.param] = _tile(src, tm, n)
            i, ii = src.fresh("i"), src.fresh("ii")
            with src.block(f"for {i} in range({mb}):"):
                src.line(f"{ii} = {i0} + {i}")
                lead = unflatten(src, b, inner.shape[:-2]) + (ii,)
                if isinstance(inner, RowStage):
                    one_row(src, inner, kernel, lead, scope)
                else:
                    j = src.fresh("j")
                    with src.block(f"for {j} in range({n}):"):
                        store(src, scope.again(), inner, lead + (j,), kernel)
        operands = []
        for mm, b_operand in zip(last.matmuls, right):
            a = tile_of(mm.a, stage.local)
            left = tiles[a] if a else _left(src, mm.a, tm, n, (b, i0, mb), scope)
            operands.append(((left, None, False, n), b_operand))  # a tile: rows from i0, at offset 0
        accs = batched.products(src, last, operands, b, i0, mb, tm)
        batched.epilogue(src, last, kernel, accs, (b, i0, mb), scope)


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


__all__ = ["TileScope", "render"]
