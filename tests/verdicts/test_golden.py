"""Golden snapshots of every example program, one test per program (see tests/golden/README.md).

Each program under facts/ (the shim library facts/shims/ excepted) has, for every shim it
is meant for, `legal.tsv`, `refused.tsv` and `groups.tsv` in tests/golden/<program>/<shim>/.
A mismatch fails with the tuples added and removed, each changed verdict with its one-line
explanation. After a deliberate change: `tprules golden --update` (or this file with
`pytest --update-golden`), then review `git diff tests/golden`.
"""

from __future__ import annotations

import pytest
from conftest import FACTS, ROOT
from helpers import read_tsv

from tprules.golden.check import Golden
from tprules.golden.corpus import example_programs, targets
from tprules.golden.render import golden_text

GOLDEN = ROOT / "tests" / "golden"
EXAMPLES = example_programs(FACTS)


@pytest.fixture(scope="module")
def golden(request):
    return Golden(GOLDEN, update=request.config.getoption("--update-golden"))


def _report(golden, capsys, results, stale=()):
    """Pass when everything matches; print what was rewritten under --update-golden."""
    text = golden_text(results, stale, golden.update,
                       "tprules golden --update  (or: python -m pytest tests/verdicts/test_golden.py --update-golden)",
                       golden.snapshots)
    if golden.update:
        golden.commit()
        with capsys.disabled():  # shown without -s: what changed is the point
            print("\n" + text, end="")
        return
    if any(not r.ok for r in results) or stale:
        pytest.fail(text, pytrace=False)


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_golden(example, golden, capsys):
    result = golden.program(example)
    assert result.snapshots, "a program with no snapshot pins nothing"
    _report(golden, capsys, [result])


def test_no_stale_snapshots(golden, capsys):
    assert EXAMPLES, "no example programs under facts/"
    _report(golden, capsys, [], golden.stale_programs(EXAMPLES))


def test_every_reason_is_pinned():
    """The snapshots refuse for every reason of SPEC §3 somewhere (else a rule could vanish unnoticed)."""
    from test_reasons import SPEC_REASONS

    seen = {line.split("\t")[1] for e in EXAMPLES for t in targets(e, GOLDEN)
            for line in read_tsv(t.folder / "refused.tsv")}
    assert seen == set(SPEC_REASONS)
