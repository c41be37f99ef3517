"""Window classes: each element of the result is computed from a short window of an operand
(codegen/lowering/window.py computes it where it is read, one tap at a time).

`conv1d` is the depthwise or grouped 1-D convolution of Mamba, Mamba-2, short-convolution
and linear-attention layers: a weighted sum over a window of the last axis, stride 1,
dilation 1, `padding` zeros on both sides of the sequence (the causal layers pad by K − 1
and keep the first T outputs, a slice after it).

`put_along` is torch's scatter (`zeros_like(s).scatter_(1, idx, 1)`: DeepSeek's group-limited
routing, an indexer's mask; Llama 4's router scores put into −inf): an element of the result
is the value, or the source at the entry, where some entry of the index's window along the
axis names it, else x's. Where an index repeats, the last entry along the axis wins (torch
leaves that order open; a value is the same whichever wins).

>>> import numpy as np
>>> from tprules.ops import CLASSES
>>> x = np.arange(6, dtype=np.float32).reshape(1, 2, 3)       # B=1, C=2, T=3
>>> w = np.ones((2, 1, 2), np.float32)                       # depthwise, K=2
>>> CLASSES["conv1d"].reference({"padding": "1", "groups": "2"}, x, w)[0]
array([[0., 1., 3., 2.],
       [3., 7., 9., 5.]], dtype=float32)
"""

from __future__ import annotations

import numpy as np

from .base import OpClass, Ops, fmt_shape
from .layout import along, along_bound, region

F32 = np.float32


def _conv1d_shape(attrs, shapes, out):
    if len(shapes) not in (2, 3):
        raise ValueError("conv1d reads x[B, C, T], w[O, C/groups, K] and an optional bias[O]")
    x, w = shapes[:2]
    pad, groups = int(attrs["padding"]), int(attrs["groups"])
    if len(x) != 3 or len(w) != 3:
        raise ValueError(f"conv1d reads x[B, C, T] and w[O, C/groups, K]; got {fmt_shape(x)} and {fmt_shape(w)}")
    if groups < 1 or x[1] % groups or w[0] % groups or w[1] * groups != x[1]:
        raise ValueError(f"conv1d of {fmt_shape(x)} by {fmt_shape(w)} in {groups} groups: the channels do not divide")
    if pad < 0 or x[2] + 2 * pad < w[2]:
        raise ValueError(f"conv1d with padding {pad} of a sequence of {x[2]} by a kernel of {w[2]}")
    if len(shapes) == 3 and shapes[2] != (w[0],):
        raise ValueError(f"conv1d bias has shape {fmt_shape(shapes[2])}; expected {fmt_shape((w[0],))}")
    return (x[0], w[0], x[2] + 2 * pad - w[2] + 1)


def _conv1d(attrs, x, w, bias=None):
    pad, groups = int(attrs["padding"]), int(attrs["groups"])
    b, c, t = x.shape
    o, cg, k = w.shape
    xp = np.zeros((b, c, t + 2 * pad), F32)
    xp[:, :, pad:pad + t] = x
    n = t + 2 * pad - k + 1
    out = np.zeros((b, o, n), F32)
    per = o // groups
    for oc in range(o):
        g = oc // per
        for i in range(cg):  # taps in the order the kernels add them: channel, then offset
            for j in range(k):
                out[:, oc, :] += w[oc, i, j] * xp[:, g * cg + i, j:j + n]
    return out + bias[None, :, None] if bias is not None else out


def _put_along_shape(attrs, shapes, out):
    if len(shapes) not in (2, 3) or (len(shapes) == 3) == ("value" in attrs):
        raise ValueError("put_along reads x, an index and either a source (operand 2) or attr value, not both")
    along(attrs, shapes[:2], Ops.PUT_ALONG)
    if len(shapes) == 3:
        index, source = shapes[1:]
        if len(source) != len(index) or any(s < i for s, i in zip(source, index)):
            raise ValueError(f"the source {fmt_shape(source)} does not cover the index {fmt_shape(index)}")
    return tuple(shapes[0])


def _put_along(attrs, x, index, source=None):
    """Position by position along the axis, so that where an index repeats the last one wins."""
    index = np.asarray(index).astype(np.int64)
    axis = int(attrs["axis"]) % x.ndim
    out = np.array(x, copy=True)
    part = out[region(index.shape, axis)]  # a view of out
    values = source[region(index.shape, -1)] if source is not None else None
    for j in range(index.shape[axis]):
        at = tuple(slice(j, j + 1) if d == axis else slice(None) for d in range(x.ndim))
        put = values[at] if values is not None else F32(attrs["value"])
        np.put_along_axis(part, index[at], put, axis)
    return out


CLASSES = (
    OpClass(Ops.CONV1D, "window", 0, "0: x[B, C, T], 1: w[O, C/g, K], 2: bias[O] (optional)",
            "out[b, o, t] = bias[o] + Σ_i Σ_k w[o, i, k] · x[b, g·C/g + i, t + k − p], g = o // (O/g), zero outside "
            "x; attrs `padding` p, `groups` g; stride and dilation 1 (a depthwise conv: g = C)",
            _conv1d, _conv1d_shape, int_attrs=("padding", "groups")),
    OpClass(Ops.PUT_ALONG, "window", 0, "0: x[..], 1: index[..] (integers, x's rank), 2: source[..] (optional)",
            "x with source[i], or without a source float(attr `value`), put at index[i] along attr `axis`, for every "
            "position i of the index (torch's scatter); where an index repeats, the last position along the axis "
            "wins: x's shape", _put_along, _put_along_shape, int_attrs=("axis",), number_attrs=("value",),
            optional_attrs=("value",), ids=(1,), bound=along_bound),
)
