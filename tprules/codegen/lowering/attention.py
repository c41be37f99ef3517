"""Attention's chain: a bmm, the work over its result, and the bmm that reads it, run as
one stage per batch index and tile of rows.

Scheduled stage by stage (lowering/schedule.py), attention's QKᵀ → scale → mask → softmax → ·V is a
bmm stage, a row stage and a bmm stage, with the [heads, seq, seq] scores and
probabilities in scratch buffers between them. The stages between the two products read
those buffers only at the index they compute when their work is elementwise and reshapes
that keep the last two axes (the same head, row and column): then one tile of rows at a
time is enough. A *chain* is such a run of stages:

- a bmm stage [B, M, N] whose stores are all scratch buffers of B·M·N elements, [.., M, N];
- row and pointwise stages over [.., M, N] (B·M·N elements) that read the chain's buffers
  only that way and store only such scratch buffers;
- a bmm stage [B, M, N2] with K = N whose left operands read the chain's buffers that way
  and whose right operands and stores do not read them; nothing after it reads them.

`lower` folds each chain into one `AttentionStage` (`fold`). The CPU runs it per head and
tile of rows with BLAS (cpu/attention.py): the chain's buffers are arrays of the tile's own,
never whole. A GPU runs the common form (one QKᵀ, pointwise work, a softmax whose result ·V
reads as it is: `online`) as one stage with an online softmax over tiles of keys
(cuda/attention.py), the scores never leaving the multiprocessor; any other chain is
unfolded into its stages there (`unfold`). The cost model (cost.py) counts no memory
traffic for the chain's buffers where the machine runs the chain as one stage.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from math import prod

from ...ops import Ops
from ..ir import (
    AbsMax,
    AttentionStage,
    BatchedMatmulStage,
    Expr,
    Gemm,
    Kernel,
    Load,
    Op,
    Pointwise,
    Remap,
    RowOut,
    RowStage,
    ScatterStage,
    Stage,
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
    if isinstance(stage, ScatterStage):
        exprs.extend(e for e in (stage.put.index, stage.put.source) if e is not None)
        return {stage.param}.union(*(params_read(e) for e in exprs))
    return set().union(set(), *(params_read(e) for e in exprs))


def tile_of(e: Expr, local: tuple[str, ...]) -> str | None:
    """The chain buffer `e` is as it lies (a load, or reshapes of one), else None."""
    while isinstance(e, Remap) and e.kind == Ops.RESHAPE:
        e = e.arg
    return e.param if isinstance(e, Load) and e.param in local else None


def fold(kernel: Kernel) -> Kernel:
    """The kernel with each chain one `AttentionStage`."""
    found = chains(kernel)
    if not found:
        return kernel
    stages: list[Stage] = []
    n = 0
    for c in found:
        stages.extend(kernel.stages[n:c.first])
        stages.append(AttentionStage(tuple(kernel.stages[c.first:c.last + 1]), c.local))
        n = c.last + 1
    stages.extend(kernel.stages[n:])
    return replace(kernel, stages=tuple(stages))


def unfold(kernel: Kernel, keep=lambda stage: False) -> Kernel:
    """The kernel with each `AttentionStage` that `keep` does not keep back in its stages."""
    if not any(isinstance(s, AttentionStage) and not keep(s) for s in kernel.stages):
        return kernel
    stages: list[Stage] = []
    for s in kernel.stages:
        stages.extend(s.stages if isinstance(s, AttentionStage) and not keep(s) else (s,))
    return replace(kernel, stages=tuple(stages))


def online(stage: AttentionStage) -> bool:
    """Whether a GPU runs the chain as one stage with an online softmax (cuda/attention.py):
    one QKᵀ, pointwise stages, then a softmax whose only store is its float32 result, which
    the one ·V reads as it lies. (Scaled by the row's running maximum and sum as keys come,
    the result is only right for a product that is linear in the probabilities.)"""
    head, *between, last = stage.stages
    if not between or len(head.matmuls) != 1 or len(last.matmuls) != 1:
        return False
    *pointwise, softmax = between
    if not all(isinstance(s, Pointwise) for s in pointwise) or not isinstance(softmax, RowStage):
        return False
    if len(softmax.rows) != 1 or softmax.rows[0].cls != Ops.SOFTMAX or len(softmax.stores) != 1:
        return False
    (st,) = softmax.stores
    return (isinstance(st.value, RowOut) and st.value.dtype == "f32"
            and tile_of(last.matmuls[0].a, stage.local) == st.param)


def without_tiled_buffers(kernel: Kernel) -> Kernel:
    """The kernel as a device that runs its attention stages as one stage runs it: their
    scratch parameters are one element each (the kernel never touches them), so their
    [heads, seq, seq] buffers are never allocated."""
    local = {p for s in kernel.stages if isinstance(s, AttentionStage) for p in s.local}
    if not local:
        return kernel
    params = tuple(replace(p, shape=()) if p.name in local else p for p in kernel.params)
    return replace(kernel, params=params)


__all__ = ["Chain", "chains", "fold", "online", "tile_of", "unfold", "without_tiled_buffers"]
