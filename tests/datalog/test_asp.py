"""The clingo translation (tprules/datalog/engine/asp.py) derives what tprules derives.

Skipped where clingo is not installed (`pip install .[bench]`).
"""

from __future__ import annotations

import pytest
from conftest import FACTS
from hypothesis import HealthCheck, given, settings
from strategies import rule_sets

from tprules.datalog.analysis import check_rules
from tprules.datalog.engine.asp import ClingoEngine, facts_to_asp, predicate, program_to_asp, quote
from tprules.datalog.lang.parser import parse_text
from tprules.workspace import Workspace, make_engine

clingo = pytest.importorskip("clingo")

EXAMPLES = sorted(p.name for p in FACTS.iterdir() if (p / "op.facts").exists())


def _differences(checked, left, right) -> list[str]:
    return [rel for rel in checked.decls if left.tuples(rel) != right.tuples(rel)]


@pytest.mark.parametrize("example", EXAMPLES)
def test_examples_agree_with_clingo(example):
    ws = Workspace(FACTS / example)
    answer = ClingoEngine(ws.checked).evaluate(ws.program.facts.relations)
    assert _differences(ws.checked, ws.model, answer) == []
    assert answer.tuples("legal") or answer.tuples("refused")


AGGREGATES = """
.decl e(a: number, b: number)
.input e
.decl tuples(n: number)
tuples(N) :- N = count : { e(_, _) }.
.decl bindings(n: number)
bindings(N) :- N = count : { e(X, _), e(_, X) }.
.decl total(n: number)
total(N) :- N = sum Y : e(_, Y).
.decl nothing(n: number)
nothing(N) :- N = min X : { e(X, 99) }.
.decl none_counted(n: number)
none_counted(N) :- N = count : { e(X, 99) }.
.decl per_key(a: number, n: number)
per_key(X, N) :- e(X, _), N = max Y : e(X, Y).
"""


def test_aggregates_follow_souffle():
    # One atom: over its tuples (sum 5 + 5 counts twice); several: over distinct bindings.
    checked = check_rules(parse_text(AGGREGATES, "aggregates.dl"))
    facts = {"e": {(1, 5), (2, 5), (5, 1)}}
    answer = ClingoEngine(checked).evaluate(facts)
    assert answer.tuples("tuples") == {(3,)}
    assert answer.tuples("bindings") == {(2,)}  # X in {1, 2, 5} and in {5, 1}: two bindings
    assert answer.tuples("total") == {(11,)}
    assert answer.tuples("nothing") == set()  # min of no value derives nothing (clingo says #sup)
    assert answer.tuples("none_counted") == {(0,)}
    assert answer.tuples("per_key") == {(1, 5), (2, 5), (5, 1)}
    assert _differences(checked, make_engine("fast", checked).evaluate(facts), answer) == []


def test_names_and_symbols_are_escaped():
    assert predicate("legal") == "legal"
    assert predicate("Legal") != "Legal" and predicate("Legal").startswith("r__")
    assert predicate("not") != "not"
    assert quote('a"b\\c') == '"a\\"b\\\\c"'
    assert facts_to_asp({"op": [("mm0", "matmul")], "chips": [(2,)]}) == 'op("mm0", "matmul").\nchips(2).\n'


def test_show_lists_only_the_asked_relations():
    checked = Workspace(FACTS / "megatron-mlp-tp2").checked
    text = program_to_asp(checked, show=("legal", "refused"))
    assert text.endswith("#show.\n#show legal/1.\n#show refused/2.\n")


@settings(max_examples=300, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rule_set=rule_sets())
def test_random_rule_sets_agree_with_clingo(rule_set):
    checked = check_rules(parse_text(rule_set.text, "random.dl"))
    fast = make_engine("fast", checked).evaluate(rule_set.facts)
    assert _differences(checked, fast, ClingoEngine(checked).evaluate(rule_set.facts)) == [], rule_set.text
