"""No process-wide state in the engines (issue 20): `ord`'s symbol table belongs to one
evaluation, the caches are bounded, and every engine takes the same explicit options."""

from __future__ import annotations

import inspect

import pytest

from tprules.datalog.analysis import check_rules
from tprules.datalog.engine import expressions
from tprules.datalog.engine.options import ENGINE_TABLE, EngineOptions
from tprules.datalog.lang import values
from tprules.datalog.lang.parser import parse_text
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
    with values.symbol_table(["q", "a"]):
        assert set(engine.evaluate({"s": {("a",)}}, targets=["o"]).tuples("o")) == {("a", 1)}
    assert set(engine.evaluate({"s": {("a",)}}, targets=["o"]).tuples("o")) == {("a", 0)}


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
    from tprules.frontends import trace

    monkeypatch.setattr(trace, "_traces", trace.OrderedDict())
    for i in range(trace.TRACES_KEPT + 3):
        trace._keep(("k", i), object())
    trace._keep(("k", 3), trace._traces[("k", 3)])  # used again: kept longest
    trace._keep(("k", 99), object())
    assert list(trace._traces) == [("k", i) for i in range(5, trace.TRACES_KEPT + 3)] + [("k", 3), ("k", 99)]
