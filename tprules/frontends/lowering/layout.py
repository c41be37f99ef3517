"""The op table's layout ops: views to a shape (reshape, squeeze, unsqueeze), permutes,
expands, slices, cat, repeat and select, and the ops that are their operand (a clone, a
cast to the same dtype). An op that leaves its operand as it is writes no statement: the
node is the operand's value."""

from __future__ import annotations

from .table import lowering


@lowering("aten.view.default", "aten._unsafe_view.default", "aten.reshape.default", "aten.unsqueeze.default",
          "aten.squeeze.dim", "aten.squeeze.dims", "aten.squeeze.default")
def reshape(ctx, n):
    x = n.args[0]
    ctx.alias(n, x) if ctx.shape(x) == ctx.shape(n) else ctx.emit(n, "reshape", [x])


@lowering("aten.permute.default")
def permute(ctx, n):
    x, dims = n.args
    rank = len(ctx.shape(x))
    dims = [d % rank for d in dims]
    if dims == list(range(rank)):
        return ctx.alias(n, x)
    ctx.emit(n, "permute", [x], dims=",".join(map(str, dims)))


@lowering("aten.expand.default")
def expand(ctx, n):
    x = n.args[0]
    ctx.alias(n, x) if ctx.shape(x) == ctx.shape(n) else ctx.emit(n, "expand", [x])


@lowering("aten.alias.default", "aten.clone.default", "aten.detach.default", "aten.lift_fresh_copy.default")
def same(ctx, n):
    ctx.alias(n, n.args[0])


@lowering("aten._to_copy.default")
def to_copy(ctx, n):
    x = n.args[0]
    if ctx.dtype(x) == ctx.dtype(n):
        return ctx.alias(n, x)
    ctx.emit(n, "cast", [x])


@lowering("aten.slice.Tensor")
def slice_(ctx, n):
    x = n.args[0]
    shape = ctx.shape(x)
    axis = (n.args[1] if len(n.args) > 1 else 0) % len(shape)
    start = n.args[2] if len(n.args) > 2 and n.args[2] is not None else 0
    end = n.args[3] if len(n.args) > 3 and n.args[3] is not None else shape[axis]
    step = n.args[4] if len(n.args) > 4 else 1
    start, end, _ = slice(start, end, step).indices(shape[axis])
    if (start, end, step) == (0, shape[axis], 1):
        return ctx.alias(n, x)
    ctx.emit(n, "slice", [x], axis=axis, start=start, end=max(start, end), step=step)


@lowering("aten.cat.default", reads_empty=True)
def cat(ctx, n):
    xs = [x for x in n.args[0] if ctx.shape(x) and 0 not in ctx.shape(x)]
    axis = (n.args[1] if len(n.args) > 1 else 0) % len(ctx.shape(n))
    if len(xs) == 1:
        return ctx.alias(n, xs[0])
    ctx.emit(n, "cat", xs, axis=axis)


@lowering("aten.repeat.default")
def repeat(ctx, n):
    x, reps = n.args[0], list(n.args[1])
    shape = (1,) * (len(reps) - len(ctx.shape(x))) + ctx.shape(x)
    if all(r == 1 for r in reps):
        return ctx.alias(n, x) if shape == ctx.shape(x) else ctx.emit(n, "reshape", [x])
    spread = [d for s in shape for d in (1, s)]  # a unit axis before each axis, to expand
    v = ctx.part(n, "spread", "reshape", [x], spread)
    v = ctx.part(n, "copies", "expand", [v], [d for r, s in zip(reps, shape) for d in (r, s)])
    ctx.emit(n, "reshape", [v])


@lowering("aten.select.int")
def select(ctx, n):
    x, axis, index = n.args[:3]
    shape = ctx.shape(x)
    axis %= len(shape)
    if not -shape[axis] <= index < shape[axis]:
        ctx.unsupported(n, f"index {index} of axis {axis} (size {shape[axis]}) is out of bounds")
    index %= shape[axis]
    v = ctx.part(n, "slice", "slice", [x], shape[:axis] + (1,) + shape[axis + 1:], axis=axis, start=index,
                 end=index + 1, step=1)
    ctx.emit(n, "reshape", [v])
