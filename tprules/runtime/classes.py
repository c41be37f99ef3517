"""The classes real models need beyond SPEC §4's seventeen (docs/classes.md): their shape
rules and the attributes they must carry. `program.statement_shape` asks here for them.

A layout class moves elements without computing: each element of its result is one element
of an operand, read at another index (`reshape`, `permute`, `expand`, `slice`, `cat`,
`embedding`). A row class reduces over the last axis (`mean`, `layernorm`); `bmm` is a
matmul per batch.

>>> shape_of("permute", {"dims": "0,2,1"}, [(2, 3, 4)], (2, 4, 3))
(2, 4, 3)
"""

from __future__ import annotations

from math import prod

import numpy as np

BMM = "bmm"
NEW_ROW = ("mean", "layernorm", "topk_values", "topk_indices")
TOPK = ("topk_values", "topk_indices")  # the k largest of the last axis, largest first (ties: lower index first)
NEW_UNARY = ("pow", "add_scalar", "sigmoid", "tanh", "gelu_erf", "expm1", "greater")
NEW_BINARY = ("minimum",)
NEW_TERNARY = ("where",)
# Read an operand at another index than the one they write (never computed in a stage's pass).
LAYOUT = ("reshape", "permute", "expand", "slice", "cat", "embedding", "take_rows")

# attribute → how it is read, per class (a missing one or a bad value is ill-formed)
NUMBER_ATTRS = {"pow": ("exponent",), "add_scalar": ("value",), "layernorm": ("eps",), "greater": ("value",)}
INT_ATTRS = {"slice": ("axis", "start", "end", "step"), "cat": ("axis",), "embedding": ("offset",),
             "topk_values": ("k",), "topk_indices": ("k",)}
OPTIONAL_INT = ("step", "offset")  # step 1; no offset: the whole table


def dims(text: str | None) -> list[int]:
    return [int(d) for d in (text or "").split(",") if d != ""]


def axis_groups(shape, out) -> list[tuple[list[int], list[int]]]:
    """A reshape of `shape` into `out` as pairs (axes of `shape`, axes of `out`) whose sizes
    multiply to the same number, in order; an axis of size 1 of `shape` is a pair of its own
    with no axis of `out`, and one of `out` belongs to no pair.

    >>> axis_groups((2, 6), (2, 3, 2))
    [([0], [0]), ([1], [1, 2])]
    >>> axis_groups((1, 4), (4,))
    [([0], []), ([1], [0])]
    """
    groups, i, j = [], 0, 0
    while i < len(shape) or j < len(out):
        if i < len(shape) and shape[i] == 1:
            groups.append(([i], []))
            i += 1
            continue
        if j < len(out) and out[j] == 1:
            j += 1
            continue
        into, outof, a, b = [i], [j], shape[i], out[j]
        i, j = i + 1, j + 1
        while a != b:
            if a < b:
                into.append(i)
                a *= shape[i]
                i += 1
            else:
                outof.append(j)
                b *= out[j]
                j += 1
        groups.append((into, outof))
    return groups


def _fmt(shape) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _axis(axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} is out of range for rank {rank}")
    return axis % rank


def shape_of(cls: str, attrs: dict[str, str], shapes: list[tuple[int, ...]], out: tuple[int, ...]) -> tuple[int, ...]:
    """The shape a new class computes (the destination's `out` where the class takes it from
    there); ValueError when the operands do not fit."""
    return SHAPES[cls](attrs, shapes, out)


def _bmm(attrs, shapes, out):
    a, b = shapes
    if len(a) != 3 or len(b) != 3:
        raise ValueError(f"bmm operands are 3-D; got {_fmt(a)} and {_fmt(b)}")
    if a[0] != b[0] or a[2] != b[1]:
        raise ValueError(f"bmm of {_fmt(a)} by {_fmt(b)}: batch or inner sizes differ")
    return (a[0], a[1], b[2])


def _mean(attrs, shapes, out):
    (x,) = shapes
    if not x:
        raise ValueError("mean needs at least one axis")
    return x[:-1] + (1,)


def _layernorm(attrs, shapes, out):
    x = shapes[0]
    if not x or len(shapes) > 3:
        raise ValueError("layernorm reads x[.., H] and at most a weight and a bias")
    for extra in shapes[1:]:
        if extra != x[-1:]:
            raise ValueError(f"layernorm weight and bias have shape {_fmt(x[-1:])}; got {_fmt(extra)}")
    return x


def _reshape(attrs, shapes, out):
    (x,) = shapes
    if prod(x) != prod(out):
        raise ValueError(f"reshape of {_fmt(x)} ({prod(x)} elements) to {_fmt(out)} ({prod(out)} elements)")
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
        raise ValueError(f"{_fmt(x)} does not expand to {_fmt(out)}") from None
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
            raise ValueError(f"cat on axis {axis} of {', '.join(_fmt(s) for s in shapes)}")
    return first[:axis] + (sum(s[axis] for s in shapes),) + first[axis + 1:]


def _embedding(attrs, shapes, out):
    table, ids = shapes
    if len(table) != 2:
        raise ValueError(f"embedding reads a table [V, H]; got {_fmt(table)}")
    return ids + (table[1],)


def _take_rows(attrs, shapes, out):
    table, ids = shapes
    if not table:
        raise ValueError("take_rows reads a table with at least one axis")
    return ids + table[1:]


def _topk(attrs, shapes, out):
    (x,) = shapes
    k = int(attrs["k"])
    if not x or not 1 <= k <= x[-1]:
        raise ValueError(f"top-{k} of a last axis of {x[-1] if x else 0}")
    return x[:-1] + (k,)


SHAPES = {BMM: _bmm, "mean": _mean, "take_rows": _take_rows, "topk_values": _topk, "topk_indices": _topk,
          "layernorm": _layernorm, "reshape": _reshape, "permute": _permute,
          "expand": _expand, "slice": _slice, "cat": _cat, "embedding": _embedding}


def check_attrs(cls: str, attrs: dict[str, str]) -> None:
    """ValueError naming the attribute a statement of `cls` lacks or has wrong."""
    for key in NUMBER_ATTRS.get(cls, ()):
        if key == "eps" and key not in attrs:
            continue
        try:
            float(attrs[key])
        except (KeyError, ValueError):
            raise ValueError(f"needs a number attribute {key}; got {attrs.get(key)!r}") from None
    for key in INT_ATTRS.get(cls, ()):
        if key in OPTIONAL_INT and key not in attrs:
            continue
        try:
            int(attrs[key])
        except (KeyError, ValueError):
            raise ValueError(f"needs an integer attribute {key}; got {attrs.get(key)!r}") from None
    if cls == "permute":
        try:
            dims(attrs.get("dims"))
        except ValueError:
            raise ValueError(f"needs attribute dims as comma-separated axes; got {attrs.get('dims')!r}") from None
