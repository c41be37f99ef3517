"""The op table: each core ATen op, one small function that writes its node as a statement
of a registry class (docs/classes.md), or says the node is another value (a view to its own
shape, a clone). An op not in the table is one error naming the architecture, the op, the
module path, and what is missing.

    @lowering(aten.mm.default)
    def mm(ctx, n):
        a, b = n.args
        ...

lower.py walks the traced graph in order and calls the table for every node that depends
on `input_ids` (the table's functions call back its `emit`, `alias`, `value`, ...). The
indexed ops (gather, scatter) are aten_indexed.py's table, merged into this one.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from . import aten_indexed

OPS: dict[object, Callable] = {}
SKIP: set = set()  # ops that compute nothing (assertions)
CAT: set = set()  # ops that may read an empty tensor (they drop it)
SUM_SLICES = 64  # a sum over one axis of at most this size is slices and an n-ary sum


def lowering(*ops):
    def register(fn):
        for op in ops:
            OPS[op] = fn
        return fn
    return register


# torch dtype → tensor dtype; a boolean is kept as an i8 0 or 1
DTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "int64": "i64", "int32": "i32", "int8": "i8",
          "bool": "i8"}


def _table():
    import torch

    aten = torch.ops.aten
    SKIP.update({aten._assert_tensor_metadata.default, aten._assert_scalar.default,
                 aten.sym_constrain_range_for_size.default})

    @lowering(aten.embedding.default)
    def embedding(ctx, n):
        ctx.emit(n, "embedding", [n.args[0], n.args[1]])

    @lowering(aten.mm.default)
    def mm(ctx, n):
        a, b = n.args
        weight = ctx.transposed(b)
        if weight is not None:  # x @ W.T, W as the checkpoint holds it
            ctx.emit(n, "matmul", [a, weight], transpose_b=1)
        else:
            ctx.emit(n, "matmul", [a, b])

    @lowering(aten.bmm.default)
    def bmm(ctx, n):
        ctx.emit(n, "bmm", list(n.args[:2]))

    def binary(cls, scalar):
        def lower(ctx, n):
            a, b = n.args[:2]
            if n.kwargs.get("alpha", 1) != 1:
                ctx.unsupported(n, "an alpha other than 1")
            if ctx.is_tensor(a) and ctx.is_tensor(b):
                return ctx.emit(n, cls, [a, b])
            if not ctx.is_tensor(a):
                ctx.unsupported(n, "a number as the first operand")
            scalar(ctx, n, a, float(b))
        return lower

    def add_number(ctx, n, x, c):
        ctx.alias(n, x) if c == 0 else ctx.emit(n, "add_scalar", [x], value=repr(c))

    def sub_number(ctx, n, x, c):
        add_number(ctx, n, x, -c)

    def mul_number(ctx, n, x, c):
        ctx.alias(n, x) if c == 1 else ctx.emit(n, "scale", [x], factor=repr(c))

    def div_number(ctx, n, x, c):
        mul_number(ctx, n, x, 1.0 / c)

    OPS[aten.add.Tensor] = binary("add", add_number)
    OPS[aten.sub.Tensor] = binary("sub", sub_number)
    OPS[aten.mul.Tensor] = binary("mul", mul_number)
    OPS[aten.div.Tensor] = binary("div", div_number)

    @lowering(aten.mul.Scalar)
    def mul_scalar(ctx, n):
        mul_number(ctx, n, n.args[0], float(n.args[1]))

    @lowering(aten.add.Scalar)
    def add_scalar(ctx, n):
        add_number(ctx, n, n.args[0], float(n.args[1]))

    def unary(cls):
        return lambda ctx, n: ctx.emit(n, cls, [n.args[0]])

    for op, cls in ((aten.neg.default, "neg"), (aten.exp.default, "exp"), (aten.rsqrt.default, "rsqrt"),
                    (aten.relu.default, "relu"), (aten.sigmoid.default, "sigmoid"), (aten.tanh.default, "tanh"),
                    (aten.silu.default, "silu"), (aten.expm1.default, "expm1")):
        OPS[op] = unary(cls)

    @lowering(aten.minimum.default)
    def minimum(ctx, n):
        ctx.emit(n, "minimum", list(n.args[:2]))

    @lowering(aten.where.self)
    def where(ctx, n):
        ctx.emit(n, "where", list(n.args[:3]))

    @lowering(aten.gt.Scalar)
    def greater(ctx, n):
        ctx.emit(n, "greater", [n.args[0]], value=repr(float(n.args[1])))

    @lowering(aten.gelu.default)
    def gelu(ctx, n):
        approximate = n.kwargs.get("approximate", n.args[1] if len(n.args) > 1 else "none")
        ctx.emit(n, "gelu" if approximate == "tanh" else "gelu_erf", [n.args[0]])

    @lowering(aten.pow.Tensor_Scalar)
    def pow_(ctx, n):
        x, e = n.args
        ctx.alias(n, x) if e == 1 else ctx.emit(n, "pow", [x], exponent=repr(float(e)))

    @lowering(aten.mean.dim)
    def mean(ctx, n):
        x, dims = n.args[0], n.args[1]
        keepdim = n.args[2] if len(n.args) > 2 else n.kwargs.get("keepdim", False)
        rank = len(ctx.shape(x))
        if dims is None or [d % rank for d in dims] != [rank - 1] or not keepdim:
            return _over_axes(ctx, n, x, dims, keepdim, "mean")  # over other axes: moved last
        ctx.emit(n, "mean", [x])

    @lowering(aten._softmax.default)
    def softmax(ctx, n):
        x, dim = n.args[0], n.args[1]
        if dim % len(ctx.shape(x)) != len(ctx.shape(x)) - 1:
            ctx.unsupported(n, f"softmax over axis {dim} (the class softmax is over the last axis)")
        ctx.emit(n, "softmax", [x])

    @lowering(aten.native_layer_norm.default)
    def layer_norm(ctx, n):
        x, normalized, w, b, eps = n.args
        if len(normalized) != 1:
            ctx.unsupported(n, f"a layer norm over {len(normalized)} axes (the class layernorm is over the last)")
        operands = [x] + ([w] if w is not None else []) + ([b] if b is not None else [])
        if w is None and b is not None:
            ctx.unsupported(n, "a layer norm with a bias but no weight")
        ctx.emit(n, "layernorm", operands, eps=repr(float(eps)), value_of=n.meta["val"][0])

    import operator

    @lowering(aten.split_with_sizes.default, aten.split.Tensor)
    def split(ctx, n):
        pass  # no statement: each getitem of it is a slice

    @lowering(aten.topk.default)
    def topk(ctx, n):
        x, k = n.args[0], n.args[1]
        dim = n.args[2] if len(n.args) > 2 else n.kwargs.get("dim", -1)
        largest = n.args[3] if len(n.args) > 3 else n.kwargs.get("largest", True)
        if dim % len(ctx.shape(x)) != len(ctx.shape(x)) - 1 or not largest:
            ctx.unsupported(n, f"top-k over axis {dim}, largest={largest} (the classes take the largest of the last axis)")
        if k > ctx.shape(x)[-1]:
            ctx.unsupported(n, f"top-{k} of {ctx.shape(x)[-1]} (k larger than the axis)")
        # no statement: item 0 is topk_values, item 1 topk_indices (a statement writes one tensor)

    @lowering(aten.index.Tensor)
    def index(ctx, n):
        x, indices = n.args[0], n.args[1]
        if len(indices) != 1 or indices[0] is None:
            ctx.unsupported(n, "an index other than one tensor of ids on axis 0 (the class take_rows)")
        if ctx.dtype(indices[0]) not in ("i64", "i32"):
            ctx.unsupported(n, f"an index of dtype {ctx.dtype(indices[0])} (a mask; take_rows takes integer ids)")
        ctx.emit(n, "take_rows", [x, indices[0]])

    @lowering(operator.getitem)
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
        if source.target == aten.max.dim:  # item 0 the maximum, item 1 its index (an argmax)
            return _over_axes(ctx, n, source.args[0], [_arg(source, 1, "dim")], False, ("amax", "argmax")[index])
        if source.target == aten.native_layer_norm.default and index == 0:
            return ctx.alias(n, source)
        if source.target == aten.native_layer_norm.default:
            return  # mean and rstd: unused unless something reads them (then unsupported there)
        ctx.unsupported(n, f"item {index} of {source.target}")

    @lowering(aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.unsqueeze.default,
              aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default)
    def reshape(ctx, n):
        x = n.args[0]
        ctx.alias(n, x) if ctx.shape(x) == ctx.shape(n) else ctx.emit(n, "reshape", [x])

    @lowering(aten.permute.default)
    def permute(ctx, n):
        x, dims = n.args
        rank = len(ctx.shape(x))
        dims = [d % rank for d in dims]
        if dims == list(range(rank)):
            return ctx.alias(n, x)
        ctx.emit(n, "permute", [x], dims=",".join(map(str, dims)))

    @lowering(aten.expand.default)
    def expand(ctx, n):
        x = n.args[0]
        ctx.alias(n, x) if ctx.shape(x) == ctx.shape(n) else ctx.emit(n, "expand", [x])

    @lowering(aten.alias.default, aten.clone.default, aten.detach.default, aten.lift_fresh_copy.default)
    def same(ctx, n):
        ctx.alias(n, n.args[0])

    @lowering(aten._to_copy.default)
    def to_copy(ctx, n):
        x = n.args[0]
        if ctx.dtype(x) == ctx.dtype(n):
            return ctx.alias(n, x)
        ctx.emit(n, "cast", [x])

    @lowering(aten.slice.Tensor)
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

    CAT.add(aten.cat.default)

    @lowering(aten.cat.default)
    def cat(ctx, n):
        xs = [x for x in n.args[0] if ctx.shape(x) and 0 not in ctx.shape(x)]
        axis = (n.args[1] if len(n.args) > 1 else 0) % len(ctx.shape(n))
        if len(xs) == 1:
            return ctx.alias(n, xs[0])
        ctx.emit(n, "cat", xs, axis=axis)

    _more(aten)

    @lowering(aten.reciprocal.default)
    def reciprocal(ctx, n):
        """1 / x: a div of a constant one by x (torch's own division, correctly rounded)."""
        ctx.emit(n, "div", [ctx.filled((1,), ctx.dtype(n), 1.0), n.args[0]])


def _arg(n, i: int, key: str, default=None):
    """Argument `i` of a node, given by position or by name."""
    return n.args[i] if len(n.args) > i else n.kwargs.get(key, default)


def _over_axes(ctx, n, x, dims, keepdim: bool, reduce: str) -> None:
    """A reduction over `dims` of x as the row classes compute it: the reduced axes permuted
    last and merged into one, the row class, then the result's own shape. `reduce` is
    `amax` (the class), `argmax` (the top-1 index: the first of equal maxima, as torch),
    `mean`, or `sum` (a mean times the row's length)."""
    from math import prod

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


def _more(aten):
    """The ops of real models beyond the first table: comparisons, log1p, clamp, reductions
    over any axes, repeat, select, and writes into a slice (functionally: a new tensor)."""
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
            lo, hi = None, _arg(n, 1, "max")
        else:
            lo = _arg(n, 1, "min")
            hi = _arg(n, 2, "max") if n.target == aten.clamp.default else None
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
            lo, hi = None, _arg(n, 1, "max")
        elif n.target == aten.clamp.Tensor:
            lo, hi = _arg(n, 1, "min"), _arg(n, 2, "max")
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
        _over_axes(ctx, n, n.args[0], _arg(n, 1, "dim", []), _arg(n, 2, "keepdim", False), "amax")

    @lowering(aten.sum.dim_IntList)
    def sum_dims(ctx, n):
        """A sum over one axis of at most SUM_SLICES: slices and an n-ary sum (exact, any
        dtype); any other (several axes, a wide one): the mean over the axes moved last,
        times their size (`_over_axes`, floats)."""
        x, dims = n.args[0], _arg(n, 1, "dim", None)
        keepdim = _arg(n, 2, "keepdim", False)
        shape = ctx.shape(x)
        if not dims or len(dims) != 1 or n.kwargs.get("dtype") is not None or shape[dims[0] % len(shape)] > SUM_SLICES:
            return _over_axes(ctx, n, x, dims, keepdim, "sum")
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
        dim = _arg(n, 1, "dim")
        _over_axes(ctx, n, n.args[0], None if dim is None else [dim], _arg(n, 2, "keepdim", False), "argmax")

    @lowering(aten.linalg_vector_norm.default)
    def vector_norm(ctx, n):
        x, order = n.args[0], float(_arg(n, 1, "ord", 2))
        if order != 2:
            ctx.unsupported(n, f"a vector norm of order {order} (imported: the 2-norm)")
        squares = ctx.part(n, "squares", "pow", [x], ctx.shape(x), exponent="2.0")
        sums = _Sum(n)
        _over_axes(ctx, sums, squares, _arg(n, 2, "dim", None), _arg(n, 3, "keepdim", False), "sum")
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
    OPS.update(aten_indexed.table(aten))
    _complex(aten)

    @lowering(aten.cumsum.default)
    def cumsum(ctx, n):
        """A running sum along an axis as a matmul by an upper-triangular matrix of ones (a
        constant): out[.., j] = Σ_{i ≤ j} x[.., i]. Quadratic in the axis, which is a chunk of
        the sequence in the state-space layers that use it."""
        import torch

        x = n.args[0]
        shape = ctx.shape(x)
        axis = n.args[1] % len(shape)
        if ctx.dtype(n) not in ("f32", "f16", "bf16"):
            ctx.unsupported(n, f"a running sum of {ctx.dtype(n)} values (imported: floats, as a matmul)")
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
        """A tensor of one value that reads x only for its shape: a constant (empty ones hold zeros)."""
        value = {aten.full_like.default: lambda: _arg(n, 1, "fill_value"), aten.new_full.default:
                 lambda: _arg(n, 2, "fill_value"), aten.ones_like.default: lambda: 1.0,
                 aten.new_ones.default: lambda: 1.0}.get(n.target, lambda: 0.0)()
        if ctx.is_tensor(value):
            ctx.unsupported(n, "a fill value that is a tensor")
        ctx.alias(n, ctx.filled(ctx.shape(n), ctx.dtype(n), float(value)))

    @lowering(aten.constant_pad_nd.default)
    def pad(ctx, n):
        """Padding as a cat of constant blocks around x, axis by axis from the last (a negative
        padding crops: a slice)."""
        x, widths = n.args[0], list(n.args[1])
        value = float(_arg(n, 2, "value", 0.0))
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
        axis = _arg(n, 2, "dim", 0) % len(shape)
        start, end, step = _arg(n, 3, "start", None), _arg(n, 4, "end", None), _arg(n, 5, "step", 1)
        start = 0 if start is None else start
        end = shape[axis] if end is None else end
        region = range(*slice(start, end, step).indices(shape[axis]))
        if step != 1:
            ctx.unsupported(n, f"a write into every {step}th element of axis {axis} (imported: step 1)")
        if not (0 <= start <= shape[axis] and region.stop - region.start == ctx.shape(src)[axis]):
            ctx.unsupported(n, f"a write of {ctx.shape(src)[axis]} elements into {start}:{end} of axis {axis} "
                               f"(size {shape[axis]}): out of bounds")
        _write_region(ctx, n, base, src, axis, region.start, region.stop)


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


class _Sum:
    """The sum of squares inside a vector norm: a node of its own for the reduction's parts."""

    def __init__(self, n):
        self.name, self.meta, self.target = f"{n.name}__sum", n.meta, n.target


def _complex(aten):
    """Complex rotary (DeepSeek-V2's and Llama 4's `view_as_complex`) as real pairs: a complex
    value is its real and imaginary parts, each a real tensor; a complex constant (the
    rotary table, `polar`) folds into two real constants; a product is four real products.
    Any other op on a complex value is refused (the op table's `unsupported`)."""
    import torch

    def parts_of(ctx, x):
        """(real, imaginary) values of complex operand x: computed pairs, or a folded constant's."""
        if x in ctx.pairs:
            return ctx.pairs[x]
        if x in ctx.c.dynamic:
            ctx.unsupported(x, "a complex value computed by an op other than view_as_complex or a product")
        key = ctx.c.key(x)
        value = ctx.c.value(x)
        return tuple(ctx.constant(("complex", key, part), f"{x.name}_{part}",
                                  lambda part=part: getattr(torch, part)(value).contiguous(), "f32")
                     for part in ("real", "imag"))

    @lowering(aten.view_as_complex.default)
    def view_as_complex(ctx, n):
        x = n.args[0]
        shape = ctx.shape(x)
        if ctx.dtype(x) != "f32":
            ctx.unsupported(n, f"complex numbers from {ctx.dtype(x)} pairs (imported: float32, complex64)")
        pair = []
        for k, part in enumerate(("real", "imag")):
            v = ctx.part(n, part, "slice", [x], shape[:-1] + (1,), "f32", axis=len(shape) - 1, start=k, end=k + 1,
                         step=1)
            pair.append(ctx.part(n, part + "s", "reshape", [v], shape[:-1], "f32"))
        ctx.pairs[n] = tuple(pair)

    real_mul = OPS[aten.mul.Tensor]

    @lowering(aten.mul.Tensor)
    def mul(ctx, n):
        a, b = n.args[:2]
        if not any(ctx.is_tensor(x) and getattr(x.meta.get("val"), "is_complex", lambda: False)() for x in (a, b)):
            return real_mul(ctx, n)
        if not (ctx.is_tensor(a) and ctx.is_tensor(b)):
            ctx.unsupported(n, "a complex value times a number")
        (ar, ai), (br, bi) = parts_of(ctx, a), parts_of(ctx, b)
        shape = ctx.shape(n)
        rr, ii = ctx.part(n, "rr", "mul", [ar, br], shape, "f32"), ctx.part(n, "ii", "mul", [ai, bi], shape, "f32")
        ri, ir = ctx.part(n, "ri", "mul", [ar, bi], shape, "f32"), ctx.part(n, "ir", "mul", [ai, br], shape, "f32")
        ctx.pairs[n] = (ctx.part(n, "re", "sub", [rr, ii], shape, "f32"), ctx.part(n, "im", "add", [ri, ir], shape, "f32"))

    @lowering(aten.view_as_real.default)
    def view_as_real(ctx, n):
        re, im = parts_of(ctx, n.args[0])
        shape = ctx.shape(n)
        columns = [ctx.part(n, f"col{k}", "reshape", [v], shape[:-1] + (1,), "f32") for k, v in enumerate((re, im))]
        ctx.emit(n, "cat", columns, axis=len(shape) - 1)
