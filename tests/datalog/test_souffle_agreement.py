"""Soufflé itself, where installed, derives what tprules derives: on the examples through
`tprules export`, and on random rule sets. Skipped when `souffle` is not on PATH."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from conftest import FACTS
from hypothesis import HealthCheck, given, settings
from strategies import rule_sets

from tprules.datalog.analysis import check_rules
from tprules.datalog.lang.parser import parse_text
from tprules.workspace import ENGINES, Workspace, make_engine

SOUFFLE = shutil.which("souffle")
pytestmark = pytest.mark.skipif(SOUFFLE is None, reason="souffle is not on PATH")

EXAMPLES = sorted(p.name for p in FACTS.iterdir() if (p / "op.facts").exists())


def run_souffle(rules: Path, facts: Path, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([SOUFFLE, "-F", str(facts), "-D", str(out), str(rules)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def read_output(path: Path, types: tuple[str, ...]) -> set[tuple]:
    if not path.exists():
        return set()
    rows = [line for line in path.read_text().split("\n") if line]
    if not types:  # Soufflé writes `()` for a true nullary relation
        return {()} if rows else set()
    return {tuple(int(c) if t == "number" else c for c, t in zip(line.split("\t"), types)) for line in rows}


@pytest.mark.parametrize("example", EXAMPLES)
def test_examples_agree_with_souffle(cli, tmp_path, example):
    status, _, err = cli("export", FACTS / example, tmp_path)
    assert (status, err) == (0, "")
    run_souffle(tmp_path / "rules.dl", tmp_path / "facts", tmp_path / "out")
    ws = Workspace(FACTS / example)
    for rel in ws.checked.outputs:
        assert read_output(tmp_path / "out" / f"{rel}.csv", ws.checked.decls[rel].types) == ws.model.tuples(rel), rel


@settings(max_examples=200, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rule_set=rule_sets(souffle_compatible=True))
def test_random_rule_sets_agree_with_souffle(rule_set):
    checked = check_rules(parse_text(rule_set.text, "random.dl"))
    models = {engine: make_engine(engine, checked).evaluate(rule_set.facts) for engine in ("fast", "compiled")}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "rules.dl").write_text(rule_set.text + "".join(f".output {rel}\n" for rel in rule_set.idb))
        (tmp / "facts").mkdir()
        for rel, tuples in rule_set.facts.items():
            (tmp / "facts" / f"{rel}.facts").write_text("".join("\t".join(map(str, t)) + "\n" for t in tuples))
        run_souffle(tmp / "rules.dl", tmp / "facts", tmp / "out")
        for rel, types in rule_set.idb.items():
            for engine, model in models.items():
                assert read_output(tmp / "out" / f"{rel}.csv", types) == model.tuples(rel), (engine, rel, rule_set.text)


TARGET_SCOPING = """
.decl e(a: number)
.input e
.decl p(a: number)
p(1).
.decl smallest(a: number, n: number)
.output smallest
smallest(X, N) :- p(X), N = min X : { e(X) }.
"""


@pytest.mark.parametrize("engine", ENGINES)
def test_an_aggregate_target_bound_outside_is_the_aggregates_own_as_in_souffle(tmp_path, engine):
    # Soufflé 2.5 makes a variable of an aggregate's target local to the aggregate even when
    # the rule binds it outside (souffle PR #1693): (1, 0) here, where binding it outside
    # would mean (1, 1). tprules reads it the same way.
    checked = check_rules(parse_text(TARGET_SCOPING, "scoping.dl"))
    model = make_engine(engine, checked).evaluate({"e": {(0,), (1,), (2,)}})
    assert model.tuples("smallest") == {(1, 0)}
    (tmp_path / "rules.dl").write_text(TARGET_SCOPING)
    (tmp_path / "facts").mkdir()
    (tmp_path / "facts" / "e.facts").write_text("0\n1\n2\n")
    run_souffle(tmp_path / "rules.dl", tmp_path / "facts", tmp_path / "out")
    assert read_output(tmp_path / "out" / "smallest.csv", ("number", "number")) == {(1, 0)}
