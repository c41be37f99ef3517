"""Values as rule text: tuples printed as atoms, rule literals with their bindings substituted."""

from __future__ import annotations

from ..datalog.lang import ast
from ..datalog.lang.printer import print_literal, print_term


def constant(value) -> ast.Term:
    return ast.Num(value) if isinstance(value, int) else ast.Str(str(value))  # a record prints as written


def show(value) -> str:
    """A value as written in rules: `"mm2_0"`, `3`."""
    return print_term(constant(value))


def atom_text(rel: str, values: tuple) -> str:
    """A tuple as an atom: `refused("mm2_bias", "cycle")`."""
    return print_literal(ast.Atom(rel, tuple(constant(v) for v in values)))


def substitute(term: ast.Term, env: dict, aggs: dict | None = None) -> ast.Term:
    """The term with bound variables (and, given `aggs`, aggregates) replaced by their values."""
    match term:
        case ast.Var(name) if name in env:
            return constant(env[name])
        case ast.BinOp(op, left, right):
            return ast.BinOp(op, substitute(left, env, aggs), substitute(right, env, aggs))
        case ast.Negative(operand):
            return ast.Negative(substitute(operand, env, aggs))
        case ast.Aggregate(func, target, body):
            if aggs is not None and id(term) in aggs:
                return constant(aggs[id(term)])
            target = None if target is None else substitute(target, env)
            return ast.Aggregate(func, target, tuple(substitute_literal(lit, env) for lit in body))
    return term


def substitute_atom(atom: ast.Atom, env: dict, aggs: dict | None = None) -> ast.Atom:
    return ast.Atom(atom.rel, tuple(substitute(a, env, aggs) for a in atom.args), atom.pos)


def substitute_literal(lit: ast.Literal, env: dict, aggs: dict | None = None) -> ast.Literal:
    match lit:
        case ast.Atom():
            return substitute_atom(lit, env, aggs)
        case ast.Negation(atom):
            return ast.Negation(substitute_atom(atom, env, aggs), lit.pos)
        case ast.Comparison(op, left, right):
            return ast.Comparison(op, substitute(left, env, aggs), substitute(right, env, aggs), lit.pos)
    raise TypeError(lit)


def instantiated(lit: ast.Literal, env: dict, aggs: dict | None = None) -> str:
    return print_literal(substitute_literal(lit, env, aggs))


def rule_variables(rule: ast.Rule) -> list[str]:
    """Named variables of a rule outside its aggregates, in order of first appearance."""
    from .query import query_variables

    return query_variables((rule.head, *rule.body))


def bindings(rule: ast.Rule, env: dict) -> tuple[tuple[str, object], ...]:
    """(variable, value) for the rule's variables bound in `env`, in order of first appearance."""
    return tuple((name, env[name]) for name in rule_variables(rule) if name in env)


def pattern_key(atom: ast.Atom) -> str:
    """An atom with every variable written `_`: two patterns that ask the same thing print alike."""
    return print_literal(ast.Atom(atom.rel, tuple(ast.Wildcard() if isinstance(a, ast.Var) else a
                                                  for a in atom.args)))
