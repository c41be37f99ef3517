"""Engine semantics against hand-computed answers, on every engine and on Soufflé.

Each folder under tests/data/engine/ is one case:
- `program.dl`: declarations, rules, facts written in the rule file, `.output` relations;
- `facts/<rel>.facts`: facts of the `.input` relations (a missing file is empty), read as
  `tprules eval` and Soufflé read them;
- `expected/<rel>.tsv`: the hand-computed answer for every `.output` relation, written as
  Soufflé writes it (floats with 17 significant digits), sorted;
- `refused-<engine>.txt` (optional): the one line an engine that cannot evaluate the
  program answers instead (pyDatalog never answers wrongly);
- `no-souffle.txt` (optional): why the case is not run on Soufflé.
The same case runs on every engine (fast, compiled, pydatalog) and, where installed, on
Soufflé 2.5, which proves the hand-computed answers are Soufflé's semantics.
"""

from __future__ import annotations

import shutil
from functools import lru_cache
from pathlib import Path

import pytest
from conftest import DATA
from helpers import case_dirs, case_ids, needs_souffle, read_tsv, run_souffle, skip_unless_64_bit, tsv_lines

from tprules.datalog.analysis import check_rules
from tprules.datalog.facts import souffle_io
from tprules.datalog.lang.parser import parse_file
from tprules.deep import on_large_stack
from tprules.errors import RuleError
from tprules.workspace import ENGINES, make_engine

CASES = case_dirs(DATA / "engine")
# The cases Soufflé runs too: `no-souffle.txt` says why one is left out (deep_expression: Soufflé
# takes about 40 s to type-check it), as test_eval.py leaves such cases out.
SOUFFLE_CASES = [c for c in CASES if not (c / "no-souffle.txt").exists()]


@lru_cache(maxsize=None)  # parsed and checked once for the three engines and Soufflé
def load_case(case: Path):
    checked = check_rules(parse_file(case / "program.dl", f"{case.name}/program.dl"))
    facts = {}
    for chan in souffle_io.channels(checked):
        if chan.kind == "input":
            facts[chan.rel] = frozenset(souffle_io.read_input(chan, checked.decls[chan.rel].types, case / "facts"))
    return checked, facts


def answer(checked, model, rel: str) -> list[str]:
    """A relation as Soufflé writes it, as sorted lines."""
    return sorted(souffle_io.lines_of(model.tuples(rel), checked.decls[rel].types))


def expected(case: Path, checked) -> dict[str, list[str]]:
    found = {p.stem: read_tsv(p) for p in (case / "expected").glob("*.tsv")}
    assert set(found) == set(checked.outputs), "every .output relation needs expected/<rel>.tsv, and only those"
    return found


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_engine_gives_hand_computed_answer(case, engine):
    on_large_stack(_engine_gives_hand_computed_answer, case, engine)  # deep_expression nests 5,000 deep


def _engine_gives_hand_computed_answer(case, engine):
    checked, facts = load_case(case)
    refused = case / f"refused-{engine}.txt"
    if refused.exists():
        with pytest.raises(RuleError) as err:
            make_engine(engine, checked).evaluate(facts)
        assert str(err.value) == refused.read_text().strip()
        return
    model = make_engine(engine, checked).evaluate(facts)
    for rel, lines in expected(case, checked).items():
        assert answer(checked, model, rel) == lines, f"{case.name}: {rel}"


@needs_souffle
@pytest.mark.parametrize("case", SOUFFLE_CASES, ids=case_ids(SOUFFLE_CASES))
def test_souffle_gives_hand_computed_answer(case, tmp_path):
    skip_unless_64_bit(case)
    checked, _ = on_large_stack(load_case, case)
    facts = tmp_path / "facts"
    shutil.copytree(case / "facts", facts) if (case / "facts").is_dir() else facts.mkdir()
    for rel in checked.inputs:  # Soufflé wants every input file; SPEC §2 says missing is empty
        (facts / f"{rel}.facts").touch()
    run_souffle(case / "program.dl", facts, tmp_path / "out")
    for rel, lines in expected(case, checked).items():
        assert read_tsv(tmp_path / "out" / f"{rel}.csv") == lines, f"{case.name}: {rel}"


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_expected_files_are_sorted(case):
    for path in (case / "expected").glob("*.tsv"):
        lines = [line for line in path.read_text().split("\n") if line]
        assert lines == sorted(lines), f"{path} is not sorted (LC_ALL=C sort)"


def test_targets_evaluate_only_what_they_need():
    checked, facts = load_case(DATA / "engine" / "stratified_negation")
    for engine in ENGINES:
        model = make_engine(engine, checked).evaluate(facts, targets=["no_out"])
        assert tsv_lines(model.tuples("no_out")) == ["3", "5"]
        assert not model.tuples("unreached_root")  # not needed by no_out, so not evaluated


@pytest.mark.parametrize("engine", ["fast", "compiled"])
def test_recursive_strata_record_rounds(engine):
    checked, facts = load_case(DATA / "engine" / "transitive_closure")
    model = make_engine(engine, checked).evaluate(facts)
    assert model.rounds["path"][(1, 2)] == 0  # straight from edge
    assert model.rounds["path"][(1, 3)] == 1  # one join with edge
    assert model.rounds["path"][(1, 4)] == 2


# An aggregate correlated with its rule only through a comparison: Soufflé (and the fast and
# compiled engines) group by the enclosing G; pyDatalog folds aggregates in Python and cannot
# enumerate such groups, so it refuses cleanly instead of answering wrongly.
CORRELATED = """
.decl num(x: number)
num(0). num(1). num(4).
.decl tag(x: number)
tag(1). tag(2). tag(5).
.decl above(g: number, n: number)
.output above
above(G, N) :- num(G), N = count : { tag(X), X > G }.
"""
ABOVE = ["0\t3", "1\t2", "4\t1"]


@pytest.mark.parametrize("engine", ["fast", "compiled"])
def test_an_aggregate_correlated_through_a_comparison(engine):
    from tprules.datalog.lang.parser import parse_text

    model = make_engine(engine, check_rules(parse_text(CORRELATED, "correlated.dl"))).evaluate({})
    assert tsv_lines(model.tuples("above")) == ABOVE


def test_pydatalog_refuses_an_aggregate_it_cannot_group():
    from tprules.datalog.lang.parser import parse_text
    from tprules.errors import RuleError

    with pytest.raises(RuleError) as err:
        make_engine("pydatalog", check_rules(parse_text(CORRELATED, "correlated.dl"))).evaluate({})
    assert str(err.value).startswith("correlated.dl:8:28: rule error: ")
    assert "--engine fast" in str(err.value)


@needs_souffle
def test_souffle_agrees_on_the_correlated_aggregate(tmp_path):
    (tmp_path / "correlated.dl").write_text(CORRELATED)
    (tmp_path / "facts").mkdir()
    run_souffle(tmp_path / "correlated.dl", tmp_path / "facts", tmp_path / "out")
    assert read_tsv(tmp_path / "out" / "above.csv") == ABOVE


def test_division_by_zero_is_a_rule_error_naming_the_rule():
    from tprules.datalog.lang.parser import parse_text
    from tprules.errors import RuleError

    checked = check_rules(parse_text(".decl n(x: number)\nn(0).\n.decl q(x: number)\nq(1 / X) :- n(X).\n", "z.dl"))
    for engine in ENGINES:
        with pytest.raises(RuleError, match="division by zero"):
            make_engine(engine, checked).evaluate({})


def test_a_program_folder_gives_a_nullary_relation_by_a_line(tmp_path):
    # SPEC §2's reader (check, plan, why): a line makes a zero-arity relation true, as in Soufflé.
    from tprules.datalog.facts.base import load_fact_dir

    (tmp_path / "on.facts").write_text("()\n")
    (tmp_path / "off.facts").write_text("")
    facts = load_fact_dir(tmp_path, {"on": (), "off": ()})
    assert facts.tuples("on") == {()} and facts.tuples("off") == set()
