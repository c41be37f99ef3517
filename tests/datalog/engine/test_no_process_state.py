"""No process-wide state in the engines (issues 20 and 33): `ord`'s symbol table and
autoinc()'s counter belong to one evaluation, the `-I` folders to one load of the rules,
the caches are bounded, and every engine takes the same explicit options."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from tprules.cli import main
from tprules.datalog.analysis import check_rules, load_rules
from tprules.datalog.engine import expressions
from tprules.datalog.engine.options import ENGINE_TABLE, EngineOptions
from tprules.datalog.lang import values
from tprules.datalog.lang.parser import parse_text
from tprules.errors import RuleSyntaxError
from tprules.workspace import ENGINES, make_engine

ORD = """
.decl s(x: symbol)
.decl o(x: symbol, n: number)
o(x, ord(x)) :- s(x).
"""


def _ord(engine: str, symbols: list[str]) -> set:
    checked = check_rules(parse_text(ORD, "ord.dl"))
    return make_engine(engine, checked).evaluate({"s": {(x,) for x in symbols}}, targets=["o"]).tuples("o")


@pytest.mark.parametrize("engine", ENGINES)
def test_an_ord_answer_does_not_depend_on_an_earlier_evaluation(engine):
    _ord(engine, ["zz", "yy", "xx"])  # an earlier evaluation in the same process
    assert set(_ord(engine, ["a"])) == {("a", 0)}  # as in a fresh process


def test_a_seeded_symbol_table_holds_for_its_evaluation_only():
    checked = check_rules(parse_text(ORD, "ord.dl"))
    engine = make_engine("compiled", checked)
    with values.evaluation(["q", "a"]):
        assert set(engine.evaluate({"s": {("a",)}}, targets=["o"]).tuples("o")) == {("a", 1)}
    assert set(engine.evaluate({"s": {("a",)}}, targets=["o"]).tuples("o")) == {("a", 0)}


AUTOINC = """
.decl s(x: symbol)
.decl id(n: number, x: symbol)
id(autoinc(), x) :- s(x).
"""


@pytest.mark.parametrize("engine", [e for e in ENGINES if e != "pydatalog"])  # pydatalog refuses autoinc()
def test_autoinc_counts_from_zero_in_every_evaluation(engine):
    checked = check_rules(parse_text(AUTOINC, "autoinc.dl"))
    evaluate = make_engine(engine, checked).evaluate
    first = evaluate({"s": {("a",), ("b",)}}, targets=["id"]).tuples("id")
    assert sorted(n for n, _ in first) == [0, 1]
    assert set(evaluate({"s": {("c",)}}, targets=["id"]).tuples("id")) == {(0, "c")}  # as in a fresh process


def test_one_evaluation_counts_on_across_its_engines_calls():
    checked = check_rules(parse_text(AUTOINC, "autoinc.dl"))
    evaluate = make_engine("compiled", checked).evaluate
    with values.evaluation() as state:
        evaluate({"s": {("a",)}}, targets=["id"])
        assert set(evaluate({"s": {("b",)}}, targets=["id"]).tuples("id")) == {(1, "b")}
    assert state.autoinc() == 2


def test_an_evaluation_over_a_model_goes_on_with_its_counter():
    checked = check_rules(parse_text(AUTOINC + ".decl t(x: symbol)\n.decl more(n: number, x: symbol)\n"
                                     "more(autoinc(), x) :- t(x).\n", "autoinc.dl"))
    engine = make_engine("fast", checked)
    first = engine.evaluate({"s": {("a",), ("b",)}, "t": set()})
    again = engine.evaluate({"s": {("a",), ("b",)}, "t": {("c",)}}, base=first, only=frozenset({"more"}))
    assert set(again.tuples("more")) == {(2, "c")}  # not 0: id's numbers, kept from the base, are 0 and 1


def _rules_including(tmp_path, name: str) -> Path:
    rules = tmp_path / "rules"
    rules.mkdir(exist_ok=True)
    (rules / "main.dl").write_text('#include "decls.dlh"\nout(x) :- base(x).\n.output out\n')
    folder = tmp_path / name
    folder.mkdir()
    (folder / "decls.dlh").write_text(f".decl base(x: symbol)\n.decl out(x: symbol)\nbase(\"{name}\").\n")
    return rules


def test_include_folders_belong_to_one_load(tmp_path):
    rules = _rules_including(tmp_path, "first")
    _rules_including(tmp_path, "second")
    outputs = []
    for name in ("first", "second"):
        checked = load_rules(rules, include_dirs=[tmp_path / name])
        outputs.append(make_engine("fast", checked).evaluate({}, targets=["out"]).tuples("out"))
    assert [set(o) for o in outputs] == [{("first",)}, {("second",)}]
    with pytest.raises(RuleSyntaxError, match='#include "decls.dlh": no such file'):
        load_rules(rules)  # the folders of the loads before are not searched


def test_a_commands_dash_i_does_not_outlive_it(tmp_path, capsys):
    rules = _rules_including(tmp_path, "first")
    assert main(["lint", "--rules", str(rules), "-I", str(tmp_path / "first")]) == 0
    with pytest.raises(RuleSyntaxError, match='#include "decls.dlh": no such file'):
        load_rules(rules)  # a later caller in the same process: the command's -I is not left behind
    assert main(["lint", "--rules", str(rules)]) == 2
    assert '#include "decls.dlh": no such file' in capsys.readouterr().err


def test_every_engine_takes_the_same_options():
    shapes = {name: list(inspect.signature(_cls(name).evaluate).parameters) for name in ENGINES}
    assert all(p == ["self", "facts", "targets", "base", "only"] for p in shapes.values()), shapes


def _cls(name):
    from importlib import import_module

    kind = ENGINE_TABLE[name]
    return getattr(import_module(kind.module), kind.cls)


@pytest.mark.parametrize("engine", [e for e in ENGINES if not ENGINE_TABLE[e].capabilities.incremental])
def test_an_engine_refuses_options_it_cannot_honour(engine):
    checked = check_rules(parse_text(ORD, "ord.dl"))
    with pytest.raises(ValueError, match="does not evaluate incrementally"):
        make_engine(engine, checked).evaluate({"s": set()}, only=frozenset({"o"}))


def test_options_say_what_they_ask():
    assert EngineOptions.of(["o"]).targets == ("o",)
    EngineOptions.of(["o"]).require(ENGINE_TABLE["pydatalog"].capabilities, "pydatalog")  # targets alone: fine


def test_the_deep_term_registry_lives_as_long_as_its_program():
    import gc

    deep = "x" + " + 1" * (expressions._DEEP + 5)
    text = f".decl s(x: number)\n.decl t(y: number)\nt({deep}) :- s(x).\n"
    before = len(expressions._DEEP_TERMS)
    for _ in range(3):  # three programs in turn, each evaluated and dropped
        checked = check_rules(parse_text(text, "deep.dl"))
        model = make_engine("compiled", checked).evaluate({"s": {(1,)}})
        assert set(model.tuples("t")) == {(1 + expressions._DEEP + 5,)}
        assert len(expressions._DEEP_TERMS) > before
        del checked, model
        gc.collect()
    assert len(expressions._DEEP_TERMS) == before


def test_the_trace_cache_is_bounded(monkeypatch):
    from tprules.frontends.source import trace

    monkeypatch.setattr(trace, "_traces", trace.OrderedDict())
    for i in range(trace.TRACES_KEPT + 3):
        trace._keep(("k", i), object())
    trace._keep(("k", 3), trace._traces[("k", 3)])  # used again: kept longest
    trace._keep(("k", 99), object())
    assert list(trace._traces) == [("k", i) for i in range(5, trace.TRACES_KEPT + 3)] + [("k", 3), ("k", 99)]
