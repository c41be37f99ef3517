"""The op table's products: an embedding, a matmul (x @ W.T read from the checkpoint's W,
not a transposed copy), a batched matmul, and a convolution where it is the class conv1d.
The grouped experts' grouped matmul is grouped.py's."""

from __future__ import annotations

from .table import lowering


@lowering("aten.embedding.default")
def embedding(ctx, n):
    ctx.emit(n, "embedding", [n.args[0], n.args[1]])


@lowering("aten.mm.default")
def mm(ctx, n):
    a, b = n.args
    weight = ctx.transposed(b)
    if weight is not None:  # x @ W.T, W as the checkpoint holds it
        ctx.emit(n, "matmul", [a, weight], transpose_b=1)
    else:
        ctx.emit(n, "matmul", [a, b])


@lowering("aten.bmm.default")
def bmm(ctx, n):
    ctx.emit(n, "bmm", list(n.args[:2]))


@lowering("aten.convolution.default")
def convolution(ctx, n) -> None:
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
