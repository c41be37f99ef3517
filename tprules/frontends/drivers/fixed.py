"""What an imported graph holds whatever its input, for the tie analysis of a top-k (ties.py):

- `Fixed.of(t)`: the elements of t that are the same for every input, as (value, known):
  a causal mask's −inf (or dtype minimum) added to a score, a fill at constant positions, a
  zero router's logits. A mask value (SENTINEL or more in magnitude) swamps what it is added
  to: a score plus −3.4e38 is −3.4e38 for any score below 1e30, as float32 rounds it;
- `Fixed.flat(t, axis)`: the statement through which two of t's elements along `axis` can be
  equal for a whole range of inputs (a relu's zeros, a clamp's bound, equal weight columns),
  or None. The input ids are taken as generic: this finds the ties the graph makes, not
  those one input makes (a token repeated where nothing tells positions apart, a padding
  token whose embedding is a row of zeros: the self-check's tie-prone input, verify.py,
  holds both). A row of zeros can be harmless there: a router that ties only where the
  hidden state is zeros gives zeros from whichever experts it picks (Jamba's).

Both walk up from a tensor and stop where nothing fixed can come through: a matmul reads no
constant with a zero slice, an embedding reads the ids.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import numpy as np

from ...ops import CLASSES, ELEMENTWISE, ROW, Ops

SENTINEL = 1e30  # a mask's value: larger in magnitude than any score it is added to
CONSTANT = ("weight", "folded")
F32 = np.float32
FLAT, NULL = "flat", "null"  # two elements equal; a whole line zeros
# elementwise classes that keep equal elements equal (and make no new ones): those that keep 0
# at 0, and those that make a line of zeros one other value
ZERO_KEEPING = frozenset({Ops.NEG, Ops.TANH, Ops.SILU, Ops.GELU, Ops.GELU_ERF, Ops.SCALE, Ops.POW, Ops.LOG1P,
                          Ops.EXPM1})
KEEPS = frozenset({Ops.EXP, Ops.SIGMOID, Ops.RSQRT, Ops.ADD_SCALAR, Ops.LOG})
# classes with a flat region: a whole range of inputs gives one value
FLATTENS = frozenset({Ops.RELU, Ops.CLAMP, Ops.GREATER, Ops.GREATER_EQUAL})
MOVES = frozenset({Ops.RESHAPE, Ops.PERMUTE, Ops.EXPAND, Ops.SLICE, Ops.CAT, Ops.TRANSPOSE})


class Fixed:
    """The graph's fixed values and flat regions; `const(name)` gives a constant input's value
    (None where there is none: an import under --no-data)."""

    def __init__(self, graph, const: Callable[[str], np.ndarray | None]):
        self.graph, self.const = graph, const
        self.writer = {s.writes: s for s in graph.stmts}
        self._of: dict = {}
        self._flat: dict = {}

    def constant(self, t: str) -> bool:
        return self.graph.values[t].role in CONSTANT

    def shape(self, t: str) -> tuple[int, ...]:
        return tuple(self.graph.values[t].shape)

    # -- the same for every input ----------------------------------------------------

    def of(self, t: str):
        """(value, known) of t, or None where no element is known."""
        if t not in self._of:
            limit = sys.getrecursionlimit()
            sys.setrecursionlimit(max(limit, 20000))  # a residual stream walked up through every layer
            try:
                self._of[t] = self._known(t)
            finally:
                sys.setrecursionlimit(limit)
        return self._of[t]

    def _known(self, t: str):
        v = self.graph.values[t]
        if v.role in CONSTANT:
            value = self.const(t)
            return None if value is None else (np.asarray(value), np.ones(self.shape(t), bool))
        s = self.writer.get(t)
        if s is None:
            return None
        shape = self.shape(t)
        if s.cls in (Ops.MATMUL, Ops.BMM):
            return self._zero_product(s, shape)
        if s.cls not in ELEMENTWISE | ROW | MOVES | {Ops.PUT_ALONG, Ops.TAKE_ALONG}:
            return None
        operands = [self.of(r) for r in s.reads]
        if all(o is None for o in operands):
            return None
        values = [o[0] if o is not None else np.zeros(self.shape(r), F32) for o, r in zip(operands, s.reads)]
        knowns = [o[1] if o is not None else np.zeros(self.shape(r), bool) for o, r in zip(operands, s.reads)]
        try:
            return self._rule(s, shape, values, knowns)
        except Exception:  # noqa: BLE001 - a placeholder where an id or a shape is data: nothing known
            return None

    def _rule(self, s, shape, values, knowns):
        from ...runtime.values.semantics import apply

        attrs, dtype = dict(s.attrs), self.graph.values[s.writes].dtype
        value = np.asarray(apply(s.cls, attrs, values, {}, dtype, shape)).reshape(shape)
        if s.cls in MOVES:
            known = apply(s.cls, attrs, [k.astype(F32) for k in knowns], {}, "f32", shape) > 0.5
        elif s.cls in (Ops.PUT_ALONG, Ops.TAKE_ALONG):
            if not knowns[1].all():
                return None  # the positions are data
            marks = [knowns[0].astype(F32), values[1]] + [k.astype(F32) for k in knowns[2:]]
            known = apply(s.cls, {**attrs, "value": "1.0"} if "value" in attrs else attrs, marks, {}, "f32", shape) > 0.5
        elif s.cls in ROW:
            whole = np.all(np.broadcast_to(knowns[0], self.shape(s.reads[0])), axis=-1, keepdims=True)
            for w in knowns[1:]:
                whole = whole & np.all(w)
            known = np.broadcast_to(whole, shape[:-1] + (1,))
            if s.cls == Ops.AMAX:  # a known +inf is the maximum whatever the rest
                known = known | np.any(knowns[0] & (values[0] >= SENTINEL), axis=-1, keepdims=True)
            known = np.broadcast_to(known, shape)
        else:
            known = self.elementwise(s.cls, attrs, shape, values, knowns)
        known = np.asarray(known).reshape(shape) & ~np.isnan(value)
        return (value, known) if known.any() else None

    @staticmethod
    def elementwise(cls, attrs, shape, values, knowns):
        """Which elements of an elementwise statement's result are known, its operands' `knowns`."""
        def b(x):
            return np.broadcast_to(x, shape)

        known = np.ones(shape, bool)
        for k in knowns:
            known = known & b(k)
        if cls in (Ops.GREATER, Ops.GREATER_EQUAL) and abs(float(attrs["value"])) >= SENTINEL:
            known = np.ones(shape, bool)  # any score lies between the mask values
        if cls in (Ops.ADD, Ops.SUB, Ops.SUM):  # a mask value swamps an unknown finite score
            for v, k in zip(values, knowns):
                known = known | b(k & (np.abs(v) >= SENTINEL))
        elif cls == Ops.MUL:
            for v, k in zip(values, knowns):
                known = known | b(k & (v == 0))
        elif cls == Ops.WHERE:
            (cv, ck), (av, ak), (bv, bk) = zip(values, knowns)
            chosen = np.where(b(cv) != 0, b(ak), b(bk))
            known = np.where(b(ck), chosen, b(ak) & b(bk) & (b(av) == b(bv)))
        return known

    def _zero_product(self, s, shape):
        """A matmul with a constant operand: zeros where that operand's row (of A) or column (of
        B) is all zeros (a router's gate left zero); nothing known otherwise."""
        a, bm = s.reads[0], s.reads[1]
        known = np.zeros(shape, bool)
        if self.constant(a) and (va := self.const(a)) is not None:
            known = known | np.all(np.asarray(va) == 0, axis=-1)[..., :, None]
        if self.constant(bm) and (vb := self.const(bm)) is not None:
            vb = np.asarray(vb)
            cols = np.all(vb == 0, axis=-1) if s.attr("transpose_b") == "1" else np.all(vb == 0, axis=-2)
            known = known | cols[..., None, :]
        known = np.broadcast_to(known, shape)
        return (np.zeros(shape, F32), known.copy()) if known.any() else None

    # -- flat regions ------------------------------------------------------------------

    def flat(self, t: str, axis: int) -> str | None:
        """What makes two of t's elements along `axis` equal for a whole range of inputs (the
        statement, `name (class) of module`, or the constant), or None."""
        return self.tie(t, axis, FLAT)

    def tie(self, t: str, axis: int, kind: str) -> str | None:
        """FLAT: two elements along `axis` can be equal; NULL: a whole line along `axis` can be
        zeros at once (a relu's output: what a matmul needs to give a line of zeros): for a
        whole range of inputs, then what makes it so, else None."""
        axis %= max(len(self.shape(t)), 1)
        key = (t, axis, kind)
        if key not in self._flat:
            self._flat[key] = None  # a cycle (none in a graph) reads as nothing
            limit = sys.getrecursionlimit()
            sys.setrecursionlimit(max(limit, 20000))  # a residual stream walked up through every layer
            try:
                self._flat[key] = self._tie(t, axis, kind)
            finally:
                sys.setrecursionlimit(limit)
        return self._flat[key]

    def _tie(self, t: str, axis: int, kind: str) -> str | None:
        if self.constant(t):
            return self._constant_ties(t, axis, kind)
        s = self.writer.get(t)
        if s is None:
            return None  # the input ids: generic (see the module's note)
        where = f"{s.name} ({s.cls}) of {s.module or '(top)'}"
        cls, reads = s.cls, s.reads
        data = [r for r in reads if not self.constant(r)]
        if cls in FLATTENS or (cls == Ops.CAST and self.graph.values[t].dtype.startswith("i")):
            return where if kind == FLAT or cls != Ops.CLAMP or float(s.attr("min", "nan")) == 0 else None
        if cls == Ops.MINIMUM and len(data) < len(reads):
            return where if kind == FLAT else None  # a bound: a clamp
        if cls in ZERO_KEEPING or (cls == Ops.CAST) or cls in (Ops.RMSNORM, Ops.TOPK_VALUES, Ops.AMAX, Ops.MEAN):
            return self._along(reads[0], t, axis, kind)
        if cls in KEEPS or cls in (Ops.SOFTMAX, Ops.LAYERNORM):  # a line of zeros becomes one value
            if kind == NULL:
                return None
            return self._along(reads[0], t, axis, FLAT) or self._along(reads[0], t, axis, NULL)
        if cls in (Ops.ADD, Ops.SUB, Ops.SUM):  # a sum ties where every data operand does
            causes = [self._along(r, t, axis, kind) for r in data]
            if kind == NULL and any(self._constant_ties(r, None, NULL) is None for r in reads if r not in data):
                return None
            return causes[0] if causes and all(causes) else None
        if cls in (Ops.MUL, Ops.DIV, Ops.MINIMUM):  # a product is zeros where a factor is
            factors = data[:1] if cls == Ops.DIV else data
            null = next((c for r in factors if (c := self._along(r, t, axis, NULL))), None)
            if null or kind == NULL:
                return null
            causes = [self._along(r, t, axis, FLAT) for r in data]
            return causes[0] if len(causes) > 1 and all(causes) else None
        if cls == Ops.WHERE:  # a constant branch is a fill: Fixed.of counts it where its place is fixed
            return next((c for r in reads[1:] if not self.constant(r) and (c := self._along(r, t, axis, kind))), None)
        if cls in (Ops.MATMUL, Ops.BMM):
            return self._product(s, t, axis, kind)
        return self._moved(s, t, axis, kind, where)

    def _along(self, r: str, t: str, axis: int, kind: str) -> str | None:
        """tie(r) along the axis of r that broadcasting aligns with t's `axis`; an axis r lacks
        or holds once is one value along t's: not a tie of r's making."""
        rank, own = len(self.shape(t)), len(self.shape(r))
        at = axis - (rank - own)
        if at < 0 or self.shape(r)[at] == 1 and self.shape(t)[axis] > 1:
            return None
        return self.tie(r, at, kind)

    def _product(self, s, t, axis, kind):
        """A matmul: a row of A (over the contraction) all zeros makes a row of the output zeros,
        a column of B its column; along the last axis B's columns can be equal, along the one
        before A's rows."""
        a, bm = s.reads[0], s.reads[1]
        rank = len(self.shape(t))
        tb = s.attr("transpose_b") == "1"
        rows_a = self.tie(a, len(self.shape(a)) - 1, NULL)
        cols_b = self.tie(bm, len(self.shape(bm)) - (1 if tb else 2), NULL)
        if axis == rank - 1:
            if kind == NULL:
                return rows_a
            return cols_b or rows_a or self._slices(bm, len(self.shape(bm)) - (2 if tb else 1))
        if axis == rank - 2:
            if kind == NULL:
                return cols_b
            return rows_a or cols_b or self._slices(a, len(self.shape(a)) - 2)
        return self._along(a, t, axis, kind) or self._along(bm, t, axis, kind)

    def _slices(self, t: str, axis: int) -> str | None:
        """Two whole slices of t along `axis` can be equal (a constant's exactly: two expert rows
        of a router's gate; an operand's where its elements along `axis` can tie)."""
        if not self.constant(t):
            return self.tie(t, axis, FLAT)
        value = self.const(t)
        if value is None:
            return None  # no values (--no-data): a weight taken as generic
        rows = np.moveaxis(np.asarray(value), axis, 0).reshape(np.shape(value)[axis], -1)
        return f"the constant {t}" if len(np.unique(rows, axis=0)) < len(rows) else None

    def _moved(self, s, t, axis, kind, where):
        """Layout: the axis followed back to its operand (an expand along it copies: a tie)."""
        cls, x = s.cls, s.reads[0]
        src, dst = self.shape(x), self.shape(t)
        if cls == Ops.PERMUTE:
            return self.tie(x, [int(d) for d in s.attr("dims").split(",")][axis], kind)
        if cls == Ops.TRANSPOSE:
            return self.tie(x, 1 - axis, kind)
        if cls == Ops.EXPAND:
            at = axis - (len(dst) - len(src))
            if at < 0 or (src[at] == 1 and dst[axis] > 1):
                return where if kind == FLAT else None
            return self.tie(x, at, kind)
        if cls in (Ops.SLICE, Ops.TAKE_ALONG, Ops.PUT_ALONG):
            return self.tie(x, axis, kind)
        if cls == Ops.CAT:  # a constant part is fixed: Fixed.of counts its ties
            parts = [self.tie(r, axis, kind) if not self.constant(r) else
                     (self._constant_ties(r, axis, kind) if kind == NULL else None) for r in s.reads]
            return (next((c for c in parts if c), None) if kind == FLAT or axis != int(s.attr("axis")) % len(dst)
                    else (parts[0] if all(parts) else None))
        if cls == Ops.RESHAPE:
            causes = [self.tie(x, a, kind) for a in _reshaped(src, dst, axis)]
            return (next((c for c in causes if c), None) if kind == FLAT else
                    (causes[0] if causes and all(causes) else None))
        return None  # an embedding, take_rows, a window: what it reads is taken as generic

    def _constant_ties(self, t: str, axis: int | None, kind: str) -> str | None:
        """A constant: two equal elements along `axis` (FLAT; every row of an all-zero router
        gate) or a line of zeros (NULL; axis None: any zero). Under --no-data nothing is known:
        taken as generic, as the input ids are."""
        value = self.const(t)
        if value is None:
            return None
        value = np.asarray(value)
        if axis is None or value.ndim == 0:
            return f"the constant {t}" if kind == NULL and np.any(value == 0) else None
        v = np.moveaxis(value, axis, -1).reshape(-1, value.shape[axis])
        if kind == NULL:
            return f"the constant {t}" if np.any(np.all(v == 0, axis=-1)) else None
        if v.shape[-1] < 2:
            return None
        ordered = np.sort(v, axis=-1)
        return f"the constant {t}" if np.any(ordered[:, 1:] == ordered[:, :-1]) else None


def _reshaped(src: tuple[int, ...], dst: tuple[int, ...], axis: int) -> list[int]:
    """The axes of `src` that a reshape to `dst` merges into (or splits) `dst`'s `axis`."""
    i = j = 0
    while i < len(src) or j < len(dst):
        group_s, group_d = [i] if i < len(src) else [], [j] if j < len(dst) else []
        ps = src[i] if i < len(src) else 1
        pd = dst[j] if j < len(dst) else 1
        i, j = i + 1, j + 1
        while ps != pd:
            if ps < pd and i < len(src):
                ps *= src[i]
                group_s.append(i)
                i += 1
            elif j < len(dst):
                pd *= dst[j]
                group_d.append(j)
                j += 1
            else:
                break
        if axis in group_d:
            return [a for a in group_s if src[a] > 1] or group_s[:1]
    return []


__all__ = ["CLASSES", "Fixed", "SENTINEL"]
