"""Batched matmul (`bmm`, attention over heads): one matmul per batch index, its own stage.

Kept beside the 2-D matmul stage rather than inside it: the operands are read at
(batch, row, k) and (batch, k, column), so their prologues (layout chains that split the
heads, RoPE, a transposed key) are evaluated at the batch's index; the stores are the
epilogue at [batch, row, column].

- CPU: the outer loop (a `prange`) runs over batch x rows, each with one accumulator row
  per bmm, as the matmul stage does per row;
- CUDA: the matmul stage's T x T shared-memory tiles, with the tile loop running over
  batch x tiles.
"""

from __future__ import annotations

from .emit import Scope, Source, store
from .ir import BatchedMatmulStage, Kernel
from .tiles import tile_products


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
