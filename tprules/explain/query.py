"""Read what a user asks about: one atom (`why`) or a query body (`?- body.`), checked
against the rule program's declarations with the same checkers as rule files.

>>> from tprules.analysis.program import check_program
>>> from tprules.lang.parser import parse_text
>>> checked = check_program(parse_text('.decl e(a: symbol, b: number)\\n.input e'))
>>> read_atom('e("x", N)', checked)
Atom(rel='e', args=(Str(value='x'), Var(name='N')))
>>> read_atom('e(1, 2)', checked)
Traceback (most recent call last):
...
tprules.explain.query.QueryError: <atom>:1:3: query error: e.a is a symbol but is given the number 1
"""

from __future__ import annotations

import difflib

from ..analysis import checks
from ..engine.constant import constant_value
from ..errors import BadInput
from ..lang import ast


class QueryError(BadInput):
    """An atom or query that does not fit the rule program (relation, arity, types, safety)."""

    kind = "query error"


_QUERY_HEAD = ast.Atom("query", ())


def _strip_period(text: str) -> str:
    """Drop one final '.' (columns of errors stay those of the text as typed)."""
    stripped = text.rstrip()
    return stripped[:-1] if stripped.endswith(".") else text


def read_atom(text: str, checked, filename: str = "<atom>") -> ast.Atom:
    """Parse and check an atom to explain: constants, variables and `_` as arguments."""
    from ..lang.parser import parse_atom

    atom = parse_atom(_strip_period(text), filename)
    _check(checked, (atom,), safe=False)
    args = []
    for arg in atom.args:
        match arg:
            case ast.Var() | ast.Wildcard() | ast.Num() | ast.Str():
                args.append(arg)
            case ast.BinOp() | ast.Negative() if not ast.term_vars(arg):
                args.append(ast.Num(constant_value(arg), arg.pos))
            case _:
                raise QueryError("an atom to explain takes constants, variables and '_' as arguments", arg.pos)
    return ast.Atom(atom.rel, tuple(args), atom.pos)


def read_query(text: str, checked, filename: str = "<query>") -> tuple[ast.Literal, ...]:
    """Parse and check a query body: every relation declared, types consistent, every variable bound."""
    from ..lang.parser import parse_body

    body = parse_body(_strip_period(text), filename)
    _check(checked, body, safe=True)
    return body


def query_variables(body: tuple[ast.Literal, ...]) -> list[str]:
    """The named variables of a query, in order of first appearance (its answer's columns)."""
    seen: dict[str, None] = {}
    for lit in body:
        for term in _terms(lit):
            for name in _ordered_vars(term):
                seen.setdefault(name, None)
    return list(seen)


def _terms(lit: ast.Literal):
    match lit:
        case ast.Atom(_, args):
            return args
        case ast.Negation(atom):
            return atom.args
        case ast.Comparison(_, left, right):
            return (left, right)
    return ()


def _ordered_vars(term: ast.Term) -> list[str]:
    match term:
        case ast.Var(name):
            return [name]
        case ast.BinOp(_, left, right):
            return _ordered_vars(left) + _ordered_vars(right)
        case ast.Negative(operand):
            return _ordered_vars(operand)
    return []


def _check(checked, body: tuple[ast.Literal, ...], safe: bool) -> None:
    decls = checked.decls
    for atom, _ in ast.body_atoms(body):
        decl = decls.get(atom.rel)
        if decl is None:
            close = difflib.get_close_matches(atom.rel, list(decls), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise QueryError(f"unknown relation {atom.rel}{hint}", atom.pos)
        if decl.arity != atom.arity:
            columns = ", ".join(f"{a.name}: {a.type}" for a in decl.attrs)
            raise QueryError(f"{atom.rel} has {decl.arity} column(s) ({columns}) but is given {atom.arity}", atom.pos)
    program = ast.Program((ast.Rule(_QUERY_HEAD, body),))
    problems = checks._Problems()
    checks.check_types(program, decls, problems)
    if safe and not problems:
        checks.check_safety(program, problems)
    if problems:
        first = min(problems, key=lambda p: (p.pos.col if p.pos else 0))
        raise QueryError(first.message.replace("in rule for query", "in the query"), first.pos)
