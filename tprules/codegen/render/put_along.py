"""A put_along's scatter stage (ir.ScatterStage) on the CPU and on a GPU.

The index's lines (its positions without the axis) are independent: two entries of
different lines name different places of the result, so lines run in parallel (a `prange`
on the CPU, a grid-stride loop on a GPU). The entries of one line run in order along the
axis, each writing the source there (or the value) at the place it names, so the last entry
naming a place wins, as the reference's. An id outside the axis names no place (the ids
are checked before a run: runtime/values/semantics.py) and writes nothing.
"""

from __future__ import annotations

from ...program.records import INTEGER
from ..ir import Kernel, ScatterStage
from .emit import Scope, Source, constant, store_cast, unflatten


def render_cpu(src: Source, stage: ScatterStage, kernel: Kernel) -> None:
    r = src.fresh("r")
    with src.block(f"for {r} in prange({stage.lines}):"):
        _line(src, stage, kernel, unflatten(src, r, _lead(stage)))


def render_cuda(src: Source, stage: ScatterStage, kernel: Kernel, target) -> None:
    r = src.fresh("r")
    with src.block(f"for {r} in range(bid * nt + tid, {stage.lines}, nb * nt):"):
        _line(src, stage, kernel, unflatten(src, r, _lead(stage)))


def _lead(stage: ScatterStage) -> tuple[int, ...]:
    return tuple(n for d, n in enumerate(stage.shape) if d != stage.put.axis)


def _line(src: Source, stage: ScatterStage, kernel: Kernel, lead: tuple[str, ...]) -> None:
    """The entries of the line at `lead` (its index on the other axes), in order along the axis."""
    put, dtype = stage.put, kernel.param(stage.param).dtype
    axis, j = put.axis, src.fresh("tap")
    with src.block(f"for {j} in range({put.taps}):"):
        scope = Scope(src)  # a tap's values stay in the tap
        tap = lead[:axis] + (j,) + lead[axis:]
        place = scope.index(put.index, tap)
        with src.block(f"if {place} >= 0 and {place} < {put.shape[axis]}:"):
            if put.source is None:
                assert put.value is not None  # a put_along puts its source or its value
                v = constant(put.value)
            elif dtype in INTEGER and scope.moves_integers(put.source):
                v = scope.index(put.source, tap)
            else:
                v = scope.at(put.source, tap)
            where = tap[:axis] + (place,) + tap[axis + 1:]
            src.line(f"{scope.element(stage.param, where)} = {store_cast(v, dtype)}")
            src.mark(stage.param)
