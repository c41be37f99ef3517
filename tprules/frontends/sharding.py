"""The sharding table: how placements flow through each registry class (DTensor's sharding
rules, for the classes an import writes). A rule gets the operands' placements and whole
shapes, and the result's whole shape, and returns the result's placement, or raises
`NotShardable` saying what the statement would need (an all-gather, a local slice).

A partial operand reaches a rule only for the classes in `PARTIAL_THROUGH` (a sum of
partials viewed another way is the view of the sum); for every other class tp.py first
folds it (the all-reduce) into a replicated tensor.

>>> from tprules.frontends.placement import Shard, REPLICATE
>>> RULES["matmul"]({}, [REPLICATE, Shard(((0, 2),))], [(8, 64), (32, 64)], (8, 32), 2, transpose_b=True)
Shard(splits=((1, 2),))
"""

from __future__ import annotations

from math import prod

from .placement import PARTIAL, REPLICATE, Partial, Placement, Replicate, Shard

PARTIAL_THROUGH = ("reshape", "permute")


class NotShardable(Exception):
    pass


def _rank_aligned(p: Shard, rank: int, operand_rank: int) -> Shard:
    off = rank - operand_rank
    return Shard(tuple((a + off, n) for a, n in p.splits))


def elementwise(attrs, ins, shapes, out, tp, **_) -> Placement:
    """NumPy broadcasting: shards must agree; a replicated operand must broadcast over every
    split axis (size 1 there), else it would need a local slice."""
    rank = len(out)
    shard = None
    for p, s in zip(ins, shapes):
        if isinstance(p, Shard):
            for a, _ in p.splits:
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
            for a, _ in shard.splits:
                if a >= off and s[a - off] != 1:
                    raise NotShardable(f"a replicated operand {list(s)} meets one placed {shard} "
                                       "(needs a local slice of the replicated one)")
    return shard


def row(attrs, ins, shapes, out, tp, **_) -> Placement:
    """Over the last axis: the rows may be split, the last axis not; weights replicated."""
    x = ins[0]
    if any(not isinstance(p, Replicate) for p in ins[1:]):
        raise NotShardable("a split weight or bias of a row class")
    if isinstance(x, Shard) and any(a == len(shapes[0]) - 1 for a, _ in x.splits):
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
        return Shard(((1, b.axes()[n_axis]),))
    if isinstance(a, Shard) and isinstance(b, Shard) and set(a.axes()) == {1} and set(b.axes()) == {k_axis} \
            and a.axes()[1] == b.axes()[k_axis] and a.replication(tp) == 1:
        return PARTIAL
    if isinstance(a, Shard) and set(a.axes()) == {0} and isinstance(b, Replicate):
        return a
    raise NotShardable(f"operands placed {a} and {b} (needs an all-gather or a redistribution)")


def bmm(attrs, ins, shapes, out, tp, **_) -> Placement:
    """Per batch: both operands split alike on the batch axis (attention heads)."""
    a, b = ins
    if isinstance(a, Replicate) and isinstance(b, Replicate):
        return REPLICATE
    if isinstance(a, Shard) and a == b and set(a.axes()) == {0}:
        return a
    raise NotShardable(f"operands placed {a} and {b} (heads split differently; needs a redistribution)")


def reshape(attrs, ins, shapes, out, tp, **_) -> Placement:
    (x,), (shape,) = ins, shapes
    if not isinstance(x, Shard):
        return x
    groups = axis_groups(shape, out)
    splits: list[tuple[int, int]] = []
    done: set[int] = set()
    for axis, parts in x.splits:
        if axis in done:
            continue
        into, outof = next((i, o) for i, o in groups if axis in i)
        mine = [(a, p) for a, p in x.splits if a in into]
        order = [a for a, _ in mine]
        if order != sorted(order) or x.splits[x.splits.index(mine[0]):][:len(mine)] != tuple(mine):
            raise NotShardable(f"splits {x} are not in axis order where axes {into} merge")
        done.update(order)
        if len(outof) == 1:  # axes merge (or one axis stays): the chips' blocks must stay contiguous
            for a in into:
                p = dict(mine).get(a, 1)
                if a < order[-1] and p != shape[a]:
                    raise NotShardable(f"axes {into} of {list(shape)} merge into one, split {x}: "
                                       "the blocks would not be contiguous")
            splits.append((outof[0], prod(p for _, p in mine)))
        elif len(into) == 1:  # one axis splits into several: its parts go to the major ones
            left = parts
            for o in outof:
                if left == 1:
                    break
                if out[o] % left == 0:
                    splits.append((o, left))
                    left = 1
                elif left % out[o] == 0:
                    splits.append((o, out[o]))
                    left //= out[o]
                else:
                    raise NotShardable(f"axis {axis} (size {shape[axis]}, split in {parts}) becomes axes of sizes "
                                       f"{[out[o] for o in outof]}: {parts} does not divide {out[o]}")
        else:
            raise NotShardable(f"axes {into} become axes {outof} and one of them is split")
    return Shard(tuple(splits))


def axis_groups(shape, out) -> list[tuple[list[int], list[int]]]:
    """Pairs (axes of `shape`, axes of `out`) whose sizes multiply to the same number."""
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


def permute(attrs, ins, shapes, out, tp, **_) -> Placement:
    (x,) = ins
    if not isinstance(x, Shard):
        return x
    dims = [int(d) for d in attrs["dims"].split(",")]
    return Shard(tuple((dims.index(a), p) for a, p in x.splits))


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
            return Shard(shard.splits + ((a, r),))
    return shard


def slice_(attrs, ins, shapes, out, tp, **_) -> Placement:
    (x,) = ins
    axis = int(attrs["axis"]) % len(out)
    if isinstance(x, Shard) and axis in x.axes():
        raise NotShardable(f"a slice of axis {axis}, which is split ({x})")
    return x


def cat(attrs, ins, shapes, out, tp, **_) -> Placement:
    axis = int(attrs["axis"]) % len(out)
    if any(p != ins[0] for p in ins[1:]):
        raise NotShardable(f"operands placed {', '.join(map(str, ins))}")
    if isinstance(ins[0], Shard) and axis in ins[0].axes():
        raise NotShardable(f"a cat on axis {axis}, which is split ({ins[0]})")
    return ins[0]


def embedding(attrs, ins, shapes, out, tp, **_) -> Placement:
    table, ids = ins
    if not isinstance(table, Replicate):
        raise NotShardable(f"an embedding table placed {table} (vocabulary-parallel embedding is not imported)")
    return ids if not isinstance(ids, Shard) else Shard(ids.splits)


RULES = {"matmul": matmul, "bmm": bmm, "reshape": reshape, "permute": permute, "expand": expand, "slice": slice_,
         "cat": cat, "embedding": embedding,
         **{c: row for c in ("softmax", "rmsnorm", "mean", "layernorm")}}


def rule(cls: str):
    return RULES.get(cls, elementwise)


__all__ = ["NotShardable", "PARTIAL_THROUGH", "Partial", "RULES", "rule"]
