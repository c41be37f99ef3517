"""Layout classes: each element of the result is one element of an operand, read at another
index; they move elements without computing (codegen/lowering/layout.py lowers them to index reads).

>>> from tprules.ops import CLASSES
>>> CLASSES["permute"].shape({"dims": "0,2,1"}, [(2, 3, 4)], (2, 4, 3))
(2, 4, 3)
"""

from __future__ import annotations

from math import prod

import numpy as np

from .base import N_ARY, OpClass, Ops, fmt_shape


def dims(text: str | None) -> list[int]:
    return [int(d) for d in (text or "").split(",") if d != ""]


def _axis(axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} is out of range for rank {rank}")
    return axis % rank


def _transpose_shape(attrs, shapes, out):
    if len(shapes[0]) != 2:
        raise ValueError(f"transpose is 2-D; got {fmt_shape(shapes[0])}")
    return shapes[0][::-1]


def _reshape(attrs, shapes, out):
    (x,) = shapes
    if prod(x) != prod(out):
        raise ValueError(f"reshape of {fmt_shape(x)} ({prod(x)} elements) to {fmt_shape(out)} ({prod(out)} elements)")
    return out


def _permute(attrs, shapes, out):
    (x,) = shapes
    p = dims(attrs.get("dims"))
    if sorted(p) != list(range(len(x))):
        raise ValueError(f"permute dims {attrs.get('dims')!r} are not a permutation of the {len(x)} axes")
    return tuple(x[d] for d in p)


def _expand(attrs, shapes, out):
    (x,) = shapes
    try:
        if tuple(np.broadcast_shapes(x, out)) != tuple(out):
            raise ValueError
    except ValueError:
        raise ValueError(f"{fmt_shape(x)} does not expand to {fmt_shape(out)}") from None
    return out


def _slice(attrs, shapes, out):
    (x,) = shapes
    axis = _axis(int(attrs["axis"]), len(x))
    start, end, step = int(attrs["start"]), int(attrs["end"]), int(attrs.get("step", "1"))
    if step < 1 or not 0 <= start <= end <= x[axis]:
        raise ValueError(f"slice {start}:{end}:{step} of axis {axis} (size {x[axis]})")
    return x[:axis] + (len(range(start, end, step)),) + x[axis + 1:]


def _cat(attrs, shapes, out):
    first = shapes[0]
    axis = _axis(int(attrs["axis"]), len(first))
    for s in shapes[1:]:
        if len(s) != len(first) or s[:axis] + s[axis + 1:] != first[:axis] + first[axis + 1:]:
            raise ValueError(f"cat on axis {axis} of {', '.join(fmt_shape(s) for s in shapes)}")
    return first[:axis] + (sum(s[axis] for s in shapes),) + first[axis + 1:]


def _embedding(attrs, shapes, out):
    table, ids = shapes
    if len(table) != 2:
        raise ValueError(f"embedding reads a table [V, H]; got {fmt_shape(table)}")
    return ids + (table[1],)


def _take_rows(attrs, shapes, out):
    table, ids = shapes
    if not table:
        raise ValueError("take_rows reads a table with at least one axis")
    return ids + table[1:]


def along(attrs, shapes, cls: str) -> int:
    """The axis of a class that reads x[..] at an index of x's rank along attr `axis` (the
    index's other axes no longer than x's: torch's gather and scatter); ValueError else."""
    x, index = shapes
    if len(x) != len(index) or not x:
        raise ValueError(f"{cls} reads x and an index of the same rank; got {fmt_shape(x)} and {fmt_shape(index)}")
    axis = _axis(int(attrs["axis"]), len(x))
    for d, (a, b) in enumerate(zip(x, index)):
        if d != axis and b > a:
            raise ValueError(f"the index {fmt_shape(index)} is longer than x {fmt_shape(x)} on axis {d}")
    return axis


def region(index_shape, axis: int) -> tuple[slice, ...]:
    """The part of x an index of `index_shape` along `axis` covers: all of the axis, the
    index's extent on the others."""
    return tuple(slice(None) if d == axis else slice(0, n) for d, n in enumerate(index_shape))


def along_bound(attrs, shapes) -> int:
    """How many positions an index along attr `axis` picks from: x's size there."""
    return shapes[0][int(attrs["axis"]) % len(shapes[0])]


def _take_along_shape(attrs, shapes, out):
    along(attrs, shapes, Ops.TAKE_ALONG)
    return tuple(shapes[1])


def _take_along(attrs, x, index):
    index = np.asarray(index).astype(np.int64)
    axis = int(attrs["axis"]) % x.ndim
    return np.take_along_axis(x[region(index.shape, axis)], index, axis)


def _embedding_ref(attrs, table, ids):
    ids = np.asarray(ids).astype(np.int64)
    if "offset" not in attrs:
        return table[ids]
    row = ids - int(attrs["offset"])  # a vocabulary-parallel slice: rows offset.. of the whole table
    inside = (row >= 0) & (row < len(table))
    return np.where(inside[..., None], table[np.clip(row, 0, len(table) - 1)], np.float32(0))


def _slice_ref(attrs, x):
    axis = int(attrs["axis"])
    index = [slice(None)] * x.ndim
    index[axis] = slice(int(attrs["start"]), int(attrs["end"]), int(attrs.get("step", "1")))
    return x[tuple(index)]


def _check_dims(attrs):
    try:
        dims(attrs.get("dims"))
    except ValueError:
        raise ValueError(f"needs attribute dims as comma-separated axes; got {attrs.get('dims')!r}") from None


CLASSES = (
    OpClass(Ops.TRANSPOSE, "layout", 1, "0", "2-D transpose", lambda attrs, x: x.T, _transpose_shape, spec=True),
    OpClass(Ops.RESHAPE, "layout", 1, "0", "the same elements in C order, in the destination's shape",
            lambda attrs, shape, x: x.reshape(shape), _reshape, shaped=True),
    OpClass(Ops.PERMUTE, "layout", 1, "0",
            "axes reordered: axis a of the result is axis dims[a] of x (attr `dims`, e.g. `0,2,1,3`)",
            lambda attrs, x: np.transpose(x, dims(attrs["dims"])), _permute, check=_check_dims),
    OpClass(Ops.EXPAND, "layout", 1, "0", "x broadcast (NumPy `broadcast_to`) to the destination's shape",
            lambda attrs, shape, x: np.broadcast_to(x, shape), _expand, shaped=True),
    OpClass(Ops.SLICE, "layout", 1, "0",
            "x[start:end:step] along `axis` (attrs `axis`, `start`, `end`, `step` default 1)", _slice_ref, _slice,
            int_attrs=("axis", "start", "end", "step"), optional_attrs=("step",)),
    OpClass(Ops.CAT, "layout", N_ARY, "0..n-1", "the operands concatenated along attr `axis`",
            lambda attrs, *xs: np.concatenate(xs, axis=int(attrs["axis"])), _cat, int_attrs=("axis",)),
    OpClass(Ops.EMBEDDING, "layout", 2, "0: table[V, H], 1: ids[..] (integers)",
            "table[ids]: rows of the table, [.., H]; with attr `offset` the table is rows offset.. of a larger "
            "one (vocabulary-parallel): row ids − offset, zero where that lies outside it",
            _embedding_ref, _embedding, int_attrs=("offset",), optional_attrs=("offset",), ids=(1,),
            bound=lambda attrs, shapes: None if "offset" in attrs else shapes[0][0]),
    OpClass(Ops.TAKE_ROWS, "layout", 2, "0: table[R, ..], 1: ids[..] (integers)",
            "table[ids]: rows of a table of any rank (an expert's weights by expert id), [ids.., table's other axes]",
            lambda attrs, table, ids: table[np.asarray(ids).astype(np.int64)], _take_rows, ids=(1,),
            bound=lambda attrs, shapes: shapes[0][0]),
    OpClass(Ops.TAKE_ALONG, "layout", 2, "0: x[..], 1: index[..] (integers, x's rank)",
            "out[i] = x[i with its attr `axis` index replaced by index[i]] (torch's gather, NumPy's "
            "take_along_axis): the index's shape, its other axes no longer than x's",
            _take_along, _take_along_shape, int_attrs=("axis",), ids=(1,), bound=along_bound),
)
