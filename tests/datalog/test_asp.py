"""The clingo translation (tprules/datalog/engine/asp.py) derives what tprules derives.

clingo is in the `test` extra (and `bench`), so CI runs these; they are skipped only where
it is not installed.
"""

from __future__ import annotations

import pytest
from conftest import FACTS
from hypothesis import HealthCheck, given, settings
from strategies import rule_sets

from tprules.datalog.analysis import check_rules
from tprules.datalog.engine.asp import ClingoEngine, facts_to_asp, predicate, program_to_asp, quote
from tprules.datalog.lang.parser import parse_text
from tprules.errors import Unsupported
from tprules.golden.corpus import example_programs, meant_for
from tprules.workspace import Workspace, make_engine

clingo = pytest.importorskip("clingo")

# Every example on every shim it is meant for (its own shim.facts): async-tp-mlp-tp2 on
# cuda-lane:h200:Bf16SymmMem is the one that reaches rules/collective.dl's collective kernels.
TARGETS = [(p.name, shim) for p in example_programs(FACTS) for shim in meant_for(p)]


def _differences(checked, left, right) -> list[str]:
    return [rel for rel in checked.decls if left.tuples(rel) != right.tuples(rel)]


@pytest.mark.parametrize("example, shim", TARGETS, ids=[f"{e}-{s}" for e, s in TARGETS])
def test_examples_agree_with_clingo_and_the_reference(example, shim):
    ws = Workspace(FACTS / example, shim=shim)
    answer = ClingoEngine(ws.checked).evaluate(ws.program.facts.relations)
    assert _differences(ws.checked, ws.model, answer) == []
    reference = make_engine("pydatalog", ws.checked).evaluate(ws.program.facts.relations)
    assert _differences(ws.checked, reference, answer) == []
    assert answer.tuples("legal") or answer.tuples("refused")


def test_the_examples_reach_the_collective_kernels_and_match():
    """collective.dl's fold_axis (`match` and `to_number`) and kernel hold on clingo too."""
    ws = Workspace(FACTS / "async-tp-mlp-tp2", shim="cuda-lane:h200:Bf16SymmMem")
    answer = ClingoEngine(ws.checked).evaluate(ws.program.facts.relations)
    assert answer.tuples("fold_axis") and answer.tuples("kernel")
    assert answer.tuples("fold_axis") == ws.model.tuples("fold_axis")


STRINGS = """
.decl s(x: symbol)
.input s
.decl number(x: symbol, n: number)
number(X, N) :- s(X), match("-?[0-9]+", X), N = to_number(X).
.decl word(x: symbol)
word(X) :- s(X), !match("-?[0-9]+", X).
.decl has_a(x: symbol)
has_a(X) :- s(X), contains("a", X).
.decl no_a(x: symbol)
no_a(X) :- s(X), !contains("a", X).
.decl text(x: symbol, y: symbol, n: number, z: symbol)
text(X, Y, N, Z) :- s(X), Y = cat(X, "!", to_string(strlen(X))), N = max(strlen(X), 2), Z = substr(X, 1, 2).
.decl least(x: symbol)
least(X) :- s(A), s(B), A < B, X = min(A, B).
"""


def test_string_functors_and_tests_follow_souffle():
    checked = check_rules(parse_text(STRINGS, "strings.dl"))
    facts = {"s": {("-12",), ("abc",), ("7",)}}
    answer = ClingoEngine(checked).evaluate(facts)
    assert answer.tuples("number") == {("-12", -12), ("7", 7)}
    assert answer.tuples("word") == {("abc",)}
    assert answer.tuples("has_a") == {("abc",)} and answer.tuples("no_a") == {("-12",), ("7",)}
    assert ("abc", "abc!3", 3, "bc") in answer.tuples("text")
    assert _differences(checked, make_engine("fast", checked).evaluate(facts), answer) == []


@pytest.mark.parametrize("text, where, what", [
    (".decl e(a: number)\n.input e\n.decl r(a: number)\nr(X) :-\n  e(Y), X = Y bshl 1.", "odd.dl:5:", "operator `bshl`"),
    (".decl e(a: number)\n.input e\n.decl r(a: float)\nr(X) :- e(Y), X = to_float(Y).", "odd.dl:3:", "float columns"),
    (".decl e(a: symbol)\n.input e\n.decl r(a: number)\nr(X) :-\n  e(Y), X = ord(Y).", "odd.dl:5:", "functor `ord`"),
    (".decl e(a: number, b: number) eqrel\n.input e", "odd.dl:1:", "eqrel"),
])
def test_an_unsupported_construct_is_refused_naming_it_and_its_line(text, where, what):
    checked = check_rules(parse_text(text, "odd.dl"))
    with pytest.raises(Unsupported) as caught:
        program_to_asp(checked)
    message = str(caught.value)
    assert message.count("\n") == 0 and message.startswith(where) and what in message, message


def test_the_script_block_runs_under_the_clingo_command(tmp_path):
    """What the benchmarks run: `python -m clingo --enable-python rules.lp facts.lp`."""
    import subprocess
    import sys

    checked = check_rules(parse_text(STRINGS, "strings.dl"))
    (tmp_path / "rules.lp").write_text(program_to_asp(checked, show=("number",), with_script=True))
    (tmp_path / "facts.lp").write_text(facts_to_asp({"s": [("-12",), ("abc",)]}))
    done = subprocess.run([sys.executable, "-m", "clingo", "--enable-python", "rules.lp", "facts.lp", "-V0",
                           "--outf=0"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert 'number("-12",-12)' in done.stdout, done.stdout + done.stderr


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
