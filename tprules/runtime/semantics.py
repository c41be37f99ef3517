"""The class registry's meaning (SPEC §4) in numpy: the living definition every kernel is checked against.

Every statement computes in float32 on float32 copies of its operands; its result is then
kept in its destination's dtype (`store`). A quantized operand is read in two passes:

>>> quantize_int8(np.array([0.5, -1.0, 0.25], np.float32))   # s = 1/127
array([ 0.503937, -1.      ,  0.251969], dtype=float32)
"""

from __future__ import annotations

import math

import numpy as np

F32 = np.float32
GELU_C = F32(np.sqrt(2.0 / np.pi))
GELU_K = F32(0.044715)


def quantize_int8(t: np.ndarray) -> np.ndarray:
    """int8 with one scale for the whole tensor, in two passes: s = max|t| / 127, then
    q = clip(round(t / s), -127, 127) with round half to even; the reader computes with q * s."""
    s = F32(np.max(np.abs(t)) / F32(127)) if t.size else F32(0)
    if s == 0:
        return np.zeros_like(t)
    q = np.clip(np.round(t / s), F32(-127), F32(127))
    return (q * s).astype(F32)


QUANTIZERS = {"int8_two_pass": quantize_int8}


def store(x: np.ndarray, dtype: str) -> np.ndarray:
    """A float32 result as its destination keeps it: f16/bf16 rounded (kept as float32), ints truncated."""
    x = np.asarray(x, F32)
    if dtype == "f16":
        return x.astype(np.float16).astype(F32)
    if dtype == "bf16":
        return round_bf16(x)
    if dtype == "i8":
        return x.astype(np.int8)
    if dtype == "i32":
        return x.astype(np.int32)
    if dtype == "i64":
        return x.astype(np.int64)
    return x


def round_bf16(x: np.ndarray) -> np.ndarray:
    """Round float32 to bfloat16 precision (nearest, ties to even), kept as float32."""
    bits = np.ascontiguousarray(x, F32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    out = bits.astype(np.uint32).view(F32)
    return np.where(np.isfinite(x), out, x).astype(F32)


def _matmul(attrs, a, b):
    return a @ (b.T if attrs.get("transpose_b") == "1" else b)


def _sum(attrs, *xs):
    total = xs[0]
    for x in xs[1:]:
        total = total + x  # left to right, as the kernels add
    return total


def _rmsnorm(attrs, x, w):
    eps = F32(float(attrs.get("eps", "1e-6")))
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def _softmax(attrs, x):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def _gelu(attrs, x):
    return F32(0.5) * x * (F32(1) + np.tanh(GELU_C * (x + GELU_K * x * x * x)))


def _pow(attrs, x):
    return np.power(x, F32(float(attrs["exponent"])))


def _gelu_erf(attrs, x):
    erf = np.frompyfunc(math.erf, 1, 1)
    return (F32(0.5) * x * (F32(1) + erf(x / F32(math.sqrt(2.0))).astype(F32))).astype(F32)


def _mean(attrs, x):
    return np.mean(x, axis=-1, keepdims=True, dtype=F32)


def _layernorm(attrs, x, w=None, b=None):
    eps = F32(float(attrs.get("eps", "1e-5")))
    m = np.mean(x, axis=-1, keepdims=True, dtype=F32)
    var = np.mean((x - m) * (x - m), axis=-1, keepdims=True, dtype=F32)
    out = (x - m) / np.sqrt(var + eps)
    if w is not None:
        out = out * w
    return out + b if b is not None else out


def _bmm(attrs, a, b):
    return np.matmul(a, b)


def _embedding(attrs, table, ids):
    ids = np.asarray(ids).astype(np.int64)
    if "offset" not in attrs:
        return table[ids]
    # a vocabulary-parallel slice of the table: rows offset.. of the whole; other ids give zeros
    row = ids - int(attrs["offset"])
    inside = (row >= 0) & (row < len(table))
    return np.where(inside[..., None], table[np.clip(row, 0, len(table) - 1)], F32(0))


def _take_rows(attrs, table, ids):
    return table[np.asarray(ids).astype(np.int64)]


def _topk_order(attrs, x):
    """The positions of the k largest along the last axis, largest first, ties lower index first."""
    return np.argsort(-x, axis=-1, kind="stable")[..., :int(attrs["k"])]


def _permute(attrs, x):
    return np.transpose(x, [int(d) for d in attrs["dims"].split(",")])


def _slice(attrs, x):
    axis = int(attrs["axis"])
    index = [slice(None)] * x.ndim
    index[axis] = slice(int(attrs["start"]), int(attrs["end"]), int(attrs.get("step", "1")))
    return x[tuple(index)]


def _cat(attrs, *xs):
    return np.concatenate(xs, axis=int(attrs["axis"]))


CLASSES = {
    "matmul": _matmul,
    "add": lambda attrs, a, b: a + b,
    "sub": lambda attrs, a, b: a - b,
    "mul": lambda attrs, a, b: a * b,
    "div": lambda attrs, a, b: a / b,
    "sum": _sum,
    "neg": lambda attrs, x: -x,
    "exp": lambda attrs, x: np.exp(x),
    "relu": lambda attrs, x: np.maximum(x, F32(0)),
    "silu": lambda attrs, x: x / (F32(1) + np.exp(-x)),
    "rsqrt": lambda attrs, x: F32(1) / np.sqrt(x),
    "gelu": _gelu,
    "scale": lambda attrs, x: x * F32(float(attrs["factor"])),
    "cast": lambda attrs, x: x,  # the conversion is `store` to the destination's dtype
    "rmsnorm": _rmsnorm,
    "softmax": _softmax,
    "transpose": lambda attrs, x: x.T,
    # the classes real models need (docs/classes.md)
    "bmm": _bmm,
    "pow": _pow,
    "add_scalar": lambda attrs, x: x + F32(float(attrs["value"])),
    "sigmoid": lambda attrs, x: F32(1) / (F32(1) + np.exp(-x)),
    "tanh": lambda attrs, x: np.tanh(x),
    "gelu_erf": _gelu_erf,
    "mean": _mean,
    "layernorm": _layernorm,
    "embedding": _embedding,
    "take_rows": _take_rows,
    "topk_values": lambda attrs, x: np.take_along_axis(x, _topk_order(attrs, x), axis=-1),
    "topk_indices": lambda attrs, x: _topk_order(attrs, x).astype(F32),
    "expm1": lambda attrs, x: np.expm1(x),
    "minimum": lambda attrs, a, b: np.minimum(a, b),
    "greater": lambda attrs, x: (x > F32(float(attrs["value"]))).astype(F32),
    "where": lambda attrs, c, a, b: np.where(c != 0, a, b),
    "permute": _permute,
    "slice": _slice,
    "cat": _cat,
}

# Classes whose result takes its shape from the destination (as `cast` takes its dtype).
SHAPED = {
    "reshape": lambda attrs, shape, x: x.reshape(shape),
    "expand": lambda attrs, shape, x: np.broadcast_to(x, shape),
}


def apply(cls: str, attrs: dict[str, str], operands: list[np.ndarray], quantized: dict[int, str], dtype: str,
          shape: tuple[int, ...] | None = None) -> np.ndarray:
    """One statement: operands (as stored) in, its destination's value (of `shape`) out."""
    xs = [np.asarray(x, F32) for x in operands]
    xs = [QUANTIZERS[quantized[i]](x) if i in quantized else x for i, x in enumerate(xs)]
    with np.errstate(all="ignore"):  # inf and nan are values here, as on the devices
        if cls in SHAPED:
            return store(SHAPED[cls](attrs, shape, *xs), dtype)
        return store(CLASSES[cls](attrs, *xs), dtype)
