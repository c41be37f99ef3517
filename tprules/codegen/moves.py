"""Kernels that only move memory, or only add and multiply, run without a compiled kernel.

A group whose every store is a buffer's elements read at another index (reshape, expand,
permute, slice, cat, transpose: codegen/lowering/layout.py), of one dtype throughout, computes
nothing: its result is numpy's view of its input (a reshape, a slice, an expand read as a
stride), copied once into the output buffer by numpy's own precompiled copy loop. So such a
group needs no Numba compile: `mover(kernel)` is that copy, for any shape (lara_mini's 2,368
slices are 2,368 numpy copies, not 2,368 compiles). The elements copied are exactly those the
rendered kernel stores (the same index maps, the same dtype, nothing converted), so the outputs
are bit for bit the same.

So does a kernel whose stores are float32 sums, differences, products, quotients and
negations of such reads (a fold's n-ary `sum`, a residual `add`, a `sub` or `mul`): IEEE
float32 rounds each of these exactly, numpy's ufuncs as Numba's code does, and numpy applies
them in the order the rendered source does (a sum left to right: ((a + b) + c) + ...), so
the bits are the same here too. Anything else (a transcendental function, a dtype's rounding,
an integer conversion) is compiled.

>>> from tprules.codegen.ir import Kernel, Load, Param, Pointwise, Remap, Store
>>> k = Kernel("g", ("s",), "spine", (Param("p0", "in", (4, 6), "f32", "x"), Param("p1", "out", (2, 6), "f32", "y")),
...            (Pointwise((2, 6), (Store("p1", Remap("slice", Load("p0", (4, 6)), (2, 6), "f32", (0, 1, 2))),)),))
>>> x, y = np.arange(24, dtype=np.float32).reshape(4, 6), np.empty((2, 6), np.float32)
>>> mover(k)(x, y); y[:, 0]
array([ 6., 18.], dtype=float32)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..ops import Ops
from .ir import Concat, Expr, Kernel, Load, Op, Pointwise, Remap, Transpose

ROLES = {"in", "out", "scratch"}  # a kernel with any other parameter (a fold's local, a scale) computes


def mover(kernel: Kernel) -> Callable[..., None] | None:
    """A function of the kernel's buffers that does what its rendered source does, where the
    kernel only moves memory (else None: it needs a compiled kernel)."""
    params = {p.name: p for p in kernel.params}
    if any(p.role not in ROLES or p.alias is not None for p in kernel.params):
        return None
    stages = [s for s in kernel.stages if isinstance(s, Pointwise)]
    if not stages or len(stages) != len(kernel.stages):
        return None
    for stage in stages:
        for st in stage.stores:
            dtype = params[st.param].dtype
            if st.flip and len(stage.shape) != 2:
                return None
            if not _moves(st.value, dtype, params):
                return None
    names = [p.name for p in kernel.params]

    def run(*buffers) -> None:
        held = {n: b.reshape(params[n].shape) for n, b in zip(names, buffers)}
        for stage in stages:
            for st in stage.stores:
                value = np.broadcast_to(_value(st.value, held), stage.shape)
                np.copyto(held[st.param], value.T if st.flip else value)

    return run


# Classes whose float32 result numpy rounds exactly as the rendered source does (their
# formulas in tprules/ops/elementwise.py are these operators, applied left to right).
EXACT: dict[str, Callable[..., np.ndarray]] = {
    Ops.ADD.value: np.add, Ops.SUB.value: np.subtract, Ops.MUL.value: np.multiply, Ops.DIV.value: np.divide,
    Ops.NEG.value: np.negative,
}


def _sum(*xs: np.ndarray) -> np.ndarray:
    out = xs[0]
    for x in xs[1:]:
        out = np.add(out, x)
    return out


EXACT[Ops.SUM.value] = _sum


def _where(c: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray(np.where(c != 0, a, b))  # a selection: nothing rounded


EXACT[Ops.WHERE.value] = _where


def _moves(e: Expr, dtype: str, params) -> bool:
    """Whether `e` reads elements of buffers of `dtype` and only moves them (or, in float32,
    combines them by an EXACT class)."""
    if isinstance(e, Op) and e.cls == Ops.ADD_SCALAR.value:  # x + f32(value): one exact rounding
        return dtype == "f32" and e.dtype == "f32" and _moves(e.args[0], dtype, params)
    if isinstance(e, Op) and e.cls == Ops.WHERE.value:  # the condition, of any dtype, is only compared with 0
        c = e.args[0]
        return (dtype == "f32" and e.dtype == "f32" and _moves(c, _dtype(c, params), params)
                and all(_moves(a, dtype, params) for a in e.args[1:]))
    if isinstance(e, Op):
        return (dtype == "f32" and e.dtype == "f32" and e.cls in EXACT  # (their formulas read no attrs)
                and all(_moves(a, dtype, params) for a in e.args))
    if isinstance(e, Load):
        return e.param in params and params[e.param].dtype == dtype and e.shape == params[e.param].shape
    if isinstance(e, Remap):
        forward = e.kind != Ops.SLICE.value or e.params[2] > 0
        return e.dtype == dtype and e.kind in KINDS and forward and _moves(e.arg, dtype, params)
    if isinstance(e, Transpose):
        return e.dtype == dtype and len(e.shape) == 2 and _moves(e.arg, dtype, params)
    if isinstance(e, Concat):
        return e.dtype == dtype and all(_moves(a, dtype, params) for a in e.args)
    return False


def _dtype(e: Expr, params) -> str:
    return params[e.param].dtype if isinstance(e, Load) else getattr(e, "dtype", "?")


def _slice(x: np.ndarray, e: Remap) -> np.ndarray:
    axis, start, step = e.params
    at = [slice(None)] * x.ndim
    at[axis] = slice(start, start + step * (e.shape[axis] - 1) + 1, step)
    return x[tuple(at)]


# Each layout kind as numpy reads it: a view of the operand where numpy can make one.
KINDS: dict[str, Callable[[np.ndarray, Remap], np.ndarray]] = {
    Ops.RESHAPE.value: lambda x, e: np.reshape(x, e.shape),
    Ops.EXPAND.value: lambda x, e: np.broadcast_to(x, e.shape),
    Ops.PERMUTE.value: lambda x, e: np.transpose(x, e.params),
    Ops.SLICE.value: _slice,
}


def _value(e: Expr, held: dict[str, np.ndarray]) -> np.ndarray:
    if isinstance(e, Load):
        return held[e.param]
    if isinstance(e, Op):
        args = [_value(a, held) for a in e.args]
        with np.errstate(all="ignore"):  # inf and nan are values here, as in the kernels (error_model numpy)
            if e.cls == Ops.ADD_SCALAR.value:
                return np.add(args[0], np.float32(float(dict(e.attrs)["value"])))
            return EXACT[e.cls](*args)
    if isinstance(e, Remap):
        return KINDS[e.kind](_value(e.arg, held), e)
    if isinstance(e, Transpose):
        return _value(e.arg, held).T
    if isinstance(e, Concat):
        return np.concatenate([np.broadcast_to(_value(a, held), a.shape) for a in e.args], axis=e.axis)
    raise AssertionError(f"not a move: {e!r}")  # mover() admits only the nodes above


def describe(kernel: Kernel) -> str:
    """What `run --show kernels` prints in place of a source: each store as the numpy it is."""
    lines = [f"# no compiled kernel: numpy runs it (codegen/moves.py) [{kernel.kind}]"]
    for stage in kernel.stages:
        assert isinstance(stage, Pointwise)  # (a move's only stage kind)
        for st in stage.stores:
            lines.append(f"{st.param}[...] = {_text(st.value)}{'.T' if st.flip else ''}  # {stage.shape}")
    return "\n".join(lines) + "\n"


def _text(e: Expr) -> str:
    if isinstance(e, Load):
        return e.param
    if isinstance(e, Remap):
        return f"{e.kind}({_text(e.arg)}, {list(e.shape)}{', ' + str(list(e.params)) if e.params else ''})"
    if isinstance(e, Transpose):
        return f"{_text(e.arg)}.T"
    if isinstance(e, Concat):
        return f"cat([{', '.join(_text(a) for a in e.args)}], axis={e.axis})"
    if isinstance(e, Op):
        return f"{e.cls}({', '.join(_text(a) for a in e.args)})"
    return repr(e)
