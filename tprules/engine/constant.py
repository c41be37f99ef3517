"""Values of constant terms (facts written in rule files, query constants)."""

from __future__ import annotations

from ..lang import ast


def truncating_div(a: int, b: int) -> int:
    """Soufflé's integer division: truncate toward zero, as C does."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def constant_value(term: ast.Term):
    match term:
        case ast.Num(value):
            return value
        case ast.Str(value):
            return value
        case ast.Negative(operand):
            return -constant_value(operand)
        case ast.BinOp(op, left, right):
            return arithmetic(op, constant_value(left), constant_value(right))
    raise TypeError(f"not a constant: {term}")


def arithmetic(op: str, a: int, b: int) -> int:
    """One of `+ - * / %` on two numbers as Soufflé computes it (ZeroDivisionError on 0)."""
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    q = truncating_div(a, b)
    return q if op == "/" else a - b * q
