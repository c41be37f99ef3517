"""The op table's complex rotary (aten.py merges it into its own)."""

from __future__ import annotations

from .aten_table import OpTable


def register(table: OpTable, aten) -> None:
    """Complex rotary (DeepSeek-V2's and Llama 4's `view_as_complex`) as real pairs: a complex
    value is its real and imaginary parts, each a real tensor; a complex constant (the
    rotary table, `polar`) folds into two real constants; a product is four real products.
    Any other op on a complex value is refused (the op table's `unsupported`)."""
    lowering, OPS = table.lowering, table.ops
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
