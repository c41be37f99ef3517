"""Lower a scheduled group to the kernel IR: expressions per stage, parameters, stores.

Parameters are named p0, p1, ... in order of first use, and sizes are constants, so two
groups that compute the same thing on the same shapes (chip 0's and chip 1's GELU) render
to the same source and compile once.

A `put_along` (lowering/schedule.py) is a pointwise stage copying x into its buffer, then the scatter
over its index (ir.ScatterStage). Where x is a program input read by that statement alone,
its buffer is the put_along's (`Param.alias`) and nothing is copied: inputs are uploaded
for each run (runtime/execution/executor.py), so no other kernel and no later run sees the write. A
stored reshape of a put_along is its buffer, reshaped (lowering/schedule.py's `views`).
"""

from __future__ import annotations

from typing import cast

from ... import ops
from ...ops import Ops
from ...program.model import BMM, GROUPED, LAYOUT, MATMUL, ROW, WINDOW, Program, Statement
from ..ir import (
    AbsMax,
    Acc,
    BatchedMatmulStage,
    Expr,
    GroupedMatmulStage,
    Kernel,
    Load,
    Matmul,
    MatmulStage,
    Op,
    Param,
    Pointwise,
    PutAlong,
    Quant,
    RowOp,
    RowOut,
    RowStage,
    ScatterStage,
    Store,
    Transpose,
)
from . import attention, layout, window
from .schedule import LOCAL, SCATTER, Schedule, operands, schedule


class Lowering:
    def __init__(self, group, prog: Program):
        self.group = group
        self.prog = prog
        self.members = sorted((prog.statement(o) for o in group.members), key=lambda s: prog.position[s.name])
        self.produced = {s.writes: s for s in self.members}
        self.fused = len(self.members) > 1
        self.sched: Schedule = schedule(self.members, prog)
        self.params: dict[object, Param] = {}
        self.scales: list[AbsMax] = []  # first passes the current stage needs
        self.origins: dict = {}  # expression or stored parameter -> the statement it computes

    # -- parameters ----------------------------------------------------------------------

    def _param(self, key, role: str, shape, dtype: str, tensor=None, local=(), alias=None) -> str:
        if key not in self.params:
            self.params[key] = Param(f"p{len(self.params)}", role, tuple(shape), dtype, tensor, tuple(local), alias)
        return self.params[key].name

    def tensor_param(self, t: str, alias: str | None = None) -> str:
        info = self.prog.tensors[t]
        role = "in" if t not in self.produced else ("out" if t in self.sched.escapes else "scratch")
        return self._param(t, role, info.shape, info.dtype, tensor=t, alias=alias)

    def local_param(self, fold: Statement) -> str:
        homes = tuple(sorted((self.prog.tensors[t].home, t) for t in fold.reads))
        first = self.prog.tensors[fold.reads[0]]
        return self._param(("local", fold.name), "local", first.shape, first.dtype, local=homes)

    # -- values --------------------------------------------------------------------------

    def value(self, t: str | None, stage: int, fold: Statement | None = None) -> Expr:
        """The value of tensor `t` as the pass of schedule stage `stage` computes it."""
        e = self._value(t, stage, fold)
        if t in self.produced:
            self.origins.setdefault(e, self.produced[t].name)
        return e

    def _value(self, t: str | None, stage: int, fold: Statement | None) -> Expr:
        if t is LOCAL:
            assert fold is not None  # LOCAL is a fold's own partial
            return Load(self.local_param(fold), self.prog.tensors[fold.reads[0]].shape)
        info = self.prog.tensors[t]
        if t not in self.produced or self.sched.store_at.get(t, stage) < stage:
            return Load(self.tensor_param(t), info.shape)
        s = self.produced[t]
        plan = self.sched.stages[stage]
        if s.cls in (MATMUL, BMM, GROUPED, *ROW):
            if self.sched.bound.get(t) != stage:
                raise AssertionError(f"{s.name} read in stage {stage} but computed in {self.sched.bound.get(t)}")
            node = Acc if s.cls in (MATMUL, BMM, GROUPED) else RowOut
            return node(plan.anchors.index(s.name), info.shape, info.dtype)
        reads = operands(s, self.produced, self.fused)
        if s.cls in LAYOUT:
            args = tuple(self.operand(s, i, u, stage) for i, u in enumerate(reads))
            return layout.expression(s, args, info.shape, info.dtype)
        if s.cls in WINDOW:
            args = tuple(self.operand(s, i, u, stage) for i, u in enumerate(reads))
            e = window.expression(s, args, info.shape, info.dtype)
            assert not isinstance(e, PutAlong)  # a scatter stage's (`scatter`), read from its buffer elsewhere
            return e
        if s.cls == Ops.TRANSPOSE:
            return Transpose(self.operand(s, 0, reads[0], stage), info.shape, info.dtype)
        args = tuple(self.operand(s, i, u, stage) for i, u in enumerate(reads))
        cls = Ops.SUM.value if s.fold else s.cls
        return Op(cls, args, info.shape, info.dtype, s.attrs)

    def operand(self, s: Statement, i: int, t: str | None, stage: int) -> Expr:
        v = self.value(t, stage, fold=s)
        if s.quant_format(i) is None:
            return v
        key = ("scale", stage, v)
        fresh = key not in self.params
        scale = self._param(key, "scale", (1,), "f32")
        if fresh:
            self.scales.append(AbsMax(scale, v))
        return Quant(v, scale, v.shape)

    # -- stages --------------------------------------------------------------------------

    def stage(self, i: int):
        plan = self.sched.stages[i]
        if plan.kind == SCATTER:
            return self.scatter(i)
        # anchors first: their operands are what the pass reads
        if plan.kind in (MATMUL, BMM, GROUPED):
            mms = []
            for o in plan.anchors:
                s = self.prog.statement(o)
                mms.append(Matmul(self.operand(s, 0, s.reads[0], i), self.operand(s, 1, s.reads[1], i),
                                  s.attr("transpose_b") == "1"))
        elif plan.kind == "row":
            rows = []
            for o in plan.anchors:
                s = self.prog.statement(o)
                w = self.operand(s, 1, s.reads[1], i) if len(s.reads) > 1 else None
                b = self.operand(s, 2, s.reads[2], i) if len(s.reads) > 2 else None
                eps = float(cast(str, s.attr("eps", ops.CLASSES[s.cls].eps or "1e-6")))  # a default: never None
                rows.append(RowOp(s.cls, self.operand(s, 0, s.reads[0], i), w, eps, b))
        stores = tuple(self.store(t, i) for t in plan.stores)
        if plan.kind == MATMUL:
            m, n, k = plan.dims
            return MatmulStage(m, n, k, tuple(mms), stores)
        if plan.kind == BMM:
            batch, m, n, k = plan.dims
            return BatchedMatmulStage(batch, m, n, k, tuple(mms), stores)
        if plan.kind == GROUPED:
            m, n, k, experts = plan.dims
            s = self.prog.statement(plan.anchors[0])
            return GroupedMatmulStage(m, n, k, experts, mms[0], self.operand(s, 2, s.reads[2], i), stores)
        if plan.kind == "row":
            return RowStage(plan.domain, tuple(rows), stores)
        return Pointwise(plan.domain, stores)

    def scatter(self, i: int) -> tuple:
        """A put_along's stages: x copied into its buffer (none where the buffer is x's), the scatter."""
        s = self.prog.statement(self.sched.stages[i].anchors[0])
        info = self.prog.tensors
        args = tuple(self.operand(s, k, u, i) for k, u in enumerate(s.reads))
        put = window.expression(s, args, info[s.writes].shape, info[s.writes].dtype)
        assert isinstance(put, PutAlong)  # a scatter stage's anchor is a put_along
        x = s.reads[0]
        in_place = (x not in self.prog.writer and list(self.prog.readers.get(x, ())) == [s.name]
                    and s.reads.count(x) == 1 and s.quant_format(0) is None
                    and info[x].storage == info[s.writes].storage)
        param = self.tensor_param(s.writes, alias=self.tensor_param(x) if in_place else None)
        self.origins.setdefault(param, s.name)
        for view, base in self.sched.views.items():
            if base == s.writes:
                self.origins.setdefault(self.tensor_param(view, alias=param), self.produced[view].name)
        scatter = ScatterStage(param, put)
        return (scatter,) if in_place else (Pointwise(put.shape, (Store(param, put.x),)), scatter)

    def store(self, t: str, stage: int) -> Store:
        if t in self.sched.flipped:  # the transpose's operand at this index, stored at the swapped one
            s = self.produced[t]
            v = self.operand(s, 0, s.reads[0], stage)
            dtype = self.prog.tensors[t].dtype
            if dtype != self.prog.tensors[s.reads[0]].dtype:
                v = Op(Ops.CAST.value, (v,), v.shape, dtype)
            store = Store(self.tensor_param(t), v, flip=True)
        else:
            store = Store(self.tensor_param(t), self.value(t, stage))
        self.origins.setdefault(store.param, self.produced[t].name)
        return store

    def kernel(self) -> Kernel:
        stages = []
        for i in range(len(self.sched.stages)):
            self.scales = []
            main = self.stage(i)
            stages.extend(self.scales)  # the quantized reads' first pass, just before
            stages.extend(main if isinstance(main, tuple) else (main,))
        return Kernel(self.group.group, tuple(s.name for s in self.members), self.group.place,
                      tuple(self.params.values()), tuple(stages), self.origins)


def lower(group, prog: Program) -> Kernel:
    """The kernel of one planned group (see ir.py for what a kernel holds), attention's
    chains each one stage (lowering/attention.py)."""
    return attention.fold(Lowering(group, prog).kernel())
