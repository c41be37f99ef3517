"""The engines (fast, compiled, pydatalog), Soufflé, and the incremental path the planner uses
agree on random TP programs."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from conftest import FACTS
from helpers import needs_souffle, read_tsv, run_souffle, tprules_verdicts, verdict_lines
from hypothesis import HealthCheck, given, settings
from strategies import tp_programs

from tprules.golden.corpus import example_programs
from tprules.workspace import ENGINES, Workspace, load_checked_rules

EXAMPLES = example_programs(FACTS)

CHECKED = None


def checked():
    global CHECKED
    if CHECKED is None:
        CHECKED = load_checked_rules(None)
    return CHECKED


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tp_programs(max_statements=10))
def test_every_engine_gives_the_same_verdicts_and_places(builder):
    with tempfile.TemporaryDirectory() as tmp:
        program = builder.write(Path(tmp) / "p")
        fast, *others = (Workspace(program, engine=e, checked=checked()) for e in ENGINES)
        for other in others:
            assert other.verdicts() == fast.verdicts(), other.engine_name
            assert other.places() == fast.places(), other.engine_name


@pytest.mark.parametrize("engine", ["compiled", "pydatalog"])
@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_every_engine_gives_the_fast_verdicts_on_the_examples(example, engine):
    """On every shim the example is meant for (the fast engine's are pinned by tests/golden)."""
    from tprules.golden.corpus import meant_for

    for shim in meant_for(example):
        assert tprules_verdicts(example, engine, shim) == tprules_verdicts(example, "fast", shim), shim


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_asking_about_candidates_agrees_with_check(example, engine):
    ws = Workspace(example, engine=engine, checked=checked())
    verdicts = ws.verdicts()
    assert ws.ask({v.fusion: v.members for v in verdicts}) == {v.fusion: v.reasons for v in verdicts}


@needs_souffle
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tp_programs(max_statements=12))
def test_souffle_gives_the_same_verdicts(builder):
    from tprules.cli import main

    with tempfile.TemporaryDirectory() as tmp:
        program = builder.write(Path(tmp) / "p")
        assert main(["export", str(program), f"{tmp}/export"]) == 0
        run_souffle(Path(tmp) / "export" / "rules.dl", Path(tmp) / "export" / "facts", Path(tmp) / "export" / "out")
        souffle = read_tsv(Path(tmp) / "export/out/legal.csv"), read_tsv(Path(tmp) / "export/out/refused.csv")
        assert souffle == verdict_lines(Workspace(program, checked=checked()).verdicts())
