"""Layouts as views (codegen/render/views.py): a chain of layout reads over a buffer is an offset and
strides, read at every index exactly as numpy's own layout functions place the elements;
what is not a view is said so, and BLAS is given a block only where a leading dimension fits."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tprules.codegen.ir import Load, Op, Remap, Transpose
from tprules.codegen.render.views import block, view_of


def reshape(e, shape):
    return Remap("reshape", e, tuple(shape), "f32")


def permute(e, dims):
    return Remap("permute", e, tuple(e.shape[d] for d in dims), "f32", tuple(dims))


def expand(e, shape):
    return Remap("expand", e, tuple(shape), "f32")


def slice_(e, axis, start, end, step=1):
    shape = list(e.shape)
    shape[axis] = len(range(start, end, step))
    return Remap("slice", e, tuple(shape), "f32", (axis, start, step))


X = Load("p0", (2, 3, 4))
HEADS = permute(reshape(Load("p0", (3, 16)), (3, 4, 4)), (1, 0, 2))  # [seq, heads·dim] → [heads, seq, dim]
GQA = reshape(expand(reshape(Load("p0", (2, 3, 4)), (2, 1, 3, 4)), (2, 2, 3, 4)), (4, 3, 4))

# name → (the chain, how numpy computes it from the buffer's array)
CASES = {
    "buffer": (X, lambda x: x),
    "permute": (permute(X, (2, 0, 1)), lambda x: x.transpose(2, 0, 1)),
    "split heads": (HEADS, lambda x: x.reshape(3, 4, 4).transpose(1, 0, 2)),
    "merge heads": (reshape(permute(HEADS, (1, 0, 2)), (3, 16)), lambda x: x),
    "gqa": (GQA, lambda x: np.broadcast_to(x[:, None], (2, 2, 3, 4)).reshape(4, 3, 4)),
    "gqa transposed key": (permute(GQA, (0, 2, 1)),
                           lambda x: np.broadcast_to(x[:, None], (2, 2, 3, 4)).reshape(4, 3, 4).transpose(0, 2, 1)),
    "rope halves": (slice_(HEADS, 2, 2, 4), lambda x: x.reshape(3, 4, 4).transpose(1, 0, 2)[:, :, 2:4]),
    "strided slice": (slice_(X, 2, 1, 4, 2), lambda x: x[:, :, 1:4:2]),
    "expand leading": (expand(Load("p0", (3, 4)), (2, 3, 4)), lambda x: np.broadcast_to(x, (2, 3, 4))),
    "transpose": (Transpose(Load("p0", (3, 4)), (4, 3), "f32"), lambda x: x.T),
    "flatten a permute": (reshape(permute(X, (1, 0, 2)), (3, 8)), lambda x: x.transpose(1, 0, 2).reshape(3, 8)),
}


def read(view, shape, flat):
    """Every element of `view` read from the flat buffer, as the generated code reads it."""
    out = np.empty(shape, flat.dtype)
    for idx in itertools.product(*(range(n) for n in shape)):
        pos = view.offset
        for axis, i in enumerate(idx):
            pos += eval(view.offset_of(axis, str(i)))  # noqa: S307 - the generated offset's text
        out[idx] = flat[pos]
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_view_reads_what_numpy_reads(name):
    chain, numpy_of = CASES[name]
    load = chain
    while not isinstance(load, Load):
        load = load.arg
    x = np.arange(np.prod(load.shape), dtype=np.float32).reshape(load.shape)
    view = view_of(chain, {"p0": "f32"})
    assert view is not None and view.shape == chain.shape
    np.testing.assert_array_equal(read(view, chain.shape, x.ravel()), numpy_of(x))


@pytest.mark.parametrize("name, chain, dtypes", [
    ("a computed value", Op("neg", (X,), X.shape, "f32"), {"p0": "f32"}),
    ("an integer buffer", X, {"p0": "i64"}),
    ("a conversion", Remap("reshape", X, (6, 4), "bf16"), {"p0": "f32"}),
    ("a slice across merged strides", slice_(reshape(permute(X, (1, 0, 2)), (3, 8)), 1, 2, 6), {"p0": "f32"}),
])
def test_what_computes_is_not_a_view(name, chain, dtypes):
    assert view_of(chain, dtypes) is None


@pytest.mark.parametrize("name, rows, cols, expected", [
    ("split heads", 3, 4, (False, 16)),  # each head's rows 16 apart
    ("gqa transposed key", 4, 3, (True, 4)),  # the key's transpose: a flag, no copy
    ("rope halves", 3, 2, (False, 16)),
    ("strided slice", 3, 2, None),  # columns 2 apart: no leading dimension makes that a block
    ("flatten a permute", 3, 8, None),  # a row's halves 12 apart
])
def test_blas_reads_a_block_where_a_leading_dimension_fits(name, rows, cols, expected):
    chain, _ = CASES[name]
    assert block(view_of(chain, {"p0": "f32"}), rows, cols) == expected
