"""Values of constant terms (facts written in rule files, query constants)."""

from __future__ import annotations

from . import ast, values


def kind_of(term: ast.Term) -> str:
    """A term's primitive type as the checker wrote it in; a number if it did not run."""
    return getattr(term, "type", "") or ("symbol" if isinstance(term, ast.Str) else "number")


def constant_value(term: ast.Term):
    """The value of a term without variables (ZeroDivisionError on a division by zero)."""
    match term:
        case ast.Num(value):
            return float(value) if kind_of(term) == "float" else value
        case ast.Unsigned(value) | ast.Float(value) | ast.Str(value):
            return value
        case ast.Negative(operand):
            return values.negative(kind_of(term), constant_value(operand))
        case ast.BinOp(op, left, right):
            return _arith(op, kind_of(left), constant_value(left), constant_value(right))
        case ast.Cast(operand):
            return constant_value(operand)
        case ast.Functor("range"):
            raise TypeError("range(...) has several values")
        case ast.Functor(name, args):
            return values.functor(name, kind_of(term), tuple(constant_value(a) for a in args),
                                  tuple(kind_of(a) for a in args))
    raise TypeError(f"not a constant: {term}")


def _arith(op: str, kind: str, a, b):
    try:
        return values.binary(op, kind, a, b)
    except values.EvaluationError as err:
        if "division by zero" in str(err):
            raise ZeroDivisionError(str(err)) from None
        raise


def arithmetic(op: str, a: int, b: int) -> int:
    """One of `+ - * / %` on two numbers as Soufflé computes it (ZeroDivisionError on 0)."""
    return _arith(op, "number", a, b)


def fact_values(rule: ast.Rule) -> tuple:
    """The tuple a fact written in a rule file states (a RuleError naming it if it cannot be computed)."""
    from ...errors import RuleError

    try:
        return tuple(constant_value(term) for term in rule.head.args)
    except (ZeroDivisionError, values.EvaluationError) as err:
        raise RuleError(f"{err} in this fact", rule.pos) from None
