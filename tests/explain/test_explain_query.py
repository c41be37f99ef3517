"""Atoms and queries typed by users: the parser's entry points and the checks on top of them."""

from __future__ import annotations

import doctest

import pytest
from conftest import RULES

import tprules.datalog.lang.parser
import tprules.explain.query
import tprules.repl.complete
from tprules.datalog.analysis.checked import load_rules
from tprules.datalog.lang import ast
from tprules.datalog.lang.parser import parse_atom, parse_body
from tprules.errors import RuleSyntaxError
from tprules.explain.query import QueryError, query_variables, read_atom, read_query


@pytest.fixture(scope="module")
def checked():
    return load_rules(RULES)


@pytest.mark.parametrize("module", [tprules.explain.query, tprules.datalog.lang.parser, tprules.repl.complete])
def test_doctests(module):
    assert doctest.testmod(module).failed == 0


def test_parse_atom_keeps_columns():
    atom = parse_atom('   refused("f", R)')
    assert atom == ast.Atom("refused", (ast.Str("f"), ast.Var("R")))
    assert atom.pos.col == 4 and atom.args[1].pos.col == 17


def test_parse_body_takes_every_literal_kind():
    body = parse_body('member(F, O), !is_fold(O), N = count : { member(F, _) }, N > 1')
    assert [type(lit).__name__ for lit in body] == ["Atom", "Negation", "Comparison", "Comparison"]


@pytest.mark.parametrize("text", ['refused("f", R) x', 'refused(', '"f"', 'legal(F) :- x(F)', ''])
def test_parse_atom_rejects(text):
    with pytest.raises(RuleSyntaxError):
        parse_atom(text)


def test_read_atom_allows_a_final_period_and_folds_constants(checked):
    assert read_atom('topo("x", 2 * 3 - 1).', checked).args == (ast.Str("x"), ast.Num(5))
    assert read_atom("topo(_, -1)", checked).args == (ast.Wildcard(), ast.Num(-1))


@pytest.mark.parametrize("text, message", [
    ('refusd("f", R)', "unknown relation refusd (did you mean refused?)"),
    ('zzz(1)', "unknown relation zzz"),
    ('refused("f")', "refused has 2 column(s) (f: symbol, reason: symbol) but is given 1"),
    ('refused(1, R)', "refused.f is a symbol but is given the number 1"),
    ('topo(O, O)', "variable O is a symbol in topo.o but a number in topo.n"),
    ('topo(O, N + 1)', "an atom to explain takes constants, variables and '_' as arguments"),
])
def test_read_atom_errors(checked, text, message):
    with pytest.raises(QueryError) as err:
        read_atom(text, checked)
    assert err.value.message == message and err.value.pos.file == "<atom>"


@pytest.mark.parametrize("text, message", [
    ("member(F, O), !on_chip(X, _)", "unsafe variable X in the query: no positive atom binds it"),
    ("member(F, O), N > 2", "unsafe variable N in the query: no positive atom binds it"),
    ("member(F, O), O < 3", "comparison '<' between O (a symbol) and the number 3"),
    ("member(F, _), N = sum X : { member(F, _) }", "unsafe variable X in the target of sum"),
])
def test_read_query_errors(checked, text, message):
    with pytest.raises(QueryError) as err:
        read_query(text, checked)
    assert err.value.message.startswith(message)


def test_query_variables_in_order_of_appearance(checked):
    body, names = read_query("member(F, O), topo(O, N), M = N + 1, !is_fold(O).", checked)
    assert names == query_variables(body) == ["F", "O", "N", "M"]
