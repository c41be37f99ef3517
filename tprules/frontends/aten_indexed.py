"""The op table's indexed ops (aten.py merges this table into its own): torch.gather and
torch.scatter (of a value or a source) along an axis, the gather and scatter of
mixture-of-experts routing (a router's weights at its top-k ids, DeepSeek's group-limited
mask `zeros_like(s).scatter_(1, group_idx, 1)`, an indexer's mask, Llama 4's scores put
into −inf), as the classes take_along and put_along. The index is read as integer ids; one outside the axis is refused where
the program runs (runtime/semantics.py), since it is computed.
"""

from __future__ import annotations

from ..ops import Ops

INTEGER_IDS = ("i64", "i32")


def table(aten) -> dict:
    """ATen op → its lowering."""

    def along(ctx, n, x, axis: int, index) -> int:
        """The axis of a gather or scatter of x at `index`, or one line saying what does not fit."""
        shape, ishape = ctx.shape(x), ctx.shape(index)
        if ctx.dtype(index) not in INTEGER_IDS:
            ctx.unsupported(n, f"an index of dtype {ctx.dtype(index)} (the index is integer ids)")
        if len(shape) != len(ishape) or not shape:
            ctx.unsupported(n, f"an index {list(ishape)} of another rank than x {list(shape)}")
        return axis % len(shape)

    def gather(ctx, n):
        """out[i] = x[i with axis `dim` at index[i]]: take_along."""
        x, dim, index = n.args[:3]
        ctx.emit(n, Ops.TAKE_ALONG, [x, index], axis=along(ctx, n, x, dim, index))

    def scatter_value(ctx, n):
        """x with `value` at index[i] along `dim` (functionalized scatter_): put_along."""
        x, dim, index, value = n.args[:4]
        if ctx.is_tensor(value):
            ctx.unsupported(n, "a scatter of a tensor value (put_along puts a number)")
        ctx.emit(n, Ops.PUT_ALONG, [x, index], axis=along(ctx, n, x, dim, index), value=repr(float(value)))

    def scatter_source(ctx, n):
        """x with src[i] at index[i] along `dim`: put_along with a source."""
        x, dim, index, source = n.args[:4]
        if n.kwargs.get("reduce") is not None:
            ctx.unsupported(n, f"a scatter that reduces ({n.kwargs['reduce']}; put_along replaces)")
        ctx.emit(n, Ops.PUT_ALONG, [x, index, source], axis=along(ctx, n, x, dim, index))

    return {aten.gather.default: gather, aten.scatter.value: scatter_value, aten.scatter.src: scatter_source}
