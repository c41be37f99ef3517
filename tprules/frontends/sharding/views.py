"""The sharding rules of the layout classes: each moves, views or picks elements, and its
rule says where a placement's splits land in the result (a split keeps its place among the
elements). table.py says which class has which rule.

>>> from .placement import Shard, plain
>>> str(permute({"dims": "0,2,1"}, [Shard((plain(2, 2, 4),))], [(1, 8, 4)], (1, 4, 8), 2))
'Shard(axis 1 in 2)'
"""

from __future__ import annotations

from ...program.axes import axis_groups
from .placement import Placement, Shard, Split, plain
from .rules import CutInside, NotShardable, rank_aligned


def reshape(attrs, ins, shapes, out, tp, **_) -> Placement:
    """The same elements in another shape. In each group of axes whose sizes multiply to the
    same number, a split factor keeps its place in the flattened group: it lands in the
    result axes that hold those strides, its parts going to the major ones first. Two split
    factors that become adjacent merge when the major one is cut to single indices (the
    key/value heads and their copies becoming the heads)."""
    (x,), (shape,) = ins, shapes
    if not isinstance(x, Shard):
        return x
    splits: list[tuple[int, Split]] = []  # (position of the source split: the chip digit's order, split)
    for into, outof in axis_groups(shape, out):
        factors = [_factor(split_a, a, into, shape) for a in into if (split_a := x.on(a)) is not None]
        if not factors:
            continue
        order = [f for f in sorted(factors, key=lambda f: -f[0])]
        if [x.splits.index(x.on(f[3])) for f in order] != sorted(x.splits.index(x.on(f[3])) for f in order):
            raise NotShardable(f"splits {x} are not major first where axes {into} of {list(shape)} reshape")
        merged = [order[0]]
        for stride, size, parts, axis in order[1:]:
            top_stride, top_size, top_parts, top_axis = merged[-1]
            if top_stride == stride * size and top_parts == top_size:  # adjacent, the major one cut to indices
                merged[-1] = (stride, size * top_size, parts * top_parts, top_axis)
            else:
                merged.append((stride, size, parts, axis))
        for stride, size, parts, axis in merged:
            position = x.splits.index(x.on(axis))
            splits.extend((position, split) for split in _place(stride, size, parts, outof, out, x))
    axes = [s.axis for _, s in splits]
    if len(set(axes)) != len(axes):
        raise NotShardable(f"{x} would cut an axis of {list(out)} twice")
    return Shard(tuple(s for _, s in sorted(splits, key=lambda p: p[0])))  # stable: major first within one


def _factor(split: Split, axis: int, into: list[int], shape) -> tuple[int, int, int, int]:
    """(stride in the flattened group, size, parts, axis) of a split factor."""
    below = 1
    for a in into[into.index(axis) + 1:]:
        below *= shape[a]
    return split.inner * below, split.factor, split.parts, axis


def _place(stride: int, size: int, parts: int, outof: list[int], out, x) -> list[Split]:
    """The splits of result axes `outof` holding a factor of `size` at `stride`."""
    strides = {}
    below = 1
    for o in reversed(outof):
        strides[o] = below
        below *= out[o]
    placed, left = [], parts
    for o in outof:  # major first
        lo, hi = strides[o], strides[o] * out[o]
        top, bottom = min(hi, stride * size), max(lo, stride)
        if top <= bottom or left == 1:
            continue
        portion, inner = top // bottom, bottom // lo
        whole = portion * inner == out[o]  # nothing above the factor: a plain split of the axis
        if portion % left == 0:
            placed.append(plain(o, left, out[o]) if whole else Split(o, left, portion, inner))
            left = 1
        elif left % portion == 0:
            if portion > 1 and left > portion:  # the rest of the parts would cut each group
                raise CutInside(f"{x}: a factor of {size} cut in {parts} is {portion} groups of {size // portion} "
                                f"in {list(out)}: a chip would hold part of a group", size, portion, parts)
            placed.append(plain(o, portion, out[o]) if whole else Split(o, portion, portion, inner))
            left //= portion
        else:
            raise CutInside(f"{x}: a factor of {size} cut in {parts} meets an axis of {out[o]} ({list(out)}): "
                            f"{left} does not divide {portion}", size, portion, parts)
    if left != 1:
        raise NotShardable(f"{x} does not fit the axes of {list(out)}")
    return placed


def permute(attrs, ins, shapes, out, tp, **_) -> Placement:
    (x,) = ins
    if not isinstance(x, Shard):
        return x
    dims = [int(d) for d in attrs["dims"].split(",")]
    return Shard(tuple(s.moved(dims.index(s.axis)) for s in x.splits))


def expand(attrs, ins, shapes, out, tp, **_) -> Placement:
    """Broadcast: splits move with the axes; a block replicated on r chips may split an
    expanded axis in r instead (each chip keeps 1/r of the copies: Megatron's KV heads)."""
    (x,), (shape,) = ins, shapes
    if not isinstance(x, Shard):
        return x
    shard = rank_aligned(x, len(out), len(shape))
    r = shard.replication(tp)
    off = len(out) - len(shape)
    for a in range(len(out)):
        grown = a < off or shape[a - off] == 1
        if r > 1 and grown and out[a] > 1 and out[a] % r == 0:
            return Shard(shard.splits + (plain(a, r, out[a]),))
    return shard


def transpose(attrs, ins, shapes, out, tp, **_) -> Placement:
    """A 2-D transpose: the split moves with its axis (0 to 1, 1 to 0). (No import writes
    one: the class is the examples' and the planner's, codegen's flipped store.)"""
    (x,) = ins
    if not isinstance(x, Shard):
        return x
    return Shard(tuple(s.moved(1 - s.axis) for s in x.splits))


def slice_(attrs, ins, shapes, out, tp, **_) -> Placement:
    """A slice of an axis that is not split; or of whole packed parts of a packed split axis
    (gate from up of a packed_colwise gate_up_proj): each chip slices its own parts."""
    (x,) = ins
    axis = int(attrs["axis"]) % len(out)
    if isinstance(x, Shard) and axis in x.axes():
        split = x.at(axis)
        packed = _packed_slice(split, attrs, shapes[0][axis])
        if packed is None:
            raise NotShardable(f"a slice of axis {axis}, which is split ({x})")
        return Shard(tuple(packed if s is split else s for s in x.splits))
    return x


def _packed_slice(split: Split, attrs, size: int) -> Split | None:
    """The split of a slice that takes whole packed parts of a packed axis, else None."""
    if split.plain(size):
        return None
    unit = split.factor * split.inner
    start, end, step = int(attrs["start"]), int(attrs["end"]), int(attrs.get("step", "1"))
    if step != 1 or start % unit or end % unit:
        return None
    outer = (end - start) // unit
    return plain(split.axis, split.parts, split.factor) if outer == 1 and split.inner == 1 else split


def slice_local_attrs(attrs, ins, shapes, tp, **_):
    """A slice of packed parts: each chip's parts are 1/parts as wide, so are its bounds."""
    if not isinstance(ins[0], Shard):
        return None
    axis = int(attrs["axis"]) % len(shapes[0])
    split = ins[0].on(axis)
    if split is None:
        return None
    start, end = int(attrs["start"]) // split.parts, int(attrs["end"]) // split.parts
    return lambda chip: {"start": str(start), "end": str(end)}


def cat(attrs, ins, shapes, out, tp, **_) -> Placement:
    axis = int(attrs["axis"]) % len(out)
    if any(p != ins[0] for p in ins[1:]):
        raise NotShardable(f"operands placed {', '.join(map(str, ins))}")
    if isinstance(ins[0], Shard) and axis in ins[0].axes():
        raise NotShardable(f"a cat on axis {axis}, which is split ({ins[0]})")
    return ins[0]

