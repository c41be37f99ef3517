"""A stable sort's rank (`sort_rank`) on a GPU, in O(h log² h) for a row of h: the block of
the row sorts it by merging, each element's place in a merged run found by a binary search
of the other run, instead of counting over the whole row for each element (O(h²), the
row's input computed again for every comparison: what `emit.RowValues.count` does).

The row's values and their positions go into a scratch parameter of the kernel's own,
[rows, 4, h] float32 (positions below 2**24 are exact): halves 0, 1 and 2, 3 take turns
as the runs of width 1, 2, 4, ... and their merge. An element of a left run goes after the
right run's elements that sort strictly before it, one of a right run after the left run's
that sort before it or equal it: equal elements keep their order, NaN sorts last (the
order of `emit.RowValues.count` and of the reference). Last, each element's place is put
at its position in the other pair of halves, which the pass that stores reads.
"""

from __future__ import annotations

from dataclasses import replace

from ..ir import Kernel, Param, RowStage
from ..render.emit import Source, reduction


def with_sort_scratch(kernel: Kernel) -> Kernel:
    """The kernel with a scratch parameter for each sort_rank of its row stages."""
    params, stages, changed = list(kernel.params), [], False
    for stage in kernel.stages:
        if isinstance(stage, RowStage) and not stage.sorts:
            sorts = []
            for n, op in enumerate(stage.rows):
                if reduction(op.cls) == "count":
                    name = f"p{len(params)}"
                    params.append(Param(name, "scratch", (stage.row_count, 4, op.x.shape[-1]), "f32"))
                    sorts.append((n, name))
            if sorts:
                stage, changed = replace(stage, sorts=tuple(sorts)), True
        stages.append(stage)
    return replace(kernel, params=tuple(params), stages=tuple(stages)) if changed else kernel


def rank_row(src: Source, scratch: str, r: str, h: int, value) -> str:
    """Sort row `r` by merging in `scratch`; `value(j)` writes the source line(s) for the
    row input's element j and returns its variable. Returns the template ("...[{}]") of
    the row's ranks, read by the pass that stores."""
    j, x, w, at = src.fresh("j"), src.fresh("x"), src.fresh("w"), src.fresh("at")
    with src.block(f"for {j} in range(tid, {h}, nt):"):
        src.line(f"{scratch}[{r}, 0, {j}] = {value(j)}")
        src.line(f"{scratch}[{r}, 1, {j}] = f32({j})")
    src.line("cuda.syncthreads()")
    src.line(f"{w} = 1")
    src.line(f"{at} = 0")  # the half holding the runs: 0, or 2
    with src.block(f"while {w} < {h}:"):
        run, lo, hi, a, b, mid, y, right, q = (src.fresh(s) for s in ("run", "lo", "hi", "a", "b", "mid", "y",
                                                                         "right", "q"))
        with src.block(f"for {j} in range(tid, {h}, nt):"):
            src.line(f"{x} = {scratch}[{r}, {at}, {j}]")
            src.line(f"{run} = {j} // {w}")
            src.line(f"{lo} = ({run} + 1 - 2 * ({run} % 2)) * {w}")  # the other run of the pair
            src.line(f"{hi} = min({lo} + {w}, {h})")
            src.line(f"{q} = {j}")
            with src.block(f"if {lo} < {h}:"):
                src.line(f"{a} = {lo}")
                src.line(f"{b} = {hi}")
                with src.block(f"while {a} < {b}:"):
                    src.line(f"{mid} = ({a} + {b}) // 2")
                    src.line(f"{y} = {scratch}[{r}, {at}, {mid}]")
                    # left run: partner elements strictly before x; right run: before or equal
                    with src.block(f"if {run} % 2 == 0:"):
                        src.line(f"{right} = {y} < {x} or ({x} != {x} and {y} == {y})")
                    with src.block("else:"):
                        src.line(f"{right} = not ({x} < {y} or ({y} != {y} and {x} == {x}))")
                    with src.block(f"if {right}:"):
                        src.line(f"{a} = {mid} + 1")
                    with src.block("else:"):
                        src.line(f"{b} = {mid}")
                src.line(f"{q} = ({run} - {run} % 2) * {w} + ({j} - {run} * {w}) + ({a} - {lo})")
            src.line(f"{scratch}[{r}, 2 - {at}, {q}] = {x}")
            src.line(f"{scratch}[{r}, 3 - {at}, {q}] = {scratch}[{r}, {at} + 1, {j}]")
        src.line("cuda.syncthreads()")
        src.line(f"{at} = 2 - {at}")
        src.line(f"{w} = {w} * 2")
    with src.block(f"for {j} in range(tid, {h}, nt):"):  # the place of each position: its rank
        src.line(f"{scratch}[{r}, 3 - {at}, I64({scratch}[{r}, {at} + 1, {j}])] = f32({j})")
    src.line("cuda.syncthreads()")
    return f"I64({scratch}[{r}, 3 - {at}, {{}}])"


__all__ = ["rank_row", "with_sort_scratch"]
