"""Collective kernels (SPEC §3; rules/collective.dl) against the rules without them.

The rules before collective kernels are the project's rules less collective.dl and less the
`!kernel(F, _)` that tp.dl's three TP reasons now end in. Against them:
- on every example and every shim it is meant for, the only verdicts that differ are those
  of candidates that are exactly a pattern the shim declares (`tprules diff`);
- on random TP programs with candidates around each collective, under the shim that
  declares every pattern, every candidate that is not a kernel gets the verdict it got
  before, every kernel gets none of the three TP reasons and the same base reasons, and the
  three engines agree.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from conftest import FACTS, ROOT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import tp_programs

from tprules.program.builder import ProgramBuilder
from tprules.workspace import ENGINES, Workspace, load_checked_rules

H200 = "cuda-lane:h200:Bf16SymmMem"
TP_REASONS = {"collective_fold", "spans_chips", "chip_and_spine"}
GUARDS = {"shared_partial", "too_narrow"}


def rules_before(target: Path) -> Path:
    """The project's rules as they were before collective kernels."""
    shutil.copytree(ROOT / "rules", target)
    (target / "collective.dl").unlink()
    tp = target / "tp.dl"
    assert tp.read_text().count(", !kernel(F, _).") == 3
    tp.write_text(tp.read_text().replace(", !kernel(F, _).", "."))
    return target


@pytest.fixture(scope="module")
def before(tmp_path_factory):
    return rules_before(tmp_path_factory.mktemp("before") / "rules")


@pytest.mark.parametrize("engine", ["fast", "pydatalog"])
def test_only_kernels_of_a_declaring_shim_differ_on_the_examples(cli, before, engine):
    status, out, err = cli("diff", "--old", before, "--new", ROOT / "rules", FACTS, "--format", "json",
                           "--engine", engine)
    assert status == 1, err
    report = json.loads(out)
    changed = {(c["program"].rsplit("/", 1)[-1], c["shim"], c["fusion"]) for c in report["changes"]}
    assert len(report["judged"]) >= 13  # every example on every shim it is meant for
    kernels = {("async-tp-mlp-tp2", H200, f) for f in ("ag_mm1", "mm2_rs", "ar_res_norm", "ag_cols_down", "down_rs2")}
    assert changed == kernels


def _kernel_shaped(b, draw) -> None:
    """Candidates around each fold of a random program: the fold with its readers and/or
    the writers of its operands, whole or with one left out (many are exactly a pattern)."""
    folds = [o for o, _ in b.facts["fold"]]
    writer = {t: o for o, t in b.facts["writes"]}
    readers: dict[str, list[str]] = {}
    for o, _, t in b.facts["reads"]:
        readers.setdefault(t, []).append(o)
    for k, fold in enumerate(folds):
        out = next(t for o, t in b.facts["writes"] if o == fold)
        after = sorted(set(readers.get(out, [])))
        before = sorted({writer[t] for o, _, t in b.facts["reads"] if o == fold and t in writer})
        members = [fold] + draw(st.sampled_from([after, before, after + before]))
        if len(members) > 2 and draw(st.booleans()):
            members.pop(draw(st.integers(1, len(members) - 1)))
        if len(set(members)) >= 2:
            b.candidate(f"k{k}", sorted(set(members)))


@st.composite
def collective_programs(draw) -> ProgramBuilder:
    """A random collective with what a kernel of its pattern would hold, and what would
    spoil it: chips 2..4; an all-gather of blocks 1023..1025 rows wide into per-chip matmuls
    (operand 0 or 1), a reduce-scatter of per-chip matmuls' partials into blocks 1023 or 1024
    rows wide (a probe may read a partial), or an all-reduce into 0..2 residual adds and an
    RMSNorm. Candidate `exact` holds the collective with all of them (`is_pattern`: whether
    that is the pattern: chip 0's matmul reads operand 0, at most one add), and random
    subsets of the statements are candidates too."""
    n = draw(st.integers(2, 4))
    b = ProgramBuilder(chips=n)
    kind = draw(st.sampled_from(["all_gather", "reduce_scatter", "all_reduce"]))
    if kind == "all_gather":
        rows = [draw(st.sampled_from([1023, 1024, 1025])) for _ in range(n)]
        xs = [b.tensor(f"x{c}", [r, 4], chip=c) for c, r in enumerate(rows)]
        x = b.gather("fold", xs, b.tensor("x", [sum(rows), 4], spine=True), "c", axis=0)
        pattern = draw(st.booleans())  # chip 0's matmul reads the gathered x as operand 0
        for c in range(n):
            first = pattern or c > 0
            w = b.tensor(f"w{c}", [4, 4] if first else [4, sum(rows)], chip=c)
            b.stmt(f"mm{c}", "matmul", [x, w] if first else [w, x], b.tensor(f"h{c}", [sum(rows) if first else 4, 4], chip=c))
        exact = ["fold"] + [f"mm{c}" for c in range(n)]
    elif kind == "reduce_scatter":
        block = draw(st.sampled_from([1023, 1024]))
        parts = [b.stmt(f"mm{c}", "matmul", [b.tensor(f"x{c}", [n * block, 4], chip=c),
                                              b.tensor(f"w{c}", [4, 4], chip=c)],
                        b.tensor(f"p{c}", [n * block, 4], chip=c)) for c in range(n)]
        b.reduce_scatter("fold", parts, b.tensor("y", [n * block, 4], spine=True), "c", axis=0,
                         blocks=[b.tensor(f"y{c}", [block, 4], chip=c) for c in range(n)])
        if draw(st.booleans()):
            b.stmt("probe", "relu", ["p0"], b.tensor("q", [n * block, 4], chip=0))
        exact, pattern = [f"mm{c}" for c in range(n)] + ["fold"] + [f"fold_{c}" for c in range(n)], True
    else:
        x = b.tensor("x", [4, 8], spine=True)
        parts = [b.stmt(f"mm{c}", "matmul", [x, b.tensor(f"w{c}", [8, 8], chip=c)], b.tensor(f"p{c}", [4, 8], chip=c))
                 for c in range(n)]
        prev = b.fold("fold", parts, b.tensor("y", [4, 8], spine=True), "c")
        adds = draw(st.integers(0, 2))
        for i in range(adds):
            prev = b.stmt(f"res{i}", "add", [prev, x], b.tensor(f"r{i}", [4, 8], spine=True))
        b.stmt("norm", "rmsnorm", [prev, b.tensor("nw", [8], spine=True)], b.tensor("nrm", [4, 8], spine=True))
        exact, pattern = ["fold"] + [f"res{i}" for i in range(adds)] + ["norm"], adds <= 1
    b.candidate("exact", exact)
    b.is_pattern = pattern  # type: ignore[attr-defined]
    for j in range(draw(st.integers(0, 4))):
        b.candidate(f"f{j}", draw(st.lists(st.sampled_from(b.statements), min_size=2, max_size=6, unique=True)))
    return b


def _judge_against_before(before: Path, b: ProgramBuilder) -> set[str]:
    """Assert the properties above on one program; the kernels found."""
    b.add_facts("shim", [(H200,)])
    with tempfile.TemporaryDirectory() as tmp:
        program = b.write(Path(tmp) / "p")
        now = [Workspace(program, engine=e) for e in ENGINES]
        old = Workspace(program, checked=load_checked_rules(before))
        verdicts = {v.fusion: v.reasons for v in now[0].verdicts()}
        for other in now[1:]:
            assert {v.fusion: v.reasons for v in other.verdicts()} == verdicts, other.engine_name
        kernels = {f for f, _ in now[0].model.tuples("kernel")}
        for v in old.verdicts():
            if v.fusion in kernels:
                assert not TP_REASONS & set(verdicts[v.fusion])
                assert set(verdicts[v.fusion]) - GUARDS == set(v.reasons) - TP_REASONS, v.fusion
            else:
                assert verdicts[v.fusion] == v.reasons, v.fusion
        return kernels


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_tp_programs_answer_every_non_kernel_as_before(before, data):
    b = data.draw(tp_programs(max_statements=10))
    _kernel_shaped(b, data.draw)
    _judge_against_before(before, b)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(collective_programs())
def test_random_collectives_are_kernels_exactly_when_they_are_the_pattern(before, b):
    kernels = _judge_against_before(before, b)
    assert ("exact" in kernels) == b.is_pattern  # the pattern, whatever its guards say
