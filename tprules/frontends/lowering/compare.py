"""The op table's comparisons and logical ops, as the classes greater and greater_equal
(x < c as −x > −c, a ≤ b as b − a ≥ 0, x == c as both bounds), and booleans (i8 0 or 1)
combined by mul and where."""

from __future__ import annotations

from .table import aten, lowering


@lowering("aten.gt.Scalar")
def greater(ctx, n):
    ctx.emit(n, "greater", [n.args[0]], value=repr(float(n.args[1])))


@lowering("aten.ge.Scalar")
def greater_equal(ctx, n):
    ctx.emit(n, "greater_equal", [n.args[0]], value=repr(float(n.args[1])))


@lowering("aten.lt.Scalar", "aten.le.Scalar")
def less(ctx, n):
    """x < c as −x > −c (x ≤ c as −x ≥ −c): exact in floats."""
    minus = ctx.part(n, "neg", "neg", [n.args[0]], ctx.shape(n.args[0]))
    cls = "greater" if n.target == aten.lt.Scalar else "greater_equal"
    ctx.emit(n, cls, [minus], value=repr(-float(n.args[1])))


@lowering("aten.le.Tensor", "aten.lt.Tensor", "aten.ge.Tensor", "aten.gt.Tensor")
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


@lowering("aten.eq.Scalar", "aten.ne.Scalar")
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


def boolean(ctx, n, x) -> None:
    """Refused unless x and n are booleans (i8)."""
    if ctx.dtype(x) != "i8" or ctx.dtype(n) != "i8":
        ctx.unsupported(n, f"a logical op on {ctx.dtype(x)} values (imported: booleans)")


@lowering("aten.logical_and.default", "aten.bitwise_and.Tensor")
def logical_and(ctx, n):
    for x in n.args[:2]:
        boolean(ctx, n, x)
    ctx.emit(n, "mul", list(n.args[:2]))


@lowering("aten.logical_or.default", "aten.bitwise_or.Tensor")
def logical_or(ctx, n):
    a, b = n.args[:2]
    for x in (a, b):
        boolean(ctx, n, x)
    ctx.emit(n, "where", [a, a, b])  # a where a holds, else b


@lowering("aten.logical_not.default", "aten.bitwise_not.default")
def logical_not(ctx, n):
    x = n.args[0]
    boolean(ctx, n, x)
    ctx.emit(n, "greater_equal", [ctx.part(n, "neg", "neg", [x], ctx.shape(x))], value="0.0")  # −x ≥ 0: x is 0
