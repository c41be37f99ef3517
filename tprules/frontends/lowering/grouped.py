"""The op table's ops of transformers' grouped experts (`grouped_mm`): the (token, expert)
pairs sorted by expert, the groups' offsets, one grouped matmul per projection, and the rows
put back in token order.

    expert_ids_g, perm = torch.sort(expert_ids)          sort: each id's place (sort_rank),
                                                           the sorted ids and perm put there
    hidden_states[perm // top_k]                          the tokens' rows, repeated top_k times
                                                           and taken at perm (no division)
    histc(expert_ids_g.float(), bins=E, min=0, max=E-1)   each expert's count: a one-hot of the
                                                           ids summed by a matmul (exact)
    cumsum(counts, dtype=int32)                           the offsets (reductions.py's running sum)
    grouped_mm(rows, W.transpose(-2, -1), offsets)        grouped_matmul
    inv_perm[perm] = arange(S)                            the inverse of a sort's perm is its rank

torch's own sort is not stable on the CPU; equal ids are taken here in their order, which
only reorders rows within one expert's group: the rows put back in token order, and so the
layer's output, are the same.
"""

from __future__ import annotations

from ...ops import Ops
from .table import arg, aten, lowering


@lowering("transformers.grouped_mm_fallback.default", optional=True, loads="transformers.integrations.moe")
@lowering("aten._grouped_mm.default", optional=True)
def grouped_mm(ctx, n):
    """A[M, K] by B[E, K, N] at the groups' offsets (torch._grouped_mm, transformers'
    fallback of it, `torch.ops.transformers.grouped_mm_fallback`, what its grouped form traces
    to where torch's own kernel is not taken): grouped_matmul; a bias or another output dtype
    refused. Either op is absent from a torch or transformers without it."""
    a, b = n.args[0], n.args[1]
    offsets = arg(n, 2, "offs")
    if offsets is None or len(ctx.shape(a)) != 2 or len(ctx.shape(b)) != 3:
        ctx.unsupported(n, f"a grouped matmul of {list(ctx.shape(a))} by {list(ctx.shape(b))} "
                           f"{'without offsets' if offsets is None else ''} (imported: 2-D by 3-D, with offsets)")
    if arg(n, 3, "bias") is not None or arg(n, 4, "out_dtype") is not None:
        ctx.unsupported(n, "a grouped matmul with a bias or an output dtype")
    ctx.emit(n, Ops.GROUPED_MATMUL, [a, _weights(ctx, n, b), offsets])


@lowering("aten.sort.default", "aten.sort.stable")
def sort(ctx, n):
    x = n.args[0]
    dim = arg(n, 1, "dim", -1) if n.target == aten.sort.default else n.kwargs.get("dim", -1)
    descending = arg(n, 2, "descending", False) if n.target == aten.sort.default else \
        n.kwargs.get("descending", False)
    if dim % len(ctx.shape(x)) != len(ctx.shape(x)) - 1 or descending:
        ctx.unsupported(n, f"a sort over axis {dim}, descending={descending} (imported: ascending, the last axis)")
    # no statement: item 0 the sorted values, item 1 the indices (sorted_item)


@lowering("aten.div.Tensor_mode", "aten.floor_divide.default")
def floor_div(ctx, n):
    """x // k read only as the rows of a table (the pairs' tokens, perm // top_k): no
    statement, the table is read repeated k times instead (`index`)."""
    if _repeat_of(n) is None or not all(_index_of(u, n) for u in n.users):
        ctx.unsupported(n, "an integer division (imported: ids divided by a whole number, read only as the "
                           "rows of a table)")


@lowering("aten.histc.default")
def histc(ctx, n):
    """Counts of whole-number ids 0 .. bins − 1 (bins of width 1 from min 0): a one-hot of
    [S, bins] summed over S by a matmul of ones, exact in float32."""
    x = n.args[0]
    bins, lo, hi = arg(n, 1, "bins", 100), arg(n, 2, "min", 0), arg(n, 3, "max", 0)
    if (lo, hi) != (0, bins - 1) or not _whole_numbers(x) or len(ctx.shape(x)) != 1:
        ctx.unsupported(n, f"a histogram of {bins} bins over [{lo}, {hi}] (imported: the counts of ids "
                           f"0 .. bins − 1 of one axis, min 0 and max bins − 1)")
    ctx.alias(n, counts(ctx, n, x, int(bins)))


def _weights(ctx, n, b):
    """The experts' matrices as the grouped matmul reads them: the checkpoint's weights
    through a permute statement where the model transposes them ([E, N, K] read as
    [E, K, N]), so that the weights keep their placement (moe_tp_experts' packed_colwise and
    rowwise entries) instead of being folded into a transposed copy."""
    if getattr(b, "target", None) == aten.permute.default and not ctx.is_dynamic(b) and ctx.is_weight(b.args[0]):
        dims = [d % 3 for d in b.args[1]]
        return ctx.part(n, "weights", Ops.PERMUTE, [b.args[0]], ctx.shape(b), ctx.dtype(b),
                        dims=",".join(map(str, dims)))
    return b


def rank(ctx, sort_node, x) -> str:
    """The value of each element's place in its row sorted stably (one sort_rank per sort)."""
    return ctx.part(sort_node, "rank", Ops.SORT_RANK, [x], ctx.shape(x), "i64")


def sorted_item(ctx, n, source, index: int) -> None:
    """Item `index` of a sort of x: its values (0) or its indices (1), each x's or its
    positions put at their rank along the last axis."""
    import torch

    x = source.args[0]
    shape, axis = ctx.shape(x), len(ctx.shape(x)) - 1
    places = rank(ctx, source, x)
    if index == 0:
        what = x
    else:
        length = shape[-1]
        what = ctx.constant(("positions", tuple(shape)), "positions",
                            lambda: torch.arange(length).expand(shape).contiguous(), "i64")
    ctx.emit(n, Ops.PUT_ALONG, [ctx.filled(shape, ctx.dtype(n)), places, what], axis=axis)


def counts(ctx, n, x, bins: int) -> str:
    """How many of the ids x[S] equal each of 0 .. bins − 1: [bins], float32."""
    import torch

    (s,) = ctx.shape(x)
    column = ctx.part(n, "column", Ops.RESHAPE, [x], [s, 1], ctx.dtype(x))
    experts = ctx.constant(("bins", bins), "bins", lambda: torch.arange(bins, dtype=torch.float32)[None, :], "f32")
    diff = ctx.part(n, "diff", Ops.SUB, [column, experts], [s, bins], "f32")
    at_least = ctx.part(n, "ge", Ops.GREATER_EQUAL, [diff], [s, bins], "i8", value="0.0")
    at_most = ctx.part(n, "le", Ops.GREATER_EQUAL, [ctx.part(n, "negated", Ops.NEG, [diff], [s, bins], "f32")], [s, bins],
                       "i8", value="0.0")
    onehot = ctx.part(n, "onehot", Ops.MUL, [at_least, at_most], [s, bins], "f32")
    ones = ctx.constant(("ones", s), "ones", lambda: torch.ones(1, s), "f32")
    total = ctx.part(n, "total", Ops.MATMUL, [ones, onehot], [1, bins], "f32")
    return ctx.part(n, "counts", Ops.RESHAPE, [total], [bins], "f32")


def _whole_numbers(x) -> bool:
    """Whether x holds whole numbers: integers, or integers converted to floats."""
    if not hasattr(x, "meta"):
        return False
    if not x.meta["val"].dtype.is_floating_point:
        return True
    return x.target == aten._to_copy.default and not x.args[0].meta["val"].dtype.is_floating_point


def _repeat_of(n) -> int | None:
    """k where n is an integer x // k (a floor division by a positive whole number), else None."""
    if n.target == aten.div.Tensor_mode and n.kwargs.get("rounding_mode", arg(n, 2, "rounding_mode")) != "floor":
        return None
    k = n.args[1]
    if not isinstance(k, int) or k <= 0 or n.args[0].meta["val"].dtype.is_floating_point:
        return None
    return k


def _index_of(user, n) -> bool:
    """Whether `user` reads n only as the ids of an index on axis 0."""
    if user.target != aten.index.Tensor:
        return False
    indices = user.args[1]
    return len(indices) == 1 and indices[0] is n and user.args[0] is not n


def repeated_rows(ctx, n, table, ids) -> bool:
    """table[ids // k] as the rows of the table repeated k times, taken at ids (exact, and
    torch's index of a negative id reads the same row of both); False where ids is not so."""
    if getattr(ids, "target", None) not in (aten.div.Tensor_mode, aten.floor_divide.default):
        return False
    k = _repeat_of(ids)
    if k is None:
        return False
    shape = ctx.shape(table)
    wide = ctx.part(n, "spread", Ops.EXPAND, [ctx.part(n, "rows", Ops.RESHAPE, [table], [shape[0], 1, *shape[1:]],
                                                       ctx.dtype(table))],
                    [shape[0], k, *shape[1:]], ctx.dtype(table))
    repeated = ctx.part(n, "repeated", Ops.RESHAPE, [wide], [shape[0] * k, *shape[1:]], ctx.dtype(table))
    ctx.emit(n, Ops.TAKE_ROWS, [repeated, ids.args[0]])
    return True

