"""The op table: each core ATen op, one small function that writes its node as a statement
of a registry class (docs/classes.md), or says the node is another value (a view to its own
shape, a clone). An op not in the table is one error naming the architecture, the op, the
module path, and what is missing.

    @lowering(aten.mm.default)
    def mm(ctx, n):
        a, b = n.args
        ...

(`lowering` is the table's own decorator: `build_table` makes a new `OpTable` and fills it.)

lower.py walks the traced graph in order and calls the table for every node that depends
on `input_ids` (the table's functions call back its `emit`, `alias`, `value`, ...). The
ops of real models beyond the first table are aten_more.py's, the indexed ops (gather,
scatter) aten_indexed.py's, the grouped experts' (sort, offsets, grouped matmul)
aten_grouped.py's and complex rotary aten_complex.py's, all merged into this one.
"""

from __future__ import annotations

from functools import cache

from . import aten_complex, aten_grouped, aten_indexed, aten_more, aten_positions
from .table import Lowerings, OpTable, arg, over_axes


@cache
def op_table() -> Lowerings:
    """The op table every import reads: built on first use, read-only."""
    return build_table().frozen()


def build_table() -> OpTable:
    """A new op table, filled: this module's lowerings, then aten_more's, aten_indexed's
    and aten_complex's (which wraps the real mul)."""
    import torch

    aten = torch.ops.aten
    table = OpTable()
    _fill(table, aten)
    return table


def _fill(table: OpTable, aten) -> None:
    lowering, OPS, SKIP, CAT = table.lowering, table.ops, table.skip, table.cat
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
            return over_axes(ctx, n, x, dims, keepdim, "mean")  # over other axes: moved last
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
        if aten_grouped.repeated_rows(ctx, n, x, indices[0]):  # x[ids // k]: the grouped experts' tokens
            return
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
        if source.target in (aten.sort.default, aten.sort.stable):
            return aten_grouped.sorted_item(ctx, n, source, index)
        if source.target == aten.max.dim:  # item 0 the maximum, item 1 its index (an argmax)
            return over_axes(ctx, n, source.args[0], [arg(source, 1, "dim")], False, ("amax", "argmax")[index])
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

    aten_more.register(table, aten)
    aten_grouped.register(table, aten)
    OPS.update(aten_indexed.table(aten))
    OPS.update(aten_positions.table(aten))
    aten_complex.register(table, aten)  # (wraps the real mul above)

    @lowering(aten.reciprocal.default)
    def reciprocal(ctx, n):
        """1 / x: a div of a constant one by x (torch's own division, correctly rounded)."""
        ctx.emit(n, "div", [ctx.filled((1,), ctx.dtype(n), 1.0), n.args[0]])
