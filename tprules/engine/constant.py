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
            a, b = constant_value(left), constant_value(right)
            if op == "+":
                return a + b
            if op == "-":
                return a - b
            if op == "*":
                return a * b
            if op == "/":
                return truncating_div(a, b)
            return a - b * truncating_div(a, b)
    raise TypeError(f"not a constant: {term}")
