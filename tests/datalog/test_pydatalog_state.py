"""pyDatalog's global state stays behind `PyDatalogEngine`: two engines in one process are
independent, an engine can be thrown away, a rules folder can be reloaded after an edit,
and the calling thread's own pyDatalog database is left alone."""

from __future__ import annotations

import gc
import threading

from conftest import DATA
from pyDatalog import pyDatalog

from tprules.datalog.analysis import check_rules
from tprules.datalog.analysis.checked import load_rules
from tprules.datalog.engine.pydatalog_backend import PyDatalogEngine
from tprules.datalog.lang.parser import parse_text

CLOSURE = """
.decl edge(a: number, b: number)
.input edge
.decl path(a: number, b: number)
path(X, Y) :- edge(X, Y).
path(X, Z) :- path(X, Y), edge(Y, Z).
"""
# The same relation names, a different meaning: path is only one step long.
ONE_STEP = """
.decl edge(a: number, b: number)
.input edge
.decl path(a: number, b: number)
path(X, Y) :- edge(X, Y), X < Y.
"""
EDGES = {"edge": {(1, 2), (2, 3), (3, 1)}}
CLOSED = {(a, b) for a in (1, 2, 3) for b in (1, 2, 3)}
FORWARD = {(1, 2), (2, 3)}


def engine(text: str) -> PyDatalogEngine:
    return PyDatalogEngine(check_rules(parse_text(text)))


def test_two_engines_interleaved_give_independent_answers():
    closure, one_step = engine(CLOSURE), engine(ONE_STEP)
    for _ in range(2):
        assert closure.evaluate(EDGES).tuples("path") == CLOSED
        assert one_step.evaluate(EDGES).tuples("path") == FORWARD
    assert closure.evaluate({"edge": {(5, 6)}}).tuples("path") == {(5, 6)}
    assert one_step.evaluate(EDGES).tuples("path") == FORWARD


def test_an_engine_forgets_the_facts_of_its_last_evaluation():
    closure = engine(CLOSURE)
    assert closure.evaluate(EDGES).tuples("path") == CLOSED
    assert closure.evaluate({"edge": {(7, 8)}}).tuples("path") == {(7, 8)}
    assert closure.evaluate({}).tuples("path") == set()


def test_an_engine_can_be_thrown_away_and_made_again():
    first = engine(CLOSURE)
    assert first.evaluate(EDGES).tuples("path") == CLOSED
    del first
    gc.collect()
    second = engine(CLOSURE)
    assert second.evaluate({"edge": {(1, 2)}}).tuples("path") == {(1, 2)}


def test_the_callers_own_pydatalog_database_is_untouched():
    pyDatalog.assert_fact("callers_fact", 42)
    try:
        closure = engine(CLOSURE)
        closure.evaluate(EDGES)
        assert pyDatalog.ask("callers_fact(X)").answers == [(42,)]
    finally:
        pyDatalog.retract_fact("callers_fact", 42)


def test_engines_work_in_another_thread():
    closure = engine(CLOSURE)
    found = {}
    thread = threading.Thread(target=lambda: found.setdefault("path", closure.evaluate(EDGES).tuples("path")))
    thread.start()
    thread.join()
    assert found["path"] == CLOSED
    assert closure.evaluate({"edge": {(1, 2)}}).tuples("path") == {(1, 2)}


def test_a_rules_folder_is_reloaded_after_its_files_change(tmp_path):
    """load_rules caches the checked program by content: an edited file must not be stale."""
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "path.dl").write_text(CLOSURE)
    before = load_rules(rules)
    assert PyDatalogEngine(before).evaluate(EDGES).tuples("path") == CLOSED
    (rules / "path.dl").write_text(ONE_STEP)
    after = load_rules(rules)
    assert after is not before and after.program != before.program
    assert PyDatalogEngine(after).evaluate(EDGES).tuples("path") == FORWARD
    (rules / "path.dl").write_text(CLOSURE)  # back again: the cached entry is reused, and right
    assert load_rules(rules).program == before.program


def test_a_new_rule_file_in_the_folder_is_seen(tmp_path):
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "a.dl").write_text(ONE_STEP)
    assert PyDatalogEngine(load_rules(rules)).evaluate(EDGES).tuples("path") == FORWARD
    (rules / "b.dl").write_text("path(X, Z) :- path(X, Y), edge(Y, Z).\n")
    assert PyDatalogEngine(load_rules(rules)).evaluate(EDGES).tuples("path") >= {(1, 3)}


def test_workspace_reloads_edited_rules(rules_copy, cli):
    """The whole chain: check, edit rules/tp.dl, check again with the new meaning."""
    import json

    program = DATA / "reasons" / "spans_chips" / "holds"
    before = json.loads(cli("check", program, "--rules", rules_copy, "--format", "json", "--engine", "pydatalog")[1])
    assert before["fusions"][0]["reasons"] == ["spans_chips"]
    tp = rules_copy / "tp.dl"
    tp.write_text(tp.read_text().replace('refused(F, "spans_chips")', 'refused(F, "crosses_chips")'))
    after = json.loads(cli("check", program, "--rules", rules_copy, "--format", "json", "--engine", "pydatalog")[1])
    assert after["fusions"][0]["reasons"] == ["crosses_chips"]
