"""The grouped matmul's and the stable sort's rank kernels (issue 36) compiled for both
architectures of the CI set:
alone, unfused, as planned (fused with the experts' gather, SwiGLU and the routing weight)
and split around a library's gemm (benchmarks/ptx_check.py's three jobs)."""

from __future__ import annotations

import numpy as np
import pytest

from tprules.program.builder import ProgramBuilder

from .conftest import ARCHES, python


def _spine_stmts(b):
    """`st(name, cls, reads, shape, dtype, **attrs)`: a statement of `b` writing a new spine tensor."""
    def st(name, cls, reads, shape, dtype="f32", **attrs):
        return b.stmt(name, cls, reads, b.tensor(name, shape, dtype, spine=True), **attrs)
    return st


def _compiled(folder, arch) -> str:
    """benchmarks/ptx_check.py's report on `folder` for `arch`, asserted to exit 0."""
    r = python("benchmarks/ptx_check.py", "--arch", arch, str(folder), timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    return r.stdout


def _experts(folder):
    b = ProgramBuilder(chips=1)
    st = _spine_stmts(b)

    x = b.tensor("x", [4, 6], spine=True)
    tok = b.tensor("tok", [8], "i64", spine=True, data=np.array([0, 1, 0, 3, 1, 2, 3, 2], np.int64))
    offs = b.tensor("offs", [3], "i32", spine=True, data=np.array([3, 5, 8], np.int32))
    rows = st("rows", "take_rows", [x, tok], [8, 6])
    gu = st("gu_t", "permute", [b.tensor("gate_up", [3, 10, 6], spine=True)], [3, 6, 10], dims="0,2,1")
    h = st("h", "grouped_matmul", [rows, gu, offs], [8, 10])
    g = st("g", "slice", [h], [8, 5], axis=1, start=0, end=5, step=1)
    u = st("u", "slice", [h], [8, 5], axis=1, start=5, end=10, step=1)
    act = st("act", "mul", [st("sg", "silu", [g], [8, 5]), u], [8, 5])
    y = st("y", "grouped_matmul", [act, b.tensor("down", [3, 5, 6], spine=True), offs], [8, 6])
    st("out", "mul", [y, b.tensor("wt", [8, 1], spine=True)], [8, 6])
    ids = b.tensor("ids", [1, 8], spine=True, data=np.array([[2, 0, 1, 2, 0, 1, 1, 2]], np.float32))
    st("rank", "sort_rank", [ids], [1, 8], "i64")  # the grouped form's sort
    return b.write(folder)


@pytest.mark.parametrize("arch", ARCHES)
def test_the_grouped_experts_compile(nvvm, tmp_path, arch):
    out = _compiled(_experts(tmp_path / "experts"), arch)
    assert "grouped_matmul" in out and "rank (row)" in out and "0 failed" in out


def _scatters(folder):
    """put_along as a scatter: a sort's values put at their ranks into zeros only it reads (in
    place), a source put into a value another statement reads too (copied first), a mask's
    value put, and a reshape of a put_along (a view of its buffer)."""
    b = ProgramBuilder(chips=1)
    st = _spine_stmts(b)

    ids = b.tensor("ids", [2, 8], spine=True)
    rank = st("rank", "sort_rank", [ids], [2, 8], "i64")
    st("sorted", "put_along", [b.tensor("zeros", [2, 8], spine=True, data=np.zeros((2, 8), np.float32)), rank, ids],
       [2, 8], axis=1)
    x = st("x", "exp", [b.tensor("x_in", [4, 3, 5], spine=True)], [4, 3, 5])
    index = b.tensor("index", [2, 3, 2], "i64", spine=True, data=np.array([[[3, 0], [1, 1], [2, 3]],
                                                                           [[0, 0], [3, 2], [1, 0]]], np.int64))
    put = st("put", "put_along", [x, index, b.tensor("src", [2, 3, 2], spine=True)], [4, 3, 5], axis=0)
    st("flat", "reshape", [put], [12, 5])
    st("twice", "scale", [x], [4, 3, 5], factor="2.0")
    mask = b.tensor("mask0", [3, 4], "i8", spine=True, data=np.zeros((3, 4), np.int8))
    st("mask", "put_along", [mask, st("top", "topk_indices", [b.tensor("s", [3, 4], spine=True)], [3, 2], "i64",
                                      k=2)], [3, 4], "i8", axis=1, value="1.0")
    return b.write(folder)


@pytest.mark.parametrize("arch", ARCHES)
def test_the_scatters_compile(nvvm, tmp_path, arch):
    out = _compiled(_scatters(tmp_path / "scatters"), arch)
    assert "scatter" in out and "0 failed" in out
