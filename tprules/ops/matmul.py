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


def _matmul(attrs, a, b):
    return a @ (b.T if attrs.get("transpose_b") == "1" else b)


CLASSES = (
    OpClass(Ops.MATMUL, "matmul", 2, "0: A[M,K], 1: B[K,N]", "A @ B; attr `transpose_b 1` means B is [N,K]",
            _matmul, _matmul_shape, spec=True),
    OpClass(Ops.BMM, "matmul", 2, "0: A[B,M,K], 1: B[B,K,N]", "A[b] @ B[b] for every b (attention over heads)",
            lambda attrs, a, b: np.matmul(a, b), _bmm_shape),
)
