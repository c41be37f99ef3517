"""The class registry's meaning (SPEC §4) in numpy: the living definition every kernel is checked against.

Every statement computes in float32 on float32 copies of its operands; its result is then
kept in its destination's dtype (`store`). A quantized operand is read in two passes:

>>> quantize_int8(np.array([0.5, -1.0, 0.25], np.float32))   # s = 1/127
array([ 0.503937, -1.      ,  0.251969], dtype=float32)
"""

from __future__ import annotations

import numpy as np

from ... import ops

F32 = np.float32


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
    bits: np.ndarray = np.ascontiguousarray(x, F32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    out = bits.astype(np.uint32).view(F32)
    return np.where(np.isfinite(x), out, x).astype(F32)


# The reference of each class is its entry's (tprules/ops): the table is the definition.
CLASSES = {op: c.reference for op, c in ops.CLASSES.items()}

# Layout classes move elements without computing: integers they move stay integers (an id
# above 2**24 is not rounded through float32), as the kernels keep them (codegen/lowering/layout.py).
MOVES = ops.LAYOUT - {ops.Ops.TRANSPOSE}  # a transpose is computed (a stage's flipped store)
INTEGERS = {"i8": np.int8, "i32": np.int32, "i64": np.int64}


class OutOfRange(ValueError):
    """An id outside the positions its class's operand indexes (bad input: an ids file, or
    ids computed to lie outside); `operand` is the ids' position among the operands."""

    def __init__(self, operand: int, message: str):
        super().__init__(message)
        self.operand = operand


def check_ids(cls: str, attrs: dict[str, str], operands: list[np.ndarray]) -> None:
    """OutOfRange naming the first id of a class's ids operand outside 0..bound − 1."""
    entry = ops.CLASSES[cls]
    bound = entry.bound(attrs, [np.shape(x) for x in operands]) if entry.bound is not None else None
    if bound is None:
        return
    for i in entry.ids:
        ids = np.asarray(operands[i])
        bad = (ids < 0) | (ids >= bound)
        if bad.any():
            at = tuple(int(a) for a in np.argwhere(bad)[0])
            raise OutOfRange(i, f"id {ids[at]} at {list(at)} lies outside 0..{bound - 1} (the {bound} positions "
                                "it indexes)")


def apply(cls: str, attrs: dict[str, str], operands: list[np.ndarray], quantized: dict[int, str], dtype: str,
          shape: tuple[int, ...] | None = None) -> np.ndarray:
    """One statement: operands (as stored) in, its destination's value (of `shape`) out;
    OutOfRange where an id lies outside what it indexes."""
    check_ids(cls, attrs, operands)
    if (cls in MOVES or ops.CLASSES[cls].ids) and not quantized:
        moved = _move(cls, attrs, operands, dtype, shape)
        if moved is not None:
            return moved
    xs = [np.asarray(x, F32) for x in operands]
    xs = [QUANTIZERS[quantized[i]](x) if i in quantized else x for i, x in enumerate(xs)]
    with np.errstate(all="ignore"):  # inf and nan are values here, as on the devices
        if cls in ops.SHAPED:
            return store(CLASSES[cls](attrs, shape, *xs), dtype)
        return store(CLASSES[cls](attrs, *xs), dtype)


def _move(cls, attrs, operands, dtype, shape):
    """A layout class over integers, exactly; a class's float32 values read at its integer
    ids (its entry's `ids` operands: an embedding, put_along). None where float32 values are
    moved as computed."""
    entry = ops.CLASSES[cls]
    xs = [np.asarray(x) for x in operands]
    integer = [x.dtype.kind in "iu" for x in xs]
    if dtype in INTEGERS and all(integer):
        value = entry.reference(attrs, shape, *xs) if cls in ops.SHAPED else entry.reference(attrs, *xs)
        return np.asarray(value).astype(INTEGERS[dtype])
    if entry.ids and all(integer[i] for i in entry.ids):
        xs = [x if i in entry.ids else np.asarray(x, F32) for i, x in enumerate(xs)]
        with np.errstate(all="ignore"):
            return store(entry.reference(attrs, *xs), dtype)
    return None
