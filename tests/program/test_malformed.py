"""Malformed programs (SPEC §2): each is refused with one line naming file and line, exit 2.

Each folder under tests/data/malformed/ is one case, run from inside that folder as
`tprules check program [ARGS]` and `tprules lint program [ARGS]`:
- `program/`: the small valid program of case `valid` with one violation
  (tests/data/malformed/generate.py shows how each was made);
- `args.txt`: extra arguments (optional);
- `expected.txt`: exactly what is written on stderr (`{root}` is the project folder);
  empty for `valid`, which must be judged.
"""

from __future__ import annotations

import pytest
from conftest import DATA, ROOT
from helpers import case_dirs, case_ids

from tprules import ops

CASES = case_dirs(DATA / "malformed")


def expected(case) -> str:
    return (case / "expected.txt").read_text().replace("{root}", str(ROOT))


def args(case) -> list[str]:
    extra = case / "args.txt"
    return extra.read_text().split() if extra.exists() else []


@pytest.mark.parametrize("command", ["check", "lint"])
@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_malformed_program_is_refused(case, command, cli, monkeypatch):
    monkeypatch.chdir(case)
    status, out, err = cli(command, "program", *args(case))
    if case.name.startswith("valid"):
        assert (status, err) == (0, "")
        assert out
        return
    assert (status, out) == (2, ""), err
    assert err == expected(case)


@pytest.mark.parametrize("case", [c for c in CASES if not c.name.startswith("valid")], ids=lambda c: c.name)
def test_message_is_one_line_naming_a_fact_file(case):
    lines = expected(case).splitlines()
    assert len(lines) == 1
    if case.name == "unknown_shim":  # a flag, not a fact line: it names the flag and the known shims
        assert lines[0].startswith("usage: --shim ") and "cuda-lane:h100:Bf16" in lines[0]
        return
    where = lines[0].split(": ", 1)[0]
    assert where.startswith("program/") and ".facts" in where, lines[0]
    if case.name != "no_chips_fact":  # a missing file has no line to name
        assert where.rsplit(":", 1)[1].isdigit(), lines[0]


def test_every_case_differs_from_valid_in_few_lines():
    """Near-identical to the valid program, so each case shows one violation only."""
    def lines(folder):
        return {p.name: set(p.read_text().splitlines()) for p in (folder / "program").iterdir()}

    for case in CASES:
        # a reduce-scatter's cases differ from the valid one of their own (SPEC §1)
        scatter = case.name == "valid_reduce_scatter" or case.name.startswith("scatter_")
        valid = lines(DATA / "malformed" / ("valid_reduce_scatter" if scatter else "valid"))
        mine = lines(case)
        changed = sum(len(mine.get(f, set()) ^ valid.get(f, set())) for f in set(mine) | set(valid))
        limit = len(ops.CLASSES) + 5 if case.name.startswith("shim_") else 8  # a shim of its own answers every class
        assert changed <= limit, case.name
