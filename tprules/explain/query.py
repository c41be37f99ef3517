"""Read what a user asks about: one atom (`why`) or a query body (`?- body.`), checked
against the rule program's declarations with the same checkers as rule files.

>>> from tprules.datalog.analysis.checked import check_rules
>>> from tprules.datalog.lang.parser import parse_text
>>> checked = check_rules(parse_text('.decl e(a: symbol, b: number)\\n.input e'))
>>> read_atom('e("x", N)', checked)
Atom(rel='e', args=(Str(value='x'), Var(name='N')))
>>> read_atom('e(1, 2)', checked)
Traceback (most recent call last):
...
tprules.explain.query.QueryError: <atom>:1:3: query error: e.a is a symbol but is given the number 1
"""

from __future__ import annotations

import difflib

from ..datalog.analysis import checks
from ..datalog.lang import ast
from ..datalog.lang.constant import constant_value
from ..errors import BadInput


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
    from ..datalog.lang.parser import parse_atom

    atom = parse_atom(_strip_period(text), filename)
    _check_atom(checked.decls, atom)
    atom = _records_as_constants(atom, checked)
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


def _records_as_constants(atom: ast.Atom, checked) -> ast.Atom:
    """A record, nil or ADT value without variables among the arguments, as the symbol that
    holds it (a tuple to explain is named by its values)."""
    from ..datalog.analysis.records import record_constant

    args = list(atom.args)
    decl = checked.decls[atom.rel]
    for i, arg in enumerate(atom.args):
        if not isinstance(arg, (ast.Record, ast.Nil, ast.Branch)):
            continue
        if ast.term_vars(arg) or any(isinstance(t, ast.Wildcard) for t in _all_subterms(arg)):
            raise QueryError("an atom to explain takes a record without variables (ask ?- for a pattern)", arg.pos)
        try:
            args[i] = ast.Str(record_constant(arg, decl.attrs[i].type, checked.program), arg.pos)
        except BadInput as err:
            raise QueryError(err.message, err.pos) from None
    return ast.Atom(atom.rel, tuple(args), atom.pos)


def _all_subterms(term: ast.Term):
    yield term
    for part in ast.subterms(term):
        yield from _all_subterms(part)


def read_query(text: str, checked, filename: str = "<query>") -> tuple[tuple[ast.Literal, ...], list[str]]:
    """Parse and check a query body: every relation declared, types consistent, every variable
    bound. Returns the body to solve (its records desugared as a rule body's are, see
    datalog/analysis/records.py) and its named variables as written (the answer's columns)."""
    from ..datalog.analysis.records import desugar_query
    from ..datalog.lang.parser import parse_body

    written = parse_body(_strip_period(text), filename)
    for atom, _ in ast.body_atoms(written):
        _check_atom(checked.decls, atom)
    try:
        body = desugar_query(written, checked.program)
    except BadInput as err:
        raise QueryError(err.message, err.pos) from None
    return _check(checked, body, safe=True), query_variables(written)


def query_variables(body: tuple[ast.Literal, ...]) -> list[str]:
    """The named variables of a query, in order of first appearance (its answer's columns);
    not those the desugaring of records names (they begin with '.')."""
    seen: dict[str, None] = {}
    for lit in body:
        for term in _terms(lit):
            for name in _ordered_vars(term):
                if not name.startswith("."):
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
        case ast.Record(args) | ast.Branch(_, args):
            return [name for a in args for name in _ordered_vars(a)]
    return []


def _check_atom(decls, atom: ast.Atom) -> None:
    decl = decls.get(atom.rel)
    if decl is None:
        close = difflib.get_close_matches(atom.rel, list(decls), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise QueryError(f"unknown relation {atom.rel}{hint}", atom.pos)
    if decl.arity != atom.arity:
        columns = ", ".join(f"{a.name}: {a.type}" for a in decl.attrs)
        raise QueryError(f"{atom.rel} has {decl.arity} column(s) ({columns}) but is given {atom.arity}", atom.pos)


def _check(checked, body: tuple[ast.Literal, ...], safe: bool) -> tuple[ast.Literal, ...]:
    """The body with its types written in (as a rule's: records' functors need them), or
    the first problem as a QueryError."""
    from ..datalog.analysis.types import resolve_types

    decls = checked.decls
    for atom, _ in ast.body_atoms(body):
        _check_atom(decls, atom)
    program = ast.RuleSource((ast.Rule(_QUERY_HEAD, body),))
    problems = checks._Problems()
    typenames = resolve_types(ast.RuleSource(checked.program.types), problems)
    typed = checks.check_types(program, decls, problems, typenames)
    if safe and not problems:
        checks.check_safety(program, problems)
    if problems:
        first = min(problems, key=lambda p: (p.pos.col if p.pos else 0))
        raise QueryError(first.message.replace("in rule for query", "in the query"), first.pos)
    return typed.rules[0].body
