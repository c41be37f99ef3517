"""The op table's fills and writes: a tensor of one value (a constant), padding (a cat of
constant blocks), and the functionalized writes into a slice: `copy` (the value written)
and `slice_scatter` (a new tensor, a cat of the base's slices around the region)."""

from __future__ import annotations

from .table import arg, aten, lowering


@lowering("aten.full_like.default", "aten.zeros_like.default", "aten.ones_like.default", "aten.new_zeros.default",
          "aten.new_ones.default", "aten.new_full.default", "aten.new_empty.default", "aten.empty_like.default")
def filled_like(ctx, n):
    """A tensor of one value that reads x only for its shape: a constant (empty ones hold zeros).
    Read only by `where(c, full_like(x, v), x)` (torch's safe softmax: 0 for a row that is
    all −inf), the constant is v in x's rank, every axis 1, which the where broadcasts: not a
    whole [.., S, S] copy that a chip holding a block of the heads would slice once and every
    layer then read."""
    value = {aten.full_like.default: lambda: arg(n, 1, "fill_value"), aten.new_full.default:
             lambda: arg(n, 2, "fill_value"), aten.ones_like.default: lambda: 1.0,
             aten.new_ones.default: lambda: 1.0}.get(n.target, lambda: 0.0)()
    if ctx.is_tensor(value):
        ctx.unsupported(n, "a fill value that is a tensor")
    shape = ctx.shape(n)
    if _chosen_against_its_source(n):
        shape = (1,) * len(shape)
    ctx.alias(n, ctx.filled(shape, ctx.dtype(n), float(value)))


def _chosen_against_its_source(n) -> bool:
    """Whether fill `n` of x's shape is read only by `where(c, n, x)` or `where(c, x, n)` of that shape."""
    users = list(n.users)
    if len(users) != 1 or users[0].target != aten.where.self or n.target not in (aten.full_like.default,
                                                                                  aten.zeros_like.default):
        return False
    where = users[0]
    values = list(where.args[1:3])
    return n in values and values[1 - values.index(n)] is n.args[0] and \
        tuple(where.meta["val"].shape) == tuple(n.meta["val"].shape)


@lowering("aten.constant_pad_nd.default")
def pad(ctx, n):
    """Padding as a cat of constant blocks around x, axis by axis from the last (a negative
    padding crops: a slice)."""
    x, widths = n.args[0], list(n.args[1])
    value = float(arg(n, 2, "value", 0.0))
    v, shape = x, list(ctx.shape(x))
    for pair in range(len(widths) // 2):
        axis = len(shape) - 1 - pair
        before, after = widths[2 * pair], widths[2 * pair + 1]
        if before < 0 or after < 0:
            start, end = max(0, -before), shape[axis] - max(0, -after)
            if end < start:
                ctx.unsupported(n, f"a crop of axis {axis} (size {shape[axis]}) by {before}, {after}")
            shape[axis] = end - start
            v = ctx.part(n, f"crop{axis}", "slice", [v], shape, axis=axis, start=start, end=end, step=1)
            before, after = max(0, before), max(0, after)
        if before == after == 0:
            continue
        parts = []
        for width in (before, after):
            block = list(shape)
            block[axis] = width
            parts.append(ctx.filled(block, ctx.dtype(n), value) if width else None)
        shape[axis] += before + after
        v = ctx.part(n, f"pad{axis}", "cat", [p for p in (parts[0], v, parts[1]) if p is not None], shape,
                     axis=axis)
    ctx.alias(n, v)


@lowering("aten.copy.default")
def copy(ctx, n):
    """copy_(dst, src) functionalized: the value written is src, broadcast to dst's shape, in
    dst's dtype (a slice_scatter then writes it into the base)."""
    dst, src = n.args[:2]
    v = src
    if ctx.dtype(src) != ctx.dtype(n):
        v = ctx.part(n, "cast", "cast", [v], ctx.shape(src))
    if ctx.shape(src) != ctx.shape(n):
        return ctx.emit(n, "expand", [v])
    ctx.alias(n, v)


@lowering("aten.slice_scatter.default")
def slice_scatter(ctx, n):
    """base with base[start:end] along `dim` replaced by src: a new tensor, written by a
    cat of the base's slices around the region and src (no tensor is written twice)."""
    base, src = n.args[:2]
    shape = ctx.shape(base)
    axis = arg(n, 2, "dim", 0) % len(shape)
    start, end, step = arg(n, 3, "start", None), arg(n, 4, "end", None), arg(n, 5, "step", 1)
    start = 0 if start is None else start
    end = shape[axis] if end is None else end
    region = range(*slice(start, end, step).indices(shape[axis]))
    if step != 1:
        ctx.unsupported(n, f"a write into every {step}th element of axis {axis} (imported: step 1)")
    if not (0 <= start <= shape[axis] and region.stop - region.start == ctx.shape(src)[axis]):
        ctx.unsupported(n, f"a write of {ctx.shape(src)[axis]} elements into {start}:{end} of axis {axis} "
                           f"(size {shape[axis]}): out of bounds")
    _write_region(ctx, n, base, src, axis, region.start, region.stop)


def _write_region(ctx, n, base, src, axis: int, start: int, end: int) -> None:
    shape = ctx.shape(base)
    parts = []
    if start > 0:
        parts.append(ctx.part(n, "before", "slice", [base], shape[:axis] + (start,) + shape[axis + 1:],
                              axis=axis, start=0, end=start, step=1))
    parts.append(src)
    if end < shape[axis]:
        parts.append(ctx.part(n, "after", "slice", [base], shape[:axis] + (shape[axis] - end,) + shape[axis + 1:],
                              axis=axis, start=end, end=shape[axis], step=1))
    if len(parts) == 1:
        return ctx.alias(n, src)
    ctx.emit(n, "cat", parts, axis=axis)
