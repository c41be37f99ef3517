"""Layouts as views: a chain of layout reads over a buffer as strides into that buffer.

A layout class moves elements without computing (codegen/lowering/layout.py), so a chain of them
over a buffer (reshape, permute, expand, slice, transpose) reads element `idx` of the
result at one flat position of the buffer: an offset plus, per result axis, the index
times a stride, exactly as torch's and NumPy's views do. An axis that a reshape merged
from axes with unrelated strides (GQA's expand of key/value heads, then the merge of the
head axes) is kept as several factors, each a (size, stride) from outer to inner; the
index of such an axis is split into its factors.

Readers that take a block of memory as it lies (the BLAS matmul core, cpu/gemm.py and
render/batched.py) read a view directly: nothing is copied, and the cost model (cost.py) counts
only the bytes a view's reader loads. What is not a view (a pointwise prologue, a `cat`,
a dtype conversion, a reshape across strides that do not split) is computed into a buffer.

>>> from tprules.codegen.ir import Load, Remap
>>> x = Load("p0", (2, 3, 4))
>>> v = view_of(Remap("permute", x, (2, 4, 3), "f32", (0, 2, 1)), {"p0": "f32"})
>>> v.offset, v.axes
(0, (((2, 12),), ((4, 1),), ((3, 4),)))
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from ...ops import Ops
from ..ir import Expr, Load, Remap, Transpose

Factor = tuple[int, int]  # (size, stride in elements)
FLOAT_BUFFERS = ("f32", "f16", "bf16")  # kept as float32 in buffers (render/extern.py's list)


@dataclass(frozen=True)
class View:
    """Element idx of the result is buffer `param`'s flat element offset + Σ idx·stride, an
    axis of several factors split from outer to inner."""

    param: str
    offset: int
    axes: tuple[tuple[Factor, ...], ...]

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(prod(s for s, _ in a) for a in self.axes)

    def stride(self, axis: int) -> int | None:
        """The axis' one stride, or None when its factors do not merge into one."""
        merged = _merge(self.axes[axis])
        if not merged:
            return 0
        return merged[0][1] if len(merged) == 1 else None

    def offset_of(self, axis: int, index: str) -> str:
        """Source text of the flat offset that index `index` of `axis` adds."""
        terms = []
        inner = 1
        for size, stride in reversed(_merge(self.axes[axis])):
            if stride:
                at = index if inner == 1 else f"({index} // {inner})"
                at = at if inner * size == prod(s for s, _ in self.axes[axis]) else f"({at} % {size})"
                terms.append(at if stride == 1 else f"{at} * {stride}")
            inner *= size
        return " + ".join(reversed(terms)) or "0"


def _merge(factors: tuple[Factor, ...]) -> tuple[Factor, ...]:
    """Drop size-1 factors; join neighbours where the outer one steps over the inner one."""
    out: list[Factor] = []
    for size, stride in factors:
        if size == 1:
            continue
        if out and out[-1][1] == size * stride:
            out[-1] = (out[-1][0] * size, stride)
        else:
            out.append((size, stride))
    return tuple(out)


def view_of(e: Expr, dtypes: dict[str, str]) -> View | None:
    """The view `e` is of a float buffer, or None when `e` computes (see the module)."""
    if isinstance(e, Load):
        if dtypes.get(e.param) not in FLOAT_BUFFERS:
            return None
        strides = [prod(e.shape[a + 1:]) for a in range(len(e.shape))]
        return View(e.param, 0, tuple(((n, s),) for n, s in zip(e.shape, strides)))
    if isinstance(e, Transpose):
        inner = view_of(e.arg, dtypes)
        if inner is None or dtypes.get(inner.param) != e.dtype:
            return None  # a transpose that converts computes
        return View(inner.param, inner.offset, inner.axes[::-1])
    if not isinstance(e, Remap):
        return None
    inner = view_of(e.arg, dtypes)
    if inner is None or dtypes.get(inner.param) != e.dtype:
        return None
    if e.kind == Ops.PERMUTE:
        return View(inner.param, inner.offset, tuple(inner.axes[d] for d in e.params))
    if e.kind == Ops.EXPAND:
        lead = len(e.shape) - len(inner.axes)
        axes: list[tuple[Factor, ...]] = [((n, 0),) for n in e.shape[:lead]]
        for a, factors in enumerate(inner.axes):
            n = e.shape[lead + a]
            axes.append(((n, 0),) if inner.shape[a] == 1 and n != 1 else factors)
        return View(inner.param, inner.offset, tuple(axes))
    if e.kind == Ops.SLICE:
        axis, start, step = e.params
        stride = inner.stride(axis)
        if stride is None:
            return None
        axes = list(inner.axes)
        axes[axis] = ((e.shape[axis], stride * step),)
        return View(inner.param, inner.offset + start * stride, tuple(axes))
    if e.kind == Ops.RESHAPE:
        regrouped = _regroup([f for a in inner.axes for f in a if f[0] != 1], e.shape)
        return None if regrouped is None else View(inner.param, inner.offset, regrouped)
    return None


def _regroup(factors: list[Factor], shape) -> tuple[tuple[Factor, ...], ...] | None:
    """The factors (outer to inner, C order) cut into the axes of `shape`, splitting a factor
    where an axis ends inside it; None when a size does not divide."""
    factors = list(factors)
    axes = []
    for n in shape:
        taken: list[Factor] = []
        need = n
        while need > 1:
            if not factors:
                return None
            size, stride = factors.pop(0)
            if size <= need:
                if need % size:
                    return None
                taken.append((size, stride))
                need //= size
            else:
                if size % need:
                    return None
                taken.append((need, stride * (size // need)))
                factors.insert(0, (size // need, stride))
                need = 1
        axes.append(tuple(taken) or ((1, 0),))
    return None if factors else tuple(axes)


def block(v: View, rows: int, cols: int) -> tuple[bool, int] | None:
    """How BLAS reads the last two axes of `v` as an [rows, cols] block: (transposed,
    leading dimension), or None when no leading dimension fits."""
    rs, cs = v.stride(len(v.axes) - 2), v.stride(len(v.axes) - 1)
    if rs is None or cs is None:
        return None
    if (cs == 1 or cols == 1) and (rows == 1 or rs >= cols):
        return False, rs if rows > 1 else cols
    if (rs == 1 or rows == 1) and (cols == 1 or cs >= rows):
        return True, cs if cols > 1 else rows
    return None


__all__ = ["View", "block", "view_of"]
