"""Matmul classes: an output element reads a row of one operand and a column of the other."""

from __future__ import annotations

import numpy as np

from .base import OpClass, Ops, fmt_shape


def _matmul_shape(attrs, shapes, out):
    a, b = shapes
    if len(a) != 2 or len(b) != 2:
        raise ValueError(f"matmul operands are 2-D; got {fmt_shape(a)} and {fmt_shape(b)}")
    k, n = (b[1], b[0]) if attrs.get("transpose_b") == "1" else b
    if a[1] != k:
        raise ValueError(f"matmul of {fmt_shape(a)} by {fmt_shape(b)}: inner sizes {a[1]} and {k} differ")
    return (a[0], n)


def _bmm_shape(attrs, shapes, out):
    a, b = shapes
    if len(a) != 3 or len(b) != 3:
        raise ValueError(f"bmm operands are 3-D; got {fmt_shape(a)} and {fmt_shape(b)}")
    if a[0] != b[0] or a[2] != b[1]:
        raise ValueError(f"bmm of {fmt_shape(a)} by {fmt_shape(b)}: batch or inner sizes differ")
    return (a[0], a[1], b[2])


def _grouped_shape(attrs, shapes, out):
    a, b, offsets = shapes
    if len(a) != 2 or len(b) != 3 or len(offsets) != 1:
        raise ValueError(f"grouped_matmul operands are A[M,K], B[E,K,N] and offsets[E]; got {fmt_shape(a)}, "
                         f"{fmt_shape(b)} and {fmt_shape(offsets)}")
    if a[1] != b[1] or offsets[0] != b[0]:
        raise ValueError(f"grouped_matmul of {fmt_shape(a)} by {fmt_shape(b)} with offsets {fmt_shape(offsets)}: "
                         "inner sizes or expert counts differ")
    return (a[0], b[2])


def group_bounds(offsets) -> list[tuple[int, int]]:
    """Each expert's rows [start, end): its offset is where its rows end (torch's cumulative
    counts); an offset below an earlier one ends an empty group (the running maximum)."""
    bounds, start = [], 0
    for end in np.asarray(offsets).astype(np.int64).tolist():
        end = max(start, end)
        bounds.append((start, end))
        start = end
    return bounds


def _grouped(attrs, a, b, offsets):
    """Rows start..end of A times expert e's matrix, for each expert's rows; rows past the
    last offset are zero (torch leaves them unwritten)."""
    out = np.zeros((a.shape[0], b.shape[2]), np.float32)
    for e, (start, end) in enumerate(group_bounds(offsets)):
        end = min(end, a.shape[0])
        if start < end:
            out[start:end] = a[start:end] @ b[e]
    return out


def _matmul(attrs, a, b):
    return a @ (b.T if attrs.get("transpose_b") == "1" else b)


CLASSES = (
    OpClass(Ops.MATMUL, "matmul", 2, "0: A[M,K], 1: B[K,N]", "A @ B; attr `transpose_b 1` means B is [N,K]",
            _matmul, _matmul_shape, spec=True),
    OpClass(Ops.BMM, "matmul", 2, "0: A[B,M,K], 1: B[B,K,N]", "A[b] @ B[b] for every b (attention over heads)",
            lambda attrs, a, b: np.matmul(a, b), _bmm_shape),
    OpClass(Ops.GROUPED_MATMUL, "matmul", 3, "0: A[M,K], 1: B[E,K,N], 2: offsets[E] (integers)",
            "rows offsets[e − 1] .. offsets[e] of A (from 0 for e = 0) @ B[e], for every expert e "
            "(torch._grouped_mm: A's rows sorted by expert, offsets their cumulative counts); rows past the "
            "last offset are zero: [M, N]",
            _grouped, _grouped_shape, ids=(2,), bound=lambda attrs, shapes: shapes[0][0] + 1),
)
