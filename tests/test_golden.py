"""The examples' verdicts, pinned: tests/golden/<example>/{legal,refused}.tsv (see its README)."""

from __future__ import annotations

import pytest

from conftest import FACTS, ROOT
from helpers import read_tsv, tprules_verdicts
from tprules.workspace import ENGINES

GOLDEN = ROOT / "tests" / "golden"
EXAMPLES = sorted(p for p in FACTS.iterdir() if p.is_dir() and p.name != "shims" and (p / "op.facts").exists())


def golden(example):
    return read_tsv(GOLDEN / example.name / "legal.tsv"), read_tsv(GOLDEN / example.name / "refused.tsv")


def test_every_example_has_golden_verdicts():
    assert EXAMPLES, "no example programs under facts/"
    assert sorted(p.name for p in GOLDEN.iterdir() if p.is_dir()) == [e.name for e in EXAMPLES]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_verdicts_match_golden(example, engine):
    legal, refused = golden(example)
    assert legal or refused, "an empty snapshot pins nothing"
    assert tprules_verdicts(example, engine) == (legal, refused)


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_golden_files_are_sorted_tsv(example):
    for name in ("legal.tsv", "refused.tsv"):
        lines = (GOLDEN / example.name / name).read_text().splitlines()
        assert lines == sorted(lines) and all(line.count("\t") == (name == "refused.tsv") for line in lines)
