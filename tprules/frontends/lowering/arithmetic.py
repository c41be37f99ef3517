"""The op table's arithmetic: the binary ops of two tensors or a tensor and a number, the
unary ops that are one elementwise class each, powers, clamps (to numbers, or to tensors as
minima), and `where`."""

from __future__ import annotations

import numpy as np

from .table import arg, aten, lowering

# ATen op → the elementwise class it is, one to one
UNARY = {"aten.neg.default": "neg", "aten.exp.default": "exp", "aten.rsqrt.default": "rsqrt",
         "aten.relu.default": "relu", "aten.sigmoid.default": "sigmoid", "aten.tanh.default": "tanh",
         "aten.silu.default": "silu", "aten.expm1.default": "expm1", "aten.log1p.default": "log1p",
         "aten.log.default": "log"}


@lowering(*UNARY)
def unary(ctx, n):
    ctx.emit(n, UNARY[str(n.target)], [n.args[0]])


def add_number(ctx, n, x, c):
    ctx.alias(n, x) if c == 0 else ctx.emit(n, "add_scalar", [x], value=repr(c))


def sub_number(ctx, n, x, c):
    add_number(ctx, n, x, -c)


def mul_number(ctx, n, x, c):
    ctx.alias(n, x) if c == 1 else ctx.emit(n, "scale", [x], factor=repr(c))


def div_number(ctx, n, x, c):
    mul_number(ctx, n, x, 1.0 / c)


# ATen op → (its class of two tensors, its lowering of a tensor and a number)
BINARY = {"aten.add.Tensor": ("add", add_number), "aten.sub.Tensor": ("sub", sub_number),
          "aten.mul.Tensor": ("mul", mul_number), "aten.div.Tensor": ("div", div_number)}


@lowering(*BINARY)
def binary(ctx, n):
    """a op b of two tensors: the class; of a tensor and a number, BINARY's lowering of it."""
    cls, scalar = BINARY[str(n.target)]
    a, b = n.args[:2]
    if n.kwargs.get("alpha", 1) != 1:
        ctx.unsupported(n, "an alpha other than 1")
    if ctx.is_tensor(a) and ctx.is_tensor(b):
        return ctx.emit(n, cls, [a, b])
    if not ctx.is_tensor(a):
        ctx.unsupported(n, "a number as the first operand")
    scalar(ctx, n, a, float(b))


@lowering("aten.mul.Scalar")
def mul_scalar(ctx, n):
    mul_number(ctx, n, n.args[0], float(n.args[1]))


@lowering("aten.add.Scalar")
def add_scalar(ctx, n):
    add_number(ctx, n, n.args[0], float(n.args[1]))


@lowering("aten.reciprocal.default")
def reciprocal(ctx, n):
    """1 / x: a div of a constant one by x (torch's own division, correctly rounded)."""
    ctx.emit(n, "div", [ctx.filled((1,), ctx.dtype(n), 1.0), n.args[0]])


@lowering("aten.pow.Tensor_Scalar")
def pow_(ctx, n):
    x, e = n.args
    ctx.alias(n, x) if e == 1 else ctx.emit(n, "pow", [x], exponent=repr(float(e)))


@lowering("aten.sqrt.default")
def sqrt(ctx, n):
    ctx.emit(n, "pow", [n.args[0]], exponent="0.5")


@lowering("aten.abs.default")
def abs_(ctx, n):
    """|x| as x where x > 0, else −x (NaN stays NaN, −0 becomes 0)."""
    x = n.args[0]
    shape = ctx.shape(x)
    positive = ctx.part(n, "positive", "greater", [x], shape, "i8", value="0.0")
    ctx.emit(n, "where", [positive, x, ctx.part(n, "neg", "neg", [x], shape)])


@lowering("aten.gelu.default")
def gelu(ctx, n):
    approximate = n.kwargs.get("approximate", n.args[1] if len(n.args) > 1 else "none")
    ctx.emit(n, "gelu" if approximate == "tanh" else "gelu_erf", [n.args[0]])


@lowering("aten.minimum.default")
def minimum(ctx, n):
    ctx.emit(n, "minimum", list(n.args[:2]))


@lowering("aten.where.self")
def where(ctx, n):
    ctx.emit(n, "where", list(n.args[:3]))


@lowering("aten.clamp.default", "aten.clamp_min.default", "aten.clamp_max.default")
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


@lowering("aten.clamp.Tensor", "aten.clamp_min.Tensor", "aten.clamp_max.Tensor", "aten.maximum.default")
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
