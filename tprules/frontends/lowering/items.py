"""The op table's ops of several results: a split, top-k, max over an axis and a sort write
no statement of their own; each item a `getitem` reads is one (a slice, topk_values or
topk_indices, an amax or argmax, a sort's values or indices put at their rank)."""

from __future__ import annotations

from .grouped import sorted_item
from .reductions import over_axes
from .table import arg, aten, lowering


@lowering("aten.split_with_sizes.default", "aten.split.Tensor")
def split(ctx, n):
    pass  # no statement: each getitem of it is a slice


@lowering("aten.topk.default")
def topk(ctx, n):
    x, k = n.args[0], n.args[1]
    dim = n.args[2] if len(n.args) > 2 else n.kwargs.get("dim", -1)
    largest = n.args[3] if len(n.args) > 3 else n.kwargs.get("largest", True)
    if dim % len(ctx.shape(x)) != len(ctx.shape(x)) - 1 or not largest:
        ctx.unsupported(n, f"top-k over axis {dim}, largest={largest} (the classes take the largest of the last axis)")
    if k > ctx.shape(x)[-1]:
        ctx.unsupported(n, f"top-{k} of {ctx.shape(x)[-1]} (k larger than the axis)")
    # no statement: item 0 is topk_values, item 1 topk_indices (a statement writes one tensor)


@lowering("aten.max.dim")
def max_dim(ctx, n):
    pass  # no statement: its values are an amax, its indices an argmax, where a getitem reads them


@lowering("operator.getitem")
def getitem(ctx, n):
    source, index = n.args
    if source.target == aten.topk.default:
        cls = ("topk_values", "topk_indices")[index]
        return ctx.emit(n, cls, [source.args[0]], k=source.args[1])
    if source.target in (aten.split_with_sizes.default, aten.split.Tensor):
        x, sizes = source.args[0], source.args[1]
        axis = (source.args[2] if len(source.args) > 2 else 0) % len(ctx.shape(x))
        if isinstance(sizes, int):  # split.Tensor: chunks of one size
            sizes = [min(sizes, ctx.shape(x)[axis] - start) for start in range(0, ctx.shape(x)[axis], sizes)]
        start = sum(sizes[:index])
        return ctx.emit(n, "slice", [x], axis=axis, start=start, end=start + sizes[index], step=1)
    if source.target in (aten.sort.default, aten.sort.stable):
        return sorted_item(ctx, n, source, index)
    if source.target == aten.max.dim:  # item 0 the maximum, item 1 its index (an argmax)
        return over_axes(ctx, n, source.args[0], [arg(source, 1, "dim")], False, ("amax", "argmax")[index])
    if source.target == aten.native_layer_norm.default and index == 0:
        return ctx.alias(n, source)
    if source.target == aten.native_layer_norm.default:
        return  # mean and rstd: unused unless something reads them (then unsupported there)
    ctx.unsupported(n, f"item {index} of {source.target}")
