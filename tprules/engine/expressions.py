"""Terms as Python expressions over tprules.engine.values: what the compiled engine's
generated joins and the pyDatalog engine's lambdas compute, written once."""

from __future__ import annotations

from collections.abc import Callable

from ..lang import ast
from .constant import constant_value, kind_of

# What the generated code needs in its namespace.
HELPERS = '''
from tprules.engine.values import wrap as _w, uwrap as _uw, binary as _bin, negative as _neg, compare as _cmp
from tprules.engine.values import functor as _fn, range_values as _range, float_bits as _bf, bits_float as _fb
'''


def helper_namespace() -> dict:
    namespace: dict = {}
    exec(compile(HELPERS, "<tprules helpers>", "exec"), namespace)  # noqa: S102
    return namespace


def python_name(stem: str, name: str) -> str:
    """A variable's name in generated code: injective ('_' doubles, so '?' and '.' map apart)."""
    return stem + name.replace("_", "__").replace("?", "_q").replace(".", "_d")


def constant_text(value) -> str:
    text = repr(value)
    return f"float({text!r})" if text in ("inf", "-inf", "nan") else text


def python_expr(term: ast.Term, name_of: Callable[[ast.Var], str],
                aggregate: Callable[[ast.Aggregate], str] | None = None) -> str:
    """Python source computing the term (each variable written as `name_of(var)` says)."""

    def expr(t: ast.Term) -> str:
        match t:
            case ast.Var():
                return name_of(t)
            case ast.Num() | ast.Unsigned() | ast.Float() | ast.Str():
                return constant_text(constant_value(t))
            case ast.BinOp(op, left, right):
                kind = kind_of(left)
                a, b = expr(left), expr(right)
                if op in ("+", "-", "*") and kind == "float":
                    return f"({a} {op} {b})"
                if op in ("+", "-", "*") and kind == "number":
                    return f"_w({a} {op} {b})"
                return f"_bin({op!r}, {kind!r}, {a}, {b})"
            case ast.Negative(operand):
                return f"_neg({kind_of(t)!r}, {expr(operand)})"
            case ast.Cast(operand):
                return expr(operand)
            case ast.Functor("range", args):
                return f"_range({kind_of(t)!r}, {', '.join(expr(a) for a in args)})"
            case ast.Functor(name, args):
                values = "".join(expr(a) + ", " for a in args)
                kinds = tuple(kind_of(a) for a in args)
                return f"_fn({name!r}, {kind_of(t)!r}, ({values}), {kinds!r})"
            case ast.Aggregate() if aggregate is not None:
                return aggregate(t)
        raise TypeError(t)

    return expr(term)


def python_test(op: str, left: str, right: str) -> str:
    """Python source for a comparison or string test of two computed values."""
    if op in ast.TESTS:
        return f"_cmp({op!r}, {left}, {right})"
    return f"({left} {'==' if op == '=' else op} {right})"
