"""Each reason of SPEC §3, where it holds and where it does not.

Each folder tests/data/reasons/<reason>/<variant>/ is a program (its .facts, one candidate
`f`) with the verdict worked out by hand in expected/legal.tsv and expected/refused.tsv
(Soufflé's output relations, sorted). Variant `holds` is a minimal program where the
reason holds, `not` a near-identical one where it does not; `holds-*`/`not-*` are edges
(relocated sections, a missing limit, ...). tests/data/reasons/generate.py documents how
the programs were made. Every engine and Soufflé must give exactly the expected verdict.
"""

from __future__ import annotations

import pytest
from conftest import DATA
from helpers import needs_souffle, read_tsv, souffle_verdicts, tprules_verdicts

from tprules.workspace import ENGINES

ROOT = DATA / "reasons"
CASES = sorted(p.parent for p in ROOT.glob("*/*/member.facts"))
IDS = [f"{c.parent.name}/{c.name}" for c in CASES]
SPEC_REASONS = ("collective_fold", "spans_chips", "chip_and_spine", "unsupported", "not_fusible",
                "too_many_members", "too_many_inputs", "too_many_matmuls", "quantized_inside", "cycle",
                "shared_partial", "too_narrow")


def expected(case):
    return read_tsv(case / "expected" / "legal.tsv"), read_tsv(case / "expected" / "refused.tsv")


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_verdict_is_the_hand_computed_one(case, engine):
    assert tprules_verdicts(case, engine) == expected(case)


@needs_souffle
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_souffle_gives_the_same_verdict(case, cli, tmp_path):
    assert souffle_verdicts(cli, case, tmp_path / "export") == expected(case)


@pytest.mark.parametrize("reason", SPEC_REASONS)
def test_every_reason_has_a_case_where_it_holds_and_one_where_it_does_not(reason):
    variants = {c.name: expected(c) for c in CASES if c.parent.name == reason}
    assert "holds" in variants and "not" in variants
    legal, refused = variants["holds"]
    assert legal == [] and refused == [f"f\t{reason}"], "`holds` shows this reason alone"
    assert variants["not"] == (["f"], []), "`not` is legal"


def test_several_reasons_are_all_reported():
    case = ROOT / "several_at_once" / "holds"
    _, refused = tprules_verdicts(case)
    assert len(refused) >= 5 and {line.split("\t")[1] for line in refused} >= {
        "collective_fold", "spans_chips", "chip_and_spine", "cycle", "too_many_matmuls"}


def test_holds_and_not_differ_only_a_little():
    """Near-identical programs: the same facts but for a few lines."""
    for reason in SPEC_REASONS:
        holds, other = ROOT / reason / "holds", ROOT / reason / "not"
        files = {p.name for p in holds.glob("*.facts")} | {p.name for p in other.glob("*.facts")}
        changed = 0
        for name in files:
            a = set((holds / name).read_text().splitlines()) if (holds / name).exists() else set()
            b = set((other / name).read_text().splitlines()) if (other / name).exists() else set()
            changed += len(a ^ b)
        assert 0 < changed <= 4, reason


def test_check_json_matches_the_case(cli):
    import json

    case = ROOT / "several_at_once" / "holds"
    status, out, err = cli("check", case, "--format", "json")
    assert (status, err) == (0, "")
    (fusion,) = json.loads(out)["fusions"]
    assert fusion["reasons"] == [line.split("\t")[1] for line in expected(case)[1]]
