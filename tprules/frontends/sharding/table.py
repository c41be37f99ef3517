"""The sharding table: how placements flow through each registry class (DTensor's sharding
rules, for the classes an import writes). A rule gets the operands' placements and whole
shapes, and the result's whole shape, and returns the result's placement, or raises
`NotShardable` saying what the statement would need (an all-gather, a local slice).

A partial operand reaches a rule only for the classes in `PARTIAL_THROUGH` (a sum of
partials viewed another way is the view of the sum); for every other class tp.py first
folds it (the all-reduce) into a replicated tensor.

>>> from tprules.frontends.sharding.placement import REPLICATE, Shard, Split
>>> str(RULES["matmul"]({}, [REPLICATE, Shard((Split(0, 2, 32),))], [(8, 64), (32, 64)], (8, 32), 2, transpose_b=True))
'Shard(axis 1 in 2)'
"""

from __future__ import annotations

from ... import ops
from ...ops import Ops
from ...program.axes import axis_groups
from .placement import PARTIAL, REPLICATE, Partial, Placement, Replicate, Shard, Split, plain

PARTIAL_THROUGH = (Ops.RESHAPE, Ops.PERMUTE)


class NotShardable(Exception):
    pass


class CutInside(NotShardable):
    """A reshape views a split factor of `size` as `groups` groups of `size // groups`, and its
    `parts` parts do not divide the groups: a chip would hold part of a group (4 heads of 8
    features over 8 chips). torch's view of each chip's block in the same shape fails, or
    holds other elements than the whole view's; the Sharder names the style that split it."""

    def __init__(self, text: str, size: int, groups: int, parts: int):
        super().__init__(text)
        self.size, self.groups, self.parts = size, groups, parts


def _rank_aligned(p: Shard, rank: int, operand_rank: int) -> Shard:
    off = rank - operand_rank
    return Shard(tuple(s.moved(s.axis + off) for s in p.splits))


def elementwise(attrs, ins, shapes, out, tp, **_) -> Placement:
    """NumPy broadcasting: shards must agree; a replicated operand must broadcast over every
    split axis (size 1 there), else it would need a local slice."""
    rank = len(out)
    shard = None
    for p, s in zip(ins, shapes):
        if isinstance(p, Shard):
            for a in p.axes():
                if s[a] != out[a + rank - len(s)]:
                    raise NotShardable(f"an operand split on axis {a} is broadcast there")
            aligned = _rank_aligned(p, rank, len(s))
            if shard is not None and aligned != shard:
                raise NotShardable(f"operands placed {shard} and {aligned} (needs a redistribution)")
            shard = aligned
    if shard is None:
        return REPLICATE
    for p, s in zip(ins, shapes):
        if isinstance(p, Replicate):
            off = rank - len(s)
            for a in shard.axes():
                if a >= off and s[a - off] != 1:
                    raise NotShardable(f"a replicated operand {list(s)} meets one placed {shard} "
                                       "(needs a local slice of the replicated one)")
    return shard


def row(attrs, ins, shapes, out, tp, **_) -> Placement:
    """Over the last axis: the rows may be split, the last axis not; weights replicated."""
    x = ins[0]
    if any(not isinstance(p, Replicate) for p in ins[1:]):
        raise NotShardable("a split weight or bias of a row class")
    if isinstance(x, Shard) and len(shapes[0]) - 1 in x.axes():
        raise NotShardable(f"its input is split on the last axis, which it reduces ({x}; needs an all-gather)")
    return x


def matmul(attrs, ins, shapes, out, tp, transpose_b=False, **_) -> Placement:
    """A[M, K] @ B[K, N] (B[N, K] with transpose_b): colwise B gives a result split on N,
    a rowwise pair (A split on K, B split on K) partial sums."""
    a, b = ins
    k_axis, n_axis = (1, 0) if transpose_b else (0, 1)
    if isinstance(a, Replicate) and isinstance(b, Replicate):
        return REPLICATE
    if isinstance(a, Replicate) and isinstance(b, Shard) and set(b.axes()) == {n_axis}:
        return Shard((b.at(n_axis).moved(1),))
    if isinstance(a, Shard) and isinstance(b, Shard) and set(a.axes()) == {1} and set(b.axes()) == {k_axis} \
            and a.at(1).moved(0) == b.at(k_axis).moved(0) and a.replication(tp) == 1:
        return PARTIAL
    if isinstance(a, Shard) and set(a.axes()) == {0} and isinstance(b, Replicate):
        return a
    raise NotShardable(f"operands placed {a} and {b} (needs an all-gather or a redistribution)")


def bmm(attrs, ins, shapes, out, tp, **_) -> Placement:
    """Per batch: both operands split alike on the batch axis (attention heads); or, as a
    matmul per batch, A split on its rows (an expert's gate_up weights gathered per token)
    or B on its columns, and a rowwise pair (A split on K, B split alike on K) partial sums."""
    a, b = ins
    if isinstance(a, Replicate) and isinstance(b, Replicate):
        return REPLICATE
    if isinstance(a, Shard) and a == b and set(a.axes()) == {0}:
        return a
    if isinstance(a, Shard) and set(a.axes()) == {1} and isinstance(b, Replicate):
        return a
    if isinstance(a, Replicate) and isinstance(b, Shard) and set(b.axes()) == {2}:
        return b
    if isinstance(a, Shard) and isinstance(b, Shard) and set(a.axes()) == {2} and set(b.axes()) == {1} \
            and a.at(2).moved(0) == b.at(1).moved(0) and a.replication(tp) == 1:
        return PARTIAL
    raise NotShardable(f"operands placed {a} and {b} (heads split differently; needs a redistribution)")


def grouped_matmul(attrs, ins, shapes, out, tp, **_) -> Placement:
    """A[M, K] by the experts' B[E, K, N] at replicated offsets (moe_tp_experts in the grouped
    form): B split on N (the experts' gate_up colwise) gives a result split on N; A and B
    split alike on K (down_proj rowwise) partial sums. The rows and the experts stay whole:
    which rows are whose is data (the offsets)."""
    a, b, offsets = ins
    if not isinstance(offsets, Replicate):
        raise NotShardable(f"offsets placed {offsets} (a grouped matmul reads them whole)")
    if isinstance(a, Replicate) and isinstance(b, Replicate):
        return REPLICATE
    if isinstance(a, Replicate) and isinstance(b, Shard) and set(b.axes()) == {2}:
        return Shard((b.at(2).moved(1),))
    if isinstance(a, Shard) and isinstance(b, Shard) and set(a.axes()) == {1} and set(b.axes()) == {1} \
            and a.at(1).moved(0) == b.at(1).moved(0) and a.replication(tp) == 1:
        return PARTIAL
    raise NotShardable(f"operands placed {a} and {b} (a grouped matmul splits the experts' N, or A's and B's K "
                       "alike; its rows and experts stay whole)")


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
    shard = _rank_aligned(x, len(out), len(shape))
    r = shard.replication(tp)
    off = len(out) - len(shape)
    for a in range(len(out)):
        grown = a < off or shape[a - off] == 1
        if r > 1 and grown and out[a] > 1 and out[a] % r == 0:
            return Shard(shard.splits + (plain(a, r, out[a]),))
    return shard


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


def local_attrs(cls: str, attrs, ins, shapes, tp):
    """Per-chip attributes where a chip's statement differs from the whole one (a slice of
    packed parts: each chip's parts are 1/parts as wide), as a function of the chip; else None."""
    if cls != Ops.SLICE or not isinstance(ins[0], Shard):
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


def take_rows(attrs, ins, shapes, out, tp, **_) -> Placement:
    """Rows of a table by ids: the table may be split on any axis but the rows' (the split
    moves behind the ids' axes); the ids replicated."""
    table, ids = ins
    if not isinstance(ids, Replicate):
        raise NotShardable(f"ids placed {ids} (take_rows reads replicated ids)")
    if not isinstance(table, Shard):
        return table
    if 0 in table.axes():
        raise NotShardable(f"a table split on its rows ({table}; each chip would hold only some of the rows)")
    lead = len(shapes[1])
    return Shard(tuple(s.moved(s.axis - 1 + lead) for s in table.splits))


def along(attrs, ins, shapes, out, tp, **_) -> Placement:
    """take_along, put_along: x, the index (and put_along's source) placed alike, on axes
    where they are the same size, none split on the axis the index picks along; the result
    placed so too."""
    axis = int(attrs["axis"]) % len(shapes[0])
    if all(isinstance(p, Replicate) for p in ins):
        return REPLICATE
    x = ins[0]
    if isinstance(x, Shard) and all(p == x for p in ins) and axis not in x.axes() \
            and all(len({s[a] for s in shapes}) == 1 for a in x.axes()):
        return x
    raise NotShardable(f"x, its index (and source) placed {', '.join(map(str, ins))} along axis {axis} (they must "
                       "be placed alike, none split on that axis)")


def embedding(attrs, ins, shapes, out, tp, **_) -> Placement:
    table, ids = ins
    if not isinstance(table, Replicate):
        raise NotShardable(f"an embedding table placed {table} (vocabulary-parallel embedding is not imported)")
    return ids


def conv1d(attrs, ins, shapes, out, tp, **_) -> Placement:
    """Over the sequence: the batch may be split; the channels only where each chip holds whole
    groups, its weight and bias split alike (a depthwise conv split by channel)."""
    x, w = ins[:2]
    if all(isinstance(p, Replicate) for p in ins):
        return REPLICATE
    if isinstance(x, Shard) and 2 in x.axes():
        raise NotShardable(f"its input is split on the sequence, which it convolves ({x})")
    groups = int(attrs["groups"])
    if isinstance(x, Shard) and set(x.axes()) == {0} and all(isinstance(p, Replicate) for p in ins[1:]):
        return x
    if isinstance(x, Shard) and set(x.axes()) == {1} and isinstance(w, Shard) and set(w.axes()) == {0} \
            and groups == shapes[0][1] and shapes[1][0] == groups and x.on(1) == w.at(0).moved(1) \
            and all(p == w for p in ins[2:]):
        return x
    raise NotShardable(f"operands placed {', '.join(map(str, ins))} (a conv1d is split by whole channels only "
                       "where it is depthwise)")


RULES = {Ops.MATMUL: matmul, Ops.CONV1D: conv1d, Ops.BMM: bmm, Ops.GROUPED_MATMUL: grouped_matmul, Ops.RESHAPE: reshape,
         Ops.PERMUTE: permute, Ops.EXPAND: expand,
         Ops.SLICE: slice_, Ops.CAT: cat, Ops.EMBEDDING: embedding, Ops.TAKE_ROWS: take_rows,
         Ops.TAKE_ALONG: along, Ops.PUT_ALONG: along, **{c: row for c in ops.ROW}}
# Linear in a partial operand (the others replicated): a sum of partials, so taken through
# where a style keeps the partial to its module's boundary (moe_tp_experts' one all-reduce).
LINEAR: dict[str, str] = {
    Ops.MUL: "one", Ops.DIV: "first", Ops.SCALE: "one", Ops.CAST: "one", Ops.SLICE: "one", Ops.RESHAPE: "one",
    Ops.PERMUTE: "one", Ops.EXPAND: "one", Ops.ADD: "all", Ops.SUB: "all", Ops.SUM: "all", Ops.NEG: "one",
    # the grouped form's rows put back in token order: rows of a sum are the sum of the rows
    Ops.TAKE_ROWS: "first"}


def partial_through(cls: str, ins) -> bool:
    """Whether a statement of `cls` over these placements is linear in its partial operands."""
    how = LINEAR.get(cls)
    partial = [isinstance(p, Partial) for p in ins]
    if how is None or not any(partial):
        return False
    if how == "all":
        return all(partial)
    others = [p for p, is_partial in zip(ins, partial) if not is_partial]
    if how == "first":
        return partial[0] and sum(partial) == 1 and all(isinstance(p, Replicate) for p in others)
    return sum(partial) == 1 and all(isinstance(p, Replicate) for p in others)


def rule(cls: str):
    return RULES.get(cls, elementwise)


# Besides the elementwise classes, those whose operands are cut alike on every axis but one
# (a cat's, a gather's or scatter's along its axis): a replicated operand as wide as a split
# one there may be each chip's own block of it (tp.py's local slices, no communication).
BLOCKWISE = (Ops.CAT, Ops.TAKE_ALONG, Ops.PUT_ALONG)


def reads_local_blocks(cls: str) -> bool:
    """Whether a statement of `cls` may read each chip's block of a replicated operand."""
    return rule(cls) is elementwise or cls in BLOCKWISE


__all__ = ["CutInside", "NotShardable", "PARTIAL_THROUGH", "Partial", "RULES", "rule"]
