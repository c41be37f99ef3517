"""The op table's reductions and row ops: means, sums, maxima and argmaxima over any axes
(`over_axes`: the axes moved last and merged, then the row class), softmax and layer norm
over the last axis, `any`, a vector norm, and a running sum (cumsum, as a matmul)."""

from __future__ import annotations

from math import prod

import numpy as np

from .compare import boolean
from .table import DTYPES, arg, lowering

SUM_SLICES = 64  # a sum over one axis of at most this size is slices and an n-ary sum


def over_axes(ctx, n, x, dims, keepdim: bool, reduce: str) -> None:
    """A reduction over `dims` of x as the row classes compute it: the reduced axes permuted
    last and merged into one, the row class, then the result's own shape. `reduce` is
    `amax` (the class), `argmax` (the top-1 index: the first of equal maxima, as torch),
    `mean`, or `sum` (a mean times the row's length)."""
    shape = ctx.shape(x)
    rank = len(shape)
    if ctx.dtype(x) not in ("f32", "f16", "bf16"):
        ctx.unsupported(n, f"a {reduce} of {ctx.dtype(x)} tensors (the row classes compute in floats)")
    axes = sorted({d % rank for d in dims}) if dims else list(range(rank))
    keep = [a for a in range(rank) if a not in axes]
    lead, h = [shape[a] for a in keep], prod(shape[a] for a in axes)
    v, moved = x, ctx.dtype(x)  # the layout parts move x's elements as they are
    if keep + axes != list(range(rank)):
        v = ctx.part(n, "last", "permute", [v], [shape[a] for a in keep + axes], moved,
                     dims=",".join(map(str, keep + axes)))
    if len(axes) != 1:
        v = ctx.part(n, "rows", "reshape", [v], lead + [h], moved)
    if reduce == "amax":
        v = ctx.part(n, "amax", "amax", [v], lead + [1])
    elif reduce == "argmax":
        v = ctx.part(n, "argmax", "topk_indices", [v], lead + [1], k=1)
    else:
        v = ctx.part(n, "mean", "mean", [v], lead + [1])
        if h != 1 and reduce == "sum":
            v = ctx.part(n, "total", "scale", [v], lead + [1], factor=repr(float(h)))
    del keepdim  # the node's own shape says how the result is kept
    if tuple(lead + [1]) == ctx.shape(n):
        return ctx.alias(n, v)
    ctx.emit(n, "reshape", [v])


@lowering("aten.mean.dim")
def mean(ctx, n):
    x, dims = n.args[0], n.args[1]
    keepdim = n.args[2] if len(n.args) > 2 else n.kwargs.get("keepdim", False)
    rank = len(ctx.shape(x))
    if dims is None or [d % rank for d in dims] != [rank - 1] or not keepdim:
        return over_axes(ctx, n, x, dims, keepdim, "mean")  # over other axes: moved last
    ctx.emit(n, "mean", [x])


@lowering("aten.sum.dim_IntList")
def sum_dims(ctx, n):
    """A sum over one axis of at most SUM_SLICES: slices and an n-ary sum (exact, any
    dtype); any other (several axes, a wide one): the mean over the axes moved last,
    times their size (`over_axes`, floats)."""
    x, dims = n.args[0], arg(n, 1, "dim", None)
    keepdim = arg(n, 2, "keepdim", False)
    shape = ctx.shape(x)
    if not dims or len(dims) != 1 or n.kwargs.get("dtype") is not None or shape[dims[0] % len(shape)] > SUM_SLICES:
        return over_axes(ctx, n, x, dims, keepdim, "sum")
    axis = dims[0] % len(shape)
    kept = shape[:axis] + (1,) + shape[axis + 1:]
    parts = [ctx.extra(n, f"part{i}", "slice", [x], kept, axis=axis, start=i, end=i + 1, step=1)
             for i in range(shape[axis])] if shape[axis] > 1 else [x]
    if keepdim or kept == ctx.shape(n):
        return ctx.emit(n, "sum", parts) if len(parts) > 1 else ctx.alias(n, parts[0])
    total = ctx.extra(n, "kept", "sum", parts, kept) if len(parts) > 1 else ctx.value(parts[0])
    ctx.emit(n, "reshape", [total])


@lowering("aten.amax.default")
def amax(ctx, n):
    over_axes(ctx, n, n.args[0], arg(n, 1, "dim", []), arg(n, 2, "keepdim", False), "amax")


@lowering("aten.argmax.default")
def argmax(ctx, n):
    dim = arg(n, 1, "dim")
    over_axes(ctx, n, n.args[0], None if dim is None else [dim], arg(n, 2, "keepdim", False), "argmax")


@lowering("aten.any.dim", "aten.any.dims", "aten.any.default")
def any_(ctx, n):
    """Whether any boolean along the axes holds (SDPA's check for a fully masked row): the
    booleans as floats, their maximum over the axes (`over_axes`), greater than 0."""
    x = n.args[0]
    boolean(ctx, n, x)
    dims = arg(n, 1, "dim", None)
    dims = [dims] if isinstance(dims, int) else dims
    floats = ctx.part(n, "float", "cast", [x], ctx.shape(x), "f32")
    most = _Reduced(n, "most", "f32")
    over_axes(ctx, most, floats, dims, arg(n, 2, "keepdim", False), "amax")
    ctx.emit(n, "greater", [ctx.names[most]], value="0.0")


@lowering("aten.linalg_vector_norm.default")
def vector_norm(ctx, n):
    x, order = n.args[0], float(arg(n, 1, "ord", 2))
    if order != 2:
        ctx.unsupported(n, f"a vector norm of order {order} (imported: the 2-norm)")
    squares = ctx.part(n, "squares", "pow", [x], ctx.shape(x), exponent="2.0")
    sums = _Reduced(n, "sum")
    over_axes(ctx, sums, squares, arg(n, 2, "dim", None), arg(n, 3, "keepdim", False), "sum")
    ctx.emit(n, "pow", [ctx.names[sums]], exponent="0.5")


@lowering("aten._softmax.default")
def softmax(ctx, n):
    """Over the last axis, the class; over another, that axis permuted last and back."""
    x, dim = n.args[0], n.args[1]
    shape = ctx.shape(x)
    axis = dim % len(shape)
    if axis == len(shape) - 1:
        return ctx.emit(n, "softmax", [x])
    dims = [a for a in range(len(shape)) if a != axis] + [axis]
    last = ctx.part(n, "last", "permute", [x], [shape[a] for a in dims], dims=",".join(map(str, dims)))
    rows = ctx.part(n, "rows", "softmax", [last], [shape[a] for a in dims])
    ctx.emit(n, "permute", [rows], dims=",".join(str(dims.index(a)) for a in range(len(shape))))


@lowering("aten.native_layer_norm.default")
def layer_norm(ctx, n):
    x, normalized, w, b, eps = n.args
    if len(normalized) != 1:
        ctx.unsupported(n, f"a layer norm over {len(normalized)} axes (the class layernorm is over the last)")
    operands = [x] + ([w] if w is not None else []) + ([b] if b is not None else [])
    if w is None and b is not None:
        ctx.unsupported(n, "a layer norm with a bias but no weight")
    ctx.emit(n, "layernorm", operands, eps=repr(float(eps)), value_of=n.meta["val"][0])


@lowering("aten.cumsum.default")
def cumsum(ctx, n):
    """A running sum along an axis as a matmul by an upper-triangular matrix of ones (a
    constant): out[.., j] = Σ_{i ≤ j} x[.., i]. Quadratic in the axis, which is a chunk of
    the sequence in the state-space layers that use it."""
    import torch

    x = n.args[0]
    shape = ctx.shape(x)
    axis = n.args[1] % len(shape)
    if ctx.dtype(n) not in ("f32", "f16", "bf16", "i32", "i64"):
        ctx.unsupported(n, f"a running sum of {ctx.dtype(n)} values (imported: floats and integers, as a matmul)")
    if ctx.dtype(n) in ("i32", "i64") and ctx.dtype(x) != ctx.dtype(n):
        # torch converts x to the result's dtype first (a grouped form's counts to int32 offsets);
        # the matmul's float32 sums of integers are exact below 2**24
        x = ctx.part(n, "whole", "cast", [x], shape, ctx.dtype(n))
    length = shape[axis]
    order = [a for a in range(len(shape)) if a != axis] + [axis]
    v = x
    if axis != len(shape) - 1:
        v = ctx.part(n, "last", "permute", [v], [shape[a] for a in order], dims=",".join(map(str, order)))
    rows = [shape[a] for a in order]
    v = ctx.part(n, "rows", "reshape", [v], [int(np.prod(rows[:-1])), length])
    upper = ctx.constant(("upper", length), "upper", lambda: torch.triu(torch.ones(length, length)), "f32")
    v = ctx.part(n, "sums", "matmul", [v, upper], [int(np.prod(rows[:-1])), length], "f32")
    v = ctx.part(n, "back", "reshape", [v], rows)
    if axis != len(shape) - 1:
        inverse = [order.index(a) for a in range(len(shape))]
        v = ctx.part(n, "axes", "permute", [v], shape, dims=",".join(map(str, inverse)))
    if ctx.dtype(n) != "f32":
        return ctx.emit(n, "cast", [v])
    ctx.alias(n, v)


class _Reduced:
    """A reduction inside a lowering (a vector norm's sum of squares, `any`'s maximum): a node
    of its own for the reduction's parts, named `n__tag`, of n's shape and dtype or `dtype`."""

    def __init__(self, n, tag: str, dtype: str | None = None):
        self.name, self.meta, self.target = f"{n.name}__{tag}", n.meta, n.target
        if dtype is not None:
            import torch

            torch_dtype = getattr(torch, next(k for k, v in DTYPES.items() if v == dtype))
            self.meta = {**n.meta, "val": torch.empty(tuple(n.meta["val"].shape), dtype=torch_dtype, device="meta")}
