"""The op table's ops of real models beyond the first table (aten.py merges them into its
own): comparisons, logical ops, log1p, clamps, reductions over any axes, repeat, select,
running sums, fills and padding, convolution as conv1d, and writes into a slice
(functionally: a new tensor)."""

from __future__ import annotations

import numpy as np

from .table import SUM_SLICES, OpTable, arg, over_axes


def register(table: OpTable, aten) -> None:
    """The ops of real models beyond the first table: comparisons, log1p, clamp, reductions
    over any axes, repeat, select, and writes into a slice (functionally: a new tensor)."""
    lowering, OPS = table.lowering, table.ops
    unary = {aten.log1p.default: "log1p", aten.log.default: "log"}
    for op, cls in unary.items():
        OPS[op] = lambda ctx, n, cls=cls: ctx.emit(n, cls, [n.args[0]])

    @lowering(aten.ge.Scalar)
    def greater_equal(ctx, n):
        ctx.emit(n, "greater_equal", [n.args[0]], value=repr(float(n.args[1])))

    @lowering(aten.lt.Scalar, aten.le.Scalar)
    def less(ctx, n):
        """x < c as −x > −c (x ≤ c as −x ≥ −c): exact in floats."""
        minus = ctx.part(n, "neg", "neg", [n.args[0]], ctx.shape(n.args[0]))
        cls = "greater" if n.target == aten.lt.Scalar else "greater_equal"
        ctx.emit(n, cls, [minus], value=repr(-float(n.args[1])))

    @lowering(aten.le.Tensor, aten.lt.Tensor, aten.ge.Tensor, aten.gt.Tensor)
    def compare(ctx, n):
        """a ≤ b as b − a ≥ 0 (a < b: b − a > 0; ≥ and >: a − b): exact for the integer
        positions a causal mask compares (a decode step's cache positions with its own)."""
        a, b = n.args[:2]
        if not (ctx.is_tensor(a) and ctx.is_tensor(b)) or ctx.dtype(a) != ctx.dtype(b):
            ctx.unsupported(n, "a comparison of two tensors of different dtypes")
        first, second = (b, a) if n.target in (aten.le.Tensor, aten.lt.Tensor) else (a, b)
        d = ctx.part(n, "diff", "sub", [first, second], ctx.shape(n), ctx.dtype(a))
        cls = "greater_equal" if n.target in (aten.le.Tensor, aten.ge.Tensor) else "greater"
        ctx.emit(n, cls, [d], value=repr(0.0))

    def boolean(ctx, n, x):
        if ctx.dtype(x) != "i8" or ctx.dtype(n) != "i8":
            ctx.unsupported(n, f"a logical op on {ctx.dtype(x)} values (imported: booleans)")

    @lowering(aten.logical_and.default, aten.bitwise_and.Tensor)
    def logical_and(ctx, n):
        for x in n.args[:2]:
            boolean(ctx, n, x)
        ctx.emit(n, "mul", list(n.args[:2]))

    @lowering(aten.logical_or.default, aten.bitwise_or.Tensor)
    def logical_or(ctx, n):
        a, b = n.args[:2]
        for x in (a, b):
            boolean(ctx, n, x)
        ctx.emit(n, "where", [a, a, b])  # a where a holds, else b

    @lowering(aten.logical_not.default, aten.bitwise_not.default)
    def logical_not(ctx, n):
        x = n.args[0]
        boolean(ctx, n, x)
        ctx.emit(n, "greater_equal", [ctx.part(n, "neg", "neg", [x], ctx.shape(x))], value="0.0")  # −x ≥ 0: x is 0

    @lowering(aten.abs.default)
    def abs_(ctx, n):
        """|x| as x where x > 0, else −x (NaN stays NaN, −0 becomes 0)."""
        x = n.args[0]
        shape = ctx.shape(x)
        positive = ctx.part(n, "positive", "greater", [x], shape, "i8", value="0.0")
        ctx.emit(n, "where", [positive, x, ctx.part(n, "neg", "neg", [x], shape)])

    @lowering(aten.eq.Scalar, aten.ne.Scalar)
    def equal(ctx, n):
        """x == c as (x ≥ c) · (−x ≥ −c); x != c as its complement (1 − that)."""
        x, c = n.args[0], float(n.args[1])
        shape = ctx.shape(x)
        at_least = ctx.part(n, "ge", "greater_equal", [x], shape, "i8", value=repr(c))
        minus = ctx.part(n, "neg", "neg", [x], shape)
        at_most = ctx.part(n, "le", "greater_equal", [minus], shape, "i8", value=repr(-c))
        if n.target == aten.eq.Scalar:
            return ctx.emit(n, "mul", [at_least, at_most])
        both = ctx.part(n, "eq", "mul", [at_least, at_most], shape, "i8")
        ctx.emit(n, "greater_equal", [ctx.part(n, "not", "neg", [both], shape)], value="0.0")  # −b ≥ 0: b is 0

    @lowering(aten.sqrt.default)
    def sqrt(ctx, n):
        ctx.emit(n, "pow", [n.args[0]], exponent="0.5")

    @lowering(aten.clamp.default, aten.clamp_min.default, aten.clamp_max.default)
    def clamp(ctx, n):
        x = n.args[0]
        if n.target == aten.clamp_max.default:
            lo, hi = None, arg(n, 1, "max")
        else:
            lo = arg(n, 1, "min")
            hi = arg(n, 2, "max") if n.target == aten.clamp.default else None
        if ctx.is_tensor(lo) or ctx.is_tensor(hi):
            ctx.unsupported(n, "a clamp to tensor bounds (the class clamp takes numbers)")
        bounds = {k: repr(float(v)) for k, v in (("min", lo), ("max", hi)) if v is not None}
        ctx.alias(n, x) if not bounds else ctx.emit(n, "clamp", [x], **bounds)

    @lowering(aten.clamp.Tensor, aten.clamp_min.Tensor, aten.clamp_max.Tensor, aten.maximum.default)
    def clamp_tensor(ctx, n):
        """A clamp to tensor bounds (phimoe's router), a maximum: max(x, lo) as −minimum(−x, −lo),
        then minimum with hi; NaN where either operand is NaN, as torch's."""
        x = n.args[0]
        if n.target == aten.clamp_max.Tensor:
            lo, hi = None, arg(n, 1, "max")
        elif n.target == aten.clamp.Tensor:
            lo, hi = arg(n, 1, "min"), arg(n, 2, "max")
        else:
            lo, hi = n.args[1], None
        if not all(b is None or ctx.is_tensor(b) for b in (lo, hi)):
            ctx.unsupported(n, "a clamp to a tensor and a number (imported: tensors or numbers, not both)")
        if lo is None and hi is None:
            return ctx.alias(n, x)
        v = x
        if lo is not None:
            wide = tuple(np.broadcast_shapes(ctx.shape(x), ctx.shape(lo)))
            minus = [ctx.part(n, f"neg{i}", "neg", [t], ctx.shape(t)) for i, t in enumerate((x, lo))]
            v = ctx.part(n, "lower", "minimum", minus, wide)
            if hi is None:
                return ctx.emit(n, "neg", [v])
            v = ctx.part(n, "low", "neg", [v], wide)
        ctx.emit(n, "minimum", [v, hi])

    @lowering(aten.amax.default)
    def amax(ctx, n):
        over_axes(ctx, n, n.args[0], arg(n, 1, "dim", []), arg(n, 2, "keepdim", False), "amax")

    @lowering(aten.any.dim, aten.any.dims, aten.any.default)
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

    @lowering(aten.sum.dim_IntList)
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

    @lowering(aten.max.dim)
    def max_dim(ctx, n):
        pass  # no statement: its values are an amax, its indices an argmax, where a getitem reads them

    @lowering(aten.argmax.default)
    def argmax(ctx, n):
        dim = arg(n, 1, "dim")
        over_axes(ctx, n, n.args[0], None if dim is None else [dim], arg(n, 2, "keepdim", False), "argmax")

    @lowering(aten.linalg_vector_norm.default)
    def vector_norm(ctx, n):
        x, order = n.args[0], float(arg(n, 1, "ord", 2))
        if order != 2:
            ctx.unsupported(n, f"a vector norm of order {order} (imported: the 2-norm)")
        squares = ctx.part(n, "squares", "pow", [x], ctx.shape(x), exponent="2.0")
        sums = _Reduced(n, "sum")
        over_axes(ctx, sums, squares, arg(n, 2, "dim", None), arg(n, 3, "keepdim", False), "sum")
        ctx.emit(n, "pow", [ctx.names[sums]], exponent="0.5")

    @lowering(aten.repeat.default)
    def repeat(ctx, n):
        x, reps = n.args[0], list(n.args[1])
        shape = (1,) * (len(reps) - len(ctx.shape(x))) + ctx.shape(x)
        if all(r == 1 for r in reps):
            return ctx.alias(n, x) if shape == ctx.shape(x) else ctx.emit(n, "reshape", [x])
        spread = [d for s in shape for d in (1, s)]  # a unit axis before each axis, to expand
        v = ctx.part(n, "spread", "reshape", [x], spread)
        v = ctx.part(n, "copies", "expand", [v], [d for r, s in zip(reps, shape) for d in (r, s)])
        ctx.emit(n, "reshape", [v])

    @lowering(aten.select.int)
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

    @lowering(aten.copy.default)
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

    OPS[aten.convolution.default] = _convolution

    @lowering(aten.cumsum.default)
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

    @lowering(aten.full_like.default, aten.zeros_like.default, aten.ones_like.default, aten.new_zeros.default,
              aten.new_ones.default, aten.new_full.default, aten.new_empty.default, aten.empty_like.default)
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
        if _chosen_against_its_source(aten, n):
            shape = (1,) * len(shape)
        ctx.alias(n, ctx.filled(shape, ctx.dtype(n), float(value)))

    @lowering(aten.constant_pad_nd.default)
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

    @lowering(aten.slice_scatter.default)
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


def _chosen_against_its_source(aten, n) -> bool:
    """Whether fill `n` of x's shape is read only by `where(c, n, x)` or `where(c, x, n)` of that shape."""
    users = list(n.users)
    if len(users) != 1 or users[0].target != aten.where.self or n.target not in (aten.full_like.default,
                                                                                  aten.zeros_like.default):
        return False
    where = users[0]
    values = list(where.args[1:3])
    return n in values and values[1 - values.index(n)] is n.args[0] and \
        tuple(where.meta["val"].shape) == tuple(n.meta["val"].shape)


def _convolution(ctx, n) -> None:
    """aten.convolution: the class conv1d where it is one (1-D, stride 1, dilation 1, the same
    zero padding on both sides, not transposed); any other refused in one line naming its
    parameters."""
    x, w, bias, stride, padding, dilation, transposed, output_padding, groups = n.args[:9]
    shape, wshape = ctx.shape(x), ctx.shape(w)
    params = (f"stride {list(stride)}, padding {list(padding)}, dilation {list(dilation)}, transposed "
              f"{bool(transposed)}, output_padding {list(output_padding)}, groups {groups}, input {list(shape)}, "
              f"weight {list(wshape)}")
    if len(shape) != 3 or len(wshape) != 3 or list(stride) != [1] or list(dilation) != [1] or transposed \
            or any(output_padding) or len(padding) != 1 or shape[1] % groups or wshape[1] * groups != shape[1]:
        ctx.unsupported(n, f"a convolution with {params} (the class conv1d: 1-D, stride 1, dilation 1, "
                           "zero padding on both sides, grouped or depthwise)")
    operands = [x, w] + ([bias] if bias is not None else [])
    ctx.emit(n, "conv1d", operands, padding=int(padding[0]), groups=int(groups))


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


class _Reduced:
    """A reduction inside a lowering (a vector norm's sum of squares, `any`'s maximum): a node
    of its own for the reduction's parts, named `n__tag`, of n's shape and dtype or `dtype`."""

    def __init__(self, n, tag: str, dtype: str | None = None):
        self.name, self.meta, self.target = f"{n.name}__{tag}", n.meta, n.target
        if dtype is not None:
            import torch

            from .table import DTYPES

            torch_dtype = getattr(torch, next(k for k, v in DTYPES.items() if v == dtype))
            self.meta = {**n.meta, "val": torch.empty(tuple(n.meta["val"].shape), dtype=torch_dtype, device="meta")}
