"""Rewrites of rule ASTs that the pyDatalog translation needs (pyDatalog-free, so testable alone).

pyDatalog has only Python's floor division, so truncating `/` and `%` (C and Soufflé) are
split into sign cases; comparisons of constants are decided before pyDatalog sees them.
"""

from __future__ import annotations

import operator

from ..lang import ast
from .constant import constant_value

COMPARE = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
           ">=": operator.ge}
_ARITH = {"+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv}


def constant(term: ast.Term):
    """The value of a term without variables, after `split_divisions` (which uses `//`)."""
    match term:
        case ast.BinOp(op, left, right) if op in _ARITH:
            return _ARITH[op](constant(left), constant(right))
        case ast.Negative(operand):
            return -constant(operand)
    return constant_value(term)


def _find_division(term: ast.Term):
    match term:
        case ast.BinOp(op, left, right):
            return _find_division(left) or _find_division(right) or (term if op in "/%" else None)
        case ast.Negative(operand):
            return _find_division(operand)
    return None


def _terms(head: ast.Atom | None, body) -> list[ast.Term]:
    found = list(head.args) if head is not None else []
    for lit in body:
        match lit:
            case ast.Atom(_, args) | ast.Negation(ast.Atom(_, args)):
                found.extend(args)
            case ast.Comparison(_, left, right):
                found.extend((left, right))
    return found


def split_divisions(head: ast.Atom | None, body: tuple) -> list[tuple[ast.Atom | None, tuple]]:
    """Rewrite `/` and `%` (which truncate toward zero, as in C and Soufflé) into floor
    division `//`, one variant per sign case: pyDatalog has only Python's floor division."""
    division = next((d for t in _terms(head, body) if (d := _find_division(t)) is not None), None)
    if division is None:
        return [(head, body)]
    a, b = division.left, division.right
    same_sign = ast.BinOp("//", a, b)
    other_sign = ast.Negative(ast.BinOp("//", ast.Negative(a), b))
    variants = []
    for op, quotient in ((">=", same_sign), ("<", other_sign)):
        value = quotient if division.op == "/" else ast.BinOp("-", a, ast.BinOp("*", b, quotient))
        case = ast.Comparison(op, ast.BinOp("*", a, b), ast.Num(0))
        new_head = _replace_atom(head, division, value) if head is not None else None
        new_body = tuple(_replace_literal(lit, division, value) for lit in body) + (case,)
        variants.extend(split_divisions(new_head, new_body))
    return variants


def _replace_atom(atom: ast.Atom, old, new) -> ast.Atom:
    return ast.Atom(atom.rel, tuple(replace(t, old, new) for t in atom.args), atom.pos)


def _replace_literal(lit, old, new):
    match lit:
        case ast.Atom():
            return _replace_atom(lit, old, new)
        case ast.Negation(atom):
            return ast.Negation(_replace_atom(atom, old, new), lit.pos)
        case ast.Comparison(op, left, right):
            return ast.Comparison(op, replace(left, old, new), replace(right, old, new), lit.pos)
    return lit


def replace(term: ast.Term, old: ast.Term, new: ast.Term) -> ast.Term:
    """The term with one sub-term (an aggregate, a division) replaced."""
    if term is old:
        return new
    match term:
        case ast.BinOp(op, left, right):
            return ast.BinOp(op, replace(left, old, new), replace(right, old, new), term.pos)
        case ast.Negative(operand):
            return ast.Negative(replace(operand, old, new), term.pos)
    return term
