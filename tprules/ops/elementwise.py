"""Elementwise classes: one output element from the same element of each operand (NumPy
broadcasting). Each is a float32 reference and a kernel formula over its operands'
variables; the device helpers a formula calls (`fexp`, `silu`, ...) are codegen/render/emit.py's."""

from __future__ import annotations

import math

import numpy as np

from .base import N_ARY, OpClass, Ops, broadcast, constant, formula

F32 = np.float32
GELU_C = F32(np.sqrt(2.0 / np.pi))
GELU_K = F32(0.044715)


def _sum(attrs, *xs):
    total = xs[0]
    for x in xs[1:]:
        total = total + x  # left to right, as the kernels add
    return total


def _gelu(attrs, x):
    return F32(0.5) * x * (F32(1) + np.tanh(GELU_C * (x + GELU_K * x * x * x)))


def _gelu_erf(attrs, x):
    erf = np.frompyfunc(math.erf, 1, 1)
    return (F32(0.5) * x * (F32(1) + erf(x / F32(math.sqrt(2.0))).astype(F32))).astype(F32)


def _pow_formula(args, attrs) -> str:
    e = float(attrs["exponent"])
    if e in (1.0, 2.0, 3.0):  # what models use: a product, as NumPy computes small powers
        return " * ".join([args[0]] * int(e))
    if e == 0.5:
        return f"fsqrt({args[0]})"
    return f"fpow({args[0]}, {constant(e)})"


def _clamp(attrs, x):
    if "min" in attrs:
        x = np.where(x < F32(float(attrs["min"])), F32(float(attrs["min"])), x)
    if "max" in attrs:
        x = np.where(x > F32(float(attrs["max"])), F32(float(attrs["max"])), x)
    return x.astype(F32)


def _clamp_formula(args, attrs) -> str:
    text = args[0]
    if "min" in attrs:  # a comparison, not min/max: NaN fails both and stays NaN, as in torch
        lo = constant(float(attrs["min"]))
        text = f"({lo} if {text} < {lo} else {text})"
    if "max" in attrs:
        hi = constant(float(attrs["max"]))
        text = f"({hi} if {text} > {hi} else {text})"
    return text


def _unary(op, reference, kernel, meaning="", spec=False, **kw) -> OpClass:
    return OpClass(op, "elementwise", 1, "0", meaning, reference, broadcast, kernel, spec=spec, **kw)


def _binary(op, reference, kernel, meaning="NumPy broadcasting", spec=False, **kw) -> OpClass:
    return OpClass(op, "elementwise", 2, "0, 1", meaning, reference, broadcast, kernel, spec=spec, **kw)


CLASSES = (
    _binary(Ops.ADD, lambda attrs, a, b: a + b, formula("{0} + {1}"), spec=True),
    _binary(Ops.SUB, lambda attrs, a, b: a - b, formula("{0} - {1}"), spec=True),
    _binary(Ops.MUL, lambda attrs, a, b: a * b, formula("{0} * {1}"), spec=True),
    _binary(Ops.DIV, lambda attrs, a, b: a / b, formula("{0} / {1}"), spec=True),
    OpClass(Ops.SUM, "elementwise", N_ARY, "0..n-1", "n-ary add (a fold is a `sum` marked by `fold`)", _sum,
            broadcast, lambda args, attrs: " + ".join(args), spec=True),
    _unary(Ops.NEG, lambda attrs, x: -x, formula("-{0}"), spec=True),
    _unary(Ops.EXP, lambda attrs, x: np.exp(x), formula("fexp({0})"), spec=True, transcendental=True),
    _unary(Ops.RELU, lambda attrs, x: np.maximum(x, F32(0)), formula("relu({0})"), spec=True),
    _unary(Ops.SILU, lambda attrs, x: x / (F32(1) + np.exp(-x)), formula("silu({0})"), spec=True,
           transcendental=True),
    _unary(Ops.RSQRT, lambda attrs, x: F32(1) / np.sqrt(x), formula("rsqrt({0})"), spec=True),
    _unary(Ops.GELU, _gelu, formula("gelu({0})"), "tanh approximation", spec=True, transcendental=True),
    _unary(Ops.SCALE, lambda attrs, x: x * F32(float(attrs["factor"])),
           lambda args, attrs: f"{args[0]} * {constant(float(attrs['factor']))}", "x * float(attr `factor`)",
           spec=True, late_numbers=(("factor", None),)),
    # the conversion is `store` to the destination's dtype
    _unary(Ops.CAST, lambda attrs, x: x, formula("{0}"), "to the destination's dtype", spec=True),
    # the classes real models need
    _unary(Ops.POW, lambda attrs, x: np.power(x, F32(float(attrs["exponent"]))), _pow_formula,
           "x ** float(attr `exponent`)", transcendental=True, number_attrs=("exponent",)),
    _unary(Ops.ADD_SCALAR, lambda attrs, x: x + F32(float(attrs["value"])),
           lambda args, attrs: f"{args[0]} + {constant(float(attrs['value']))}", "x + float(attr `value`)",
           number_attrs=("value",)),
    _unary(Ops.SIGMOID, lambda attrs, x: F32(1) / (F32(1) + np.exp(-x)), formula("sigmoid({0})"),
           "1 / (1 + exp(-x))", transcendental=True),
    _unary(Ops.TANH, lambda attrs, x: np.tanh(x), formula("f32(math.tanh({0}))"), transcendental=True),
    _unary(Ops.GELU_ERF, _gelu_erf, formula("gelu_erf({0})"),
           "x / 2 · (1 + erf(x / √2)), exact (SPEC's `gelu` is the tanh approximation)", transcendental=True),
    _unary(Ops.EXPM1, lambda attrs, x: np.expm1(x), formula("fexpm1({0})"), "exp(x) − 1, exact near 0",
           transcendental=True),
    _binary(Ops.MINIMUM, lambda attrs, a, b: np.minimum(a, b), formula("fmin({0}, {1})"),
            "NumPy broadcasting; NaN where either operand is NaN"),
    _unary(Ops.GREATER, lambda attrs, x: (x > F32(float(attrs["value"]))).astype(F32),
           lambda args, attrs: f"(f32(1) if {args[0]} > {constant(float(attrs['value']))} else f32(0))",
           "1 where x > float(attr `value`), else 0 (a boolean: stored as `i8`)", number_attrs=("value",)),
    OpClass(Ops.WHERE, "elementwise", 3, "0: c, 1: a, 2: b", "a where c ≠ 0, else b; NumPy broadcasting",
            lambda attrs, c, a, b: np.where(c != 0, a, b), broadcast, formula("({1} if {0} != f32(0) else {2})")),
    _unary(Ops.GREATER_EQUAL, lambda attrs, x: (x >= F32(float(attrs["value"]))).astype(F32),
           lambda args, attrs: f"(f32(1) if {args[0]} >= {constant(float(attrs['value']))} else f32(0))",
           "1 where x ≥ float(attr `value`), else 0 (a boolean: stored as `i8`)", number_attrs=("value",)),
    _unary(Ops.LOG1P, lambda attrs, x: np.log1p(x), formula("flog1p({0})"),
           "log(1 + x), exact near 0; NaN below −1, −inf at −1", transcendental=True),
    _unary(Ops.LOG, lambda attrs, x: np.log(x), formula("flog({0})"), "the natural logarithm; NaN below 0, −inf at 0",
           transcendental=True),
    _unary(Ops.CLAMP, _clamp, _clamp_formula,
           "x limited to [attr `min`, attr `max`] (either optional); NaN stays NaN",
           number_attrs=("min", "max"), optional_attrs=("min", "max")),
)
