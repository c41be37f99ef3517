"""Row classes: a reduction over the last axis, then one pass that stores. `reduction` names
the statistics codegen's row passes compute (codegen/cpu/function.py, codegen/cuda/kernel.py,
emit.RowValues); `passes` the reduction passes over the row that the cost model counts."""

from __future__ import annotations

import numpy as np

from .base import OpClass, Ops, fmt_shape

F32 = np.float32


def _last_axis(attrs, shapes, out, name):
    x = shapes[0]
    if not x:
        raise ValueError(f"{name} needs at least one axis")
    return x


def _rmsnorm_shape(attrs, shapes, out):
    x = _last_axis(attrs, shapes, out, Ops.RMSNORM)
    if len(shapes) > 1 and shapes[1] != x[-1:]:
        raise ValueError(f"rmsnorm weight has shape {fmt_shape(shapes[1])}; expected {fmt_shape(x[-1:])}")
    return x


def _mean_shape(attrs, shapes, out):
    (x,) = shapes
    if not x:
        raise ValueError("mean needs at least one axis")
    return x[:-1] + (1,)


def _amax_shape(attrs, shapes, out):
    (x,) = shapes
    if not x:
        raise ValueError("amax needs at least one axis")
    return x[:-1] + (1,)


def _layernorm_shape(attrs, shapes, out):
    x = shapes[0]
    if not x or len(shapes) > 3:
        raise ValueError("layernorm reads x[.., H] and at most a weight and a bias")
    for extra in shapes[1:]:
        if extra != x[-1:]:
            raise ValueError(f"layernorm weight and bias have shape {fmt_shape(x[-1:])}; got {fmt_shape(extra)}")
    return x


def _rmsnorm(attrs, x, w):
    eps = F32(float(attrs.get("eps", "1e-6")))
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def _softmax(attrs, x):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def _mean(attrs, x):
    return np.mean(x, axis=-1, keepdims=True, dtype=F32)


def _amax(attrs, x):
    return np.max(x, axis=-1, keepdims=True)


def _layernorm(attrs, x, w=None, b=None):
    eps = F32(float(attrs.get("eps", "1e-5")))
    m = np.mean(x, axis=-1, keepdims=True, dtype=F32)
    var = np.mean((x - m) * (x - m), axis=-1, keepdims=True, dtype=F32)
    out = (x - m) / np.sqrt(var + eps)
    if w is not None:
        out = out * w
    return out + b if b is not None else out


def _topk_shape(attrs, shapes, out):
    (x,) = shapes
    k = int(attrs["k"])
    if not x or not 1 <= k <= x[-1]:
        raise ValueError(f"top-{k} of a last axis of {x[-1] if x else 0}")
    return x[:-1] + (k,)


def _topk_order(attrs, x):
    """Positions of the k largest along the last axis, largest first; ties: the lower index first."""
    return np.argsort(-x, axis=-1, kind="stable")[..., :int(attrs["k"])]


def _sort_rank(attrs, x):
    """Where each element goes when its row is sorted ascending, stably (NaN last): the
    inverse of the stable argsort."""
    order = np.argsort(x, axis=-1, kind="stable")
    rank = np.empty(order.shape, np.int64)
    np.put_along_axis(rank, order, np.broadcast_to(np.arange(x.shape[-1]), order.shape), axis=-1)
    return rank.astype(F32)


CLASSES = (
    OpClass(Ops.RMSNORM, "row", 2, "0: x[..,H], 1: w[H]",
            "x / sqrt(mean(x², last axis) + eps) * w, attr `eps` (default 1e-6)", _rmsnorm, _rmsnorm_shape,
            reduction="rms", passes=1, eps="1e-6", late_numbers=(("eps", "1e-6"),), spec=True),
    OpClass(Ops.SOFTMAX, "row", 1, "0", "softmax over the last axis", _softmax,
            lambda attrs, shapes, out: _last_axis(attrs, shapes, out, Ops.SOFTMAX),
            reduction="max_exp", passes=2, spec=True),
    OpClass(Ops.MEAN, "row", 1, "0: x[.., H]", "the mean over the last axis, kept as an axis of size 1: [.., 1]",
            _mean, _mean_shape, reduction="average", passes=1),
    OpClass(Ops.LAYERNORM, "row", 0, "0: x[.., H], 1: w[H] (optional), 2: b[H] (optional)",
            "(x − m) / sqrt(v + eps) · w + b, m and v the mean and (biased) variance over the last axis; "
            "attr `eps` (default 1e-5)", _layernorm, _layernorm_shape, reduction="moments", passes=2, eps="1e-5",
            number_attrs=("eps",), optional_attrs=("eps",)),
    OpClass(Ops.TOPK_VALUES, "row", 1, "0: x[.., H]",
            "the k largest of the last axis, largest first (ties: the lower index first): [.., k]; attr `k`",
            lambda attrs, x: np.take_along_axis(x, _topk_order(attrs, x), axis=-1), _topk_shape,
            reduction="select", int_attrs=("k",)),
    OpClass(Ops.TOPK_INDICES, "row", 1, "0: x[.., H]",
            "the positions of `topk_values`' elements in the last axis: [.., k] (integers); attr `k`",
            lambda attrs, x: _topk_order(attrs, x).astype(F32), _topk_shape, reduction="select", int_attrs=("k",)),
    OpClass(Ops.AMAX, "row", 1, "0: x[.., H]", "the maximum over the last axis, kept as an axis of size 1: [.., 1]; "
            "NaN where the row holds one", _amax,
            _amax_shape, reduction="max", passes=1),
    OpClass(Ops.SORT_RANK, "row", 1, "0: x[.., H]",
            "the place each element takes in its row sorted ascending, equal elements in their order and NaN "
            "last (the inverse of torch.sort(stable=True)'s indices): [.., H] (integers)", _sort_rank,
            lambda attrs, shapes, out: _last_axis(attrs, shapes, out, Ops.SORT_RANK), reduction="count"),
)
