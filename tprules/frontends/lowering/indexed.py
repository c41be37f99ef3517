"""The op table's indexed ops: torch.gather and torch.scatter (of a value or a source) along
an axis, the gather and scatter of mixture-of-experts routing (a router's weights at its
top-k ids, DeepSeek's group-limited mask `zeros_like(s).scatter_(1, group_idx, 1)`, an
indexer's mask, Llama 4's scores put into −inf), a static cache's write at its positions
(index_put, index_copy), and rows taken by ids (index), as the classes take_along,
put_along and take_rows. The index is read as integer ids; one outside the axis is refused
where the program runs (runtime/values/semantics.py), since it is computed.
"""

from __future__ import annotations

from ...ops import Ops
from .grouped import repeated_rows
from .table import lowering

INTEGER_IDS = ("i64", "i32")


def along(ctx, n, x, axis: int, index) -> int:
    """The axis of a gather or scatter of x at `index`, or one line saying what does not fit."""
    shape, ishape = ctx.shape(x), ctx.shape(index)
    if ctx.dtype(index) not in INTEGER_IDS:
        ctx.unsupported(n, f"an index of dtype {ctx.dtype(index)} (the index is integer ids)")
    if len(shape) != len(ishape) or not shape:
        ctx.unsupported(n, f"an index {list(ishape)} of another rank than x {list(shape)}")
    return axis % len(shape)


@lowering("aten.gather.default")
def gather(ctx, n):
    """out[i] = x[i with axis `dim` at index[i]]: take_along."""
    x, dim, index = n.args[:3]
    ctx.emit(n, Ops.TAKE_ALONG, [x, index], axis=along(ctx, n, x, dim, index))


@lowering("aten.scatter.value")
def scatter_value(ctx, n):
    """x with `value` at index[i] along `dim` (functionalized scatter_): put_along."""
    x, dim, index, value = n.args[:4]
    if ctx.is_tensor(value):
        ctx.unsupported(n, "a scatter of a tensor value (put_along puts a number)")
    ctx.emit(n, Ops.PUT_ALONG, [x, index], axis=along(ctx, n, x, dim, index), value=repr(float(value)))


@lowering("aten.scatter.src")
def scatter_source(ctx, n):
    """x with src[i] at index[i] along `dim`: put_along with a source."""
    x, dim, index, source = n.args[:4]
    if n.kwargs.get("reduce") is not None:
        ctx.unsupported(n, f"a scatter that reduces ({n.kwargs['reduce']}; put_along replaces)")
    ctx.emit(n, Ops.PUT_ALONG, [x, index, source], axis=along(ctx, n, x, dim, index))


@lowering("aten.index_put.default")
def index_put(ctx, n):
    """x[.., index, ..] = values along one axis (functionalized index_put_ and index_copy_: a
    static cache's write of the new keys at their positions, transformers' StaticLayer):
    put_along with the index spread over the values' shape."""
    if n.args[3:4] and n.args[3]:
        ctx.unsupported(n, "an index_put that accumulates (put_along replaces)")
    _put_at(ctx, n, *n.args[:3])


@lowering("aten.index_copy.default")
def index_copy(ctx, n):
    """x.index_copy(dim, index, source): index_put along `dim`."""
    x, dim, index, source = n.args[:4]
    dim %= len(ctx.shape(x))
    _put_at(ctx, n, x, [None] * dim + [index], source)


def _put_at(ctx, n, x, indices, values):
    at = [i for i, index in enumerate(indices) if index is not None]
    shape, vshape = ctx.shape(x), ctx.shape(values)
    if len(at) != 1 or len(ctx.shape(indices[at[0]])) != 1:
        ctx.unsupported(n, "an index_put other than by one 1-D index along one axis")
    axis, index = at[0], indices[at[0]]
    width = ctx.shape(index)[0]
    want = tuple(shape[:axis]) + (width,) + tuple(shape[axis + 1:])
    if ctx.dtype(index) not in INTEGER_IDS or not _broadcasts(tuple(vshape), want):
        ctx.unsupported(n, f"an index_put of values {list(vshape)} at {ctx.dtype(index)} ids into x "
                           f"{list(shape)} along axis {axis} (imported: integer ids, values {list(want)})")
    if tuple(vshape) != want:  # values broadcast (a put of one element traced as a 0-d view: top-1 of one token)
        lead = [1] * (len(want) - len(vshape)) + list(vshape)
        values = ctx.part(n, "lined", Ops.RESHAPE, [values], lead, ctx.dtype(values))
        values = ctx.part(n, "values", Ops.EXPAND, [values], want, ctx.dtype(values))
    lined = [1] * len(shape)
    lined[axis] = width
    v = ctx.part(n, "ids", Ops.RESHAPE, [index], lined, ctx.dtype(index))
    v = ctx.part(n, "spread", Ops.EXPAND, [v], want, ctx.dtype(index))
    ctx.emit(n, Ops.PUT_ALONG, [x, v, values], axis=axis)


def _broadcasts(shape: tuple, want: tuple) -> bool:
    """Whether values of `shape` broadcast to `want` (torch's rule, trailing axes aligned)."""
    if len(shape) > len(want):
        return False
    return all(a in (1, b) for a, b in zip(shape[::-1], want[::-1]))


@lowering("aten.index.Tensor")
def index(ctx, n):
    """x[ids] on axis 0: take_rows (x[ids // k], the grouped experts' tokens: grouped.py's
    repeated rows)."""
    x, indices = n.args[0], n.args[1]
    if len(indices) != 1 or indices[0] is None:
        ctx.unsupported(n, "an index other than one tensor of ids on axis 0 (the class take_rows)")
    if ctx.dtype(indices[0]) not in ("i64", "i32"):
        ctx.unsupported(n, f"an index of dtype {ctx.dtype(indices[0])} (a mask; take_rows takes integer ids)")
    if repeated_rows(ctx, n, x, indices[0]):  # x[ids // k]: the grouped experts' tokens
        return
    ctx.emit(n, "take_rows", [x, indices[0]])
