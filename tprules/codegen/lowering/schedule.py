"""Split a group's members into stages, and decide which values go through memory.

A matmul or a row op (the *anchors*) needs many input elements for one output element, so
each anchor is computed in a stage over its own domain: a tiled matmul over [M, N], a row
stage over the rows of its output. Pointwise members never need a stage of their own:

- a pointwise member that reads a value of the current stage at the same index (a matmul
  epilogue, a row op's neighbour) is *bound* to that stage and computed in its pass;
- one that reads only inputs and earlier stages' stored values *floats*: it is recomputed
  wherever it is read (a matmul prologue, a row op's input, another pointwise member).

A value crosses from one stage to a later one only through a buffer (it is *stored*), and
so does every value another group reads. Stored floating values ride along in the first
stage of their shape, or get a pointwise stage of their own. A transpose of a stage's value is stored by that stage at the
swapped index. An elementwise chain is thus one pointwise stage; a matmul with its
neighbours (a transpose too) one matmul stage; matmul → pointwise → matmul two stages of
one kernel.

A `put_along` is a scatter (ir.ScatterStage): a stage of its own whose pass runs over its
index, not its result, so nothing is computed in its pass and every reader reads it from
its buffer. A `reshape` of it that is stored is that buffer itself (a view, `views`).

>>> # see tests/codegen/test_codegen.py for the stage lists of the usual groups
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...ops import Ops
from ...program.model import BMM, GROUPED, INDEXED, MATMUL, ROW, Program, Statement

SCATTER = "scatter"
LOCAL = None  # operand placeholder: a fused fold's own-chip partial, a kernel argument


@dataclass
class StagePlan:
    kind: str  # pointwise | matmul | bmm | grouped_matmul | row | scatter
    domain: tuple[int, ...]
    anchors: list[str] = field(default_factory=list)  # statements, in order
    stores: list[str] = field(default_factory=list)  # tensors, in order
    # (M, N, K) of a matmul stage, (B, M, N, K) of a bmm stage, (M, N, K, E) of a grouped one
    dims: tuple[int, ...] = ()


@dataclass
class Schedule:
    stages: list[StagePlan]
    bound: dict[str, int]  # tensor → the stage whose pass computes it
    store_at: dict[str, int]  # stored tensor → the stage that stores it
    escapes: list[str]  # stored tensors that other groups read, or nobody (program outputs)
    flipped: set[str] = field(default_factory=set)  # transposes stored at the swapped index
    views: dict[str, str] = field(default_factory=dict)  # stored reshape → the put_along whose buffer it is


def operands(s: Statement, produced: dict[str, Statement], fused: bool) -> list[str | None]:
    """What a member reads. A fold fused with others reads only what the chip it runs on
    holds: the partials computed in this group, else its own partial (LOCAL)."""
    if s.fold and fused:
        inside: list[str | None] = [t for t in s.reads if t in produced]
        return inside or [LOCAL]
    return list(s.reads)


def schedule(members: list[Statement], prog: Program) -> Schedule:
    produced = {s.writes: s for s in members}
    names = {s.name for s in members}
    fused = len(members) > 1
    shape = lambda t: prog.tensors[t].shape  # noqa: E731
    stages: list[StagePlan] = []
    bound: dict[str, int] = {}
    floating: dict[str, int] = {}  # tensor → first stage that may compute it
    stored: set[str | None] = set()  # tensors (an operand that is inline is never LOCAL)
    flipped: set[str] = set()  # bound transposes: stored by their stage, never read in it

    def ready(t: str | None) -> int:
        """First stage that may read `t` (storing it when it is bound to a stage)."""
        if t is None or t not in produced:
            return 0
        if t in bound:
            stored.add(t)
            return bound[t] + 1
        return floating[t]

    def inline(t: str | None, out: str, quantized: bool) -> bool:
        """May `out` be computed in the current stage's pass reading `t` at the same index?"""
        cur = len(stages) - 1
        return (t is not None and bound.get(t) == cur and t not in flipped and not quantized
                and stages[cur].kind != SCATTER and shape(t) == shape(out) == stages[cur].domain)

    for s in members:
        t, cur = s.writes, len(stages) - 1
        reads = operands(s, produced, fused)
        quant = [s.quant_format(i) is not None for i in range(len(reads))]
        if s.cls == MATMUL:
            first = max(ready(u) for u in reads)
            m, k = shape(reads[0])
            dims: tuple[int, ...] = (m, shape(t)[1], k)
            if cur >= 0 and stages[cur].kind == MATMUL and stages[cur].dims == dims and first <= cur:
                stages[cur].anchors.append(s.name)
            else:
                stages.append(StagePlan(MATMUL.value, shape(t), [s.name], dims=dims))
            bound[t] = len(stages) - 1
        elif s.cls == BMM:  # as a matmul, one per batch index (codegen/render/batched.py)
            first = max(ready(u) for u in reads)
            batch, m, k = shape(reads[0])
            dims = (batch, m, shape(t)[2], k)
            if cur >= 0 and stages[cur].kind == BMM and stages[cur].dims == dims and first <= cur:
                stages[cur].anchors.append(s.name)
            else:
                stages.append(StagePlan(BMM.value, shape(t), [s.name], dims=dims))
            bound[t] = len(stages) - 1
        elif s.cls == GROUPED:  # one per stage: its groups are data (codegen/render/grouped.py)
            for u in reads:
                ready(u)  # a value bound to an earlier stage is stored for this one
            m, k = shape(reads[0])
            stages.append(StagePlan(GROUPED.value, shape(t), [s.name], dims=(m, shape(t)[1], k, shape(reads[1])[0])))
            bound[t] = len(stages) - 1
        elif s.cls == Ops.PUT_ALONG:  # a scatter: its own stage, its readers read its buffer
            for u in reads:
                ready(u)
            stages.append(StagePlan(SCATTER, shape(t), [s.name]))
            bound[t] = len(stages) - 1
            stored.add(t)
        elif s.cls in ROW:
            x_inline = inline(reads[0], t, quant[0])
            first = max([0] + [ready(u) for i, u in enumerate(reads) if i > 0 or not x_inline])
            if cur >= 0 and stages[cur].kind == "row" and stages[cur].domain == shape(t) and first <= cur:
                stages[cur].anchors.append(s.name)
            else:
                if x_inline:
                    stored.add(reads[0])
                stages.append(StagePlan("row", shape(t), [s.name]))
            bound[t] = len(stages) - 1
        elif s.cls == Ops.TRANSPOSE and reads[0] in bound and bound[reads[0]] == cur and not quant[0] \
                and reads[0] not in flipped and stages[cur].kind != SCATTER and shape(reads[0]) == stages[cur].domain:
            # the transpose of a value of this pass: stored at the swapped index, read later
            bound[t] = cur
            flipped.add(t)
        else:  # pointwise (elementwise, transpose and layout classes, a fused fold)
            same = [u for i, u in enumerate(reads) if s.cls not in INDEXED and inline(u, t, quant[i])]
            first = max([0] + [ready(u) for u in reads if u not in same])
            if same and first <= cur:
                bound[t] = cur
            else:
                for u in same:
                    stored.add(u)
                floating[t] = max([first] + [cur + 1 for _ in same])

    escapes = [s.writes for s in members
               if any(r not in names for r in prog.readers.get(s.writes, ())) or s.writes not in prog.readers]
    stored.update(escapes)
    views = {s.writes: s.reads[0] for s in members if s.cls == Ops.RESHAPE and s.writes in stored
             and s.reads[0] in produced and produced[s.reads[0]].cls == Ops.PUT_ALONG
             and prog.tensors[s.writes].dtype == prog.tensors[s.reads[0]].dtype}
    store_at: dict[str, int] = {}
    for s in members:  # in member order, so stores keep program order
        t = s.writes
        if t not in stored:
            continue
        if t in views:  # the put_along's buffer, reshaped: stored with it
            store_at[t] = bound[views[t]]
            continue
        if t in bound:
            store_at[t] = bound[t]
        else:
            i = next((i for i in range(floating[t], len(stages))
                      if stages[i].domain == shape(t) and stages[i].kind != SCATTER), None)
            if i is None:
                stages.append(StagePlan("pointwise", shape(t)))
                i = len(stages) - 1
            store_at[t] = i
        stages[store_at[t]].stores.append(t)
    return Schedule(stages, bound, store_at, escapes, flipped, views)
