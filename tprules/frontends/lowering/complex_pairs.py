"""The op table's complex rotary (DeepSeek-V2's and Llama 4's `view_as_complex`) as real
pairs: a complex value is its real and imaginary parts, each a real tensor; a complex
constant (the rotary table, `polar`) folds into two real constants; a product is four real
products. Any other op on a complex value is refused (the op table's `unsupported`).

This module overrides the real lowerings of `mul` and of the layout ops a complex value
passes through (arithmetic.py's, layout.py's): each does the real op's work on a real
operand, the same op on each part of a complex one."""

from __future__ import annotations

from ...ops import Ops
from . import arithmetic, layout
from .table import lowering


def parts_of(ctx, x):
    """(real, imaginary) values of complex operand x: computed pairs, or a folded constant's."""
    import torch

    if x in ctx.pairs:
        return ctx.pairs[x]
    if x in ctx.c.dynamic:
        ctx.unsupported(x, "a complex value computed by an op other than view_as_complex or a product")
    key = ctx.c.key(x)
    value = ctx.c.value(x)
    return tuple(ctx.constant(("complex", key, part), f"{x.name}_{part}",
                              lambda part=part: getattr(torch, part)(value).contiguous(), "f32")
                 for part in ("real", "imag"))


@lowering("aten.view_as_complex.default")
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


@lowering("aten.view_as_real.default")
def view_as_real(ctx, n):
    re, im = parts_of(ctx, n.args[0])
    shape = ctx.shape(n)
    columns = [ctx.part(n, f"col{k}", "reshape", [v], shape[:-1] + (1,), "f32") for k, v in enumerate((re, im))]
    ctx.emit(n, "cat", columns, axis=len(shape) - 1)


@lowering("aten.mul.Tensor", override=True)
def mul(ctx, n):
    """A product with a complex operand: four real products (by a number: each part scaled);
    of real operands, arithmetic.py's."""
    a, b = n.args[:2]
    if not any(ctx.is_tensor(x) and getattr(x.meta.get("val"), "is_complex", lambda: False)() for x in (a, b)):
        return arithmetic.binary(ctx, n)
    if not ctx.is_tensor(a):
        ctx.unsupported(n, "a number times a complex value")
    if not ctx.is_tensor(b):  # a complex value times a real number (a rotary's attention scaling): each part
        shape = ctx.shape(n)
        ctx.pairs[n] = tuple(v if float(b) == 1.0 else ctx.part(n, tag, Ops.SCALE, [v], shape, "f32",
                                                                factor=repr(float(b)))
                             for tag, v in zip(("re", "im"), parts_of(ctx, a)))
        return
    (ar, ai), (br, bi) = parts_of(ctx, a), parts_of(ctx, b)
    shape = ctx.shape(n)
    rr, ii = ctx.part(n, "rr", "mul", [ar, br], shape, "f32"), ctx.part(n, "ii", "mul", [ai, bi], shape, "f32")
    ri, ir = ctx.part(n, "ri", "mul", [ar, bi], shape, "f32"), ctx.part(n, "ir", "mul", [ai, br], shape, "f32")
    ctx.pairs[n] = (ctx.part(n, "re", "sub", [rr, ii], shape, "f32"), ctx.part(n, "im", "add", [ri, ir], shape, "f32"))


# A layout op on a complex value is the same op on each part (a rotary table's unsqueeze and
# expand in a decode step, where it is no longer a constant).

def _each_part(ctx, n, cls: str | None, **attrs) -> None:
    """n's pair: `cls` of each part of its operand's pair (None: the parts as they are)."""
    shape = ctx.shape(n)
    ctx.pairs[n] = tuple(v if cls is None else ctx.part(n, tag, cls, [v], shape, "f32", **attrs)
                         for tag, v in zip(("re", "im"), ctx.pairs[n.args[0]]))


@lowering("aten.view.default", "aten._unsafe_view.default", "aten.reshape.default", "aten.unsqueeze.default",
          "aten.squeeze.dim", "aten.squeeze.dims", "aten.squeeze.default", override=True)
def reshape(ctx, n):
    if n.args[0] not in ctx.pairs:
        return layout.reshape(ctx, n)
    _each_part(ctx, n, None if ctx.shape(n) == ctx.shape(n.args[0]) else Ops.RESHAPE)


@lowering("aten.expand.default", override=True)
def expand(ctx, n):
    if n.args[0] not in ctx.pairs:
        return layout.expand(ctx, n)
    _each_part(ctx, n, None if ctx.shape(n) == ctx.shape(n.args[0]) else Ops.EXPAND)


@lowering("aten.permute.default", override=True)
def permute(ctx, n):
    if n.args[0] not in ctx.pairs:
        return layout.permute(ctx, n)
    rank = len(ctx.shape(n))
    dims = [d % rank for d in n.args[1]]
    if dims == list(range(rank)):
        return _each_part(ctx, n, None)
    _each_part(ctx, n, Ops.PERMUTE, dims=",".join(map(str, dims)))


@lowering("aten.alias.default", "aten.clone.default", override=True)
def same(ctx, n):
    if n.args[0] not in ctx.pairs:
        return layout.same(ctx, n)
    _each_part(ctx, n, None)
