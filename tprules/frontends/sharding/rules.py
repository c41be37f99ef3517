"""The sharding rules of the classes that compute (DTensor's sharding rules): a rule gets
the operands' placements and whole shapes, the result's whole shape and the chips, and
returns the result's placement, or raises `NotShardable` saying what the statement would
need (an all-gather, a local slice). The layout classes' rules are views.py's; which class
has which rule, table.py says.

>>> from .placement import REPLICATE, Shard, Split
>>> str(matmul({}, [REPLICATE, Shard((Split(0, 2, 32),))], [(8, 64), (32, 64)], (8, 32), 2, transpose_b=True))
'Shard(axis 1 in 2)'
"""

from __future__ import annotations

from .placement import PARTIAL, REPLICATE, Placement, Replicate, Shard, plain


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


def rank_aligned(p: Shard, rank: int, operand_rank: int) -> Shard:
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
            aligned = rank_aligned(p, rank, len(s))
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


def embedding(attrs, ins, shapes, out, tp, table=None, **_) -> Placement:
    """Rows of a table by ids. A table the plan splits as an embedding (`table`, its style's
    kind) reads replicated ids: split on its rows ("vocab": vocabulary-parallel) it gives a
    partial (zeros outside each chip's rows, `embedding_local_attrs`), split on its hidden
    axis ("embedding_colwise") a result split on the last axis. Any other table is whole."""
    weights, ids = ins
    if table in ("vocab", "embedding_colwise") and isinstance(weights, Shard):
        if not isinstance(ids, Replicate):
            raise NotShardable(f"ids placed {ids} (an embedding reads replicated ids)")
        return PARTIAL if table == "vocab" else Shard((plain(len(out) - 1, tp, out[-1]),))
    if not isinstance(weights, Replicate):
        raise NotShardable(f"an embedding table placed {weights} (vocabulary-parallel embedding is not imported)")
    return ids


def embedding_local_attrs(attrs, ins, shapes, tp, table=None, **_):
    """A vocabulary-parallel table's chip k holds rows [k V/N, (k+1) V/N): its statement's
    `offset` (ids outside its rows give zeros)."""
    if table != "vocab" or not isinstance(ins[0], Shard):
        return None
    rows = shapes[0][0] // tp
    return lambda chip: {"offset": str(chip * rows)}


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

