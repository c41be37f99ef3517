"""`tprules lint`: every error class of the rule language and of fact files.

Each folder under tests/data/lint/ is one case, run from inside that folder as
`tprules lint [--rules rules] [facts]`:
- `rules/*.dl`: the rule files (when absent, the project's rules/);
- `facts/`: a program folder to check too (optional);
- `expected.txt`: exactly what lint writes on stderr, one line per problem naming
  file:line[:col] (one line for every case but `several_problems`).
Lint must exit 2 and write nothing on stdout.
"""

from __future__ import annotations

import pytest
from conftest import DATA, FACTS, RULES
from helpers import case_dirs, case_ids

CASES = case_dirs(DATA / "lint")


def lint_args(case) -> list[str]:
    args = ["lint", "--rules", "rules" if (case / "rules").is_dir() else str(RULES)]
    if (case / "facts").is_dir():
        args.append("facts")
    return args


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_lint_reports_the_error(case, cli, monkeypatch):
    monkeypatch.chdir(case)
    status, out, err = cli(*lint_args(case))
    assert (status, out) == (2, ""), err
    assert err == (case / "expected.txt").read_text()


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_each_problem_is_one_line_naming_file_and_line(case):
    lines = (case / "expected.txt").read_text().splitlines()
    assert len(lines) == (2 if case.name == "several_problems" else 1)
    for line in lines:
        where = line.split(": ", 1)[0].split(":")
        assert where[0].startswith(("rules/", "facts/")) and where[1].isdigit() and int(where[1]) >= 1, line
        if where[0].startswith("rules/"):
            assert len(where) == 3 and int(where[2]) >= 1, f"a rule error names file:line:col: {line}"


def test_lint_passes_the_project_rules_and_examples(cli):
    status, out, err = cli("lint")
    assert (status, err) == (0, "")
    assert out.startswith("ok: ")
    status, out, err = cli("lint", FACTS / "megatron-mlp-tp2")
    assert (status, err) == (0, "")
    assert "megatron-mlp-tp2" in out


def test_check_reports_rule_errors_like_lint(cli, monkeypatch):
    case = DATA / "lint" / "wrong_arity"
    monkeypatch.chdir(case)
    status, out, err = cli("check", "--rules", "rules", FACTS / "megatron-mlp-tp2")
    assert (status, out, err) == (2, "", (case / "expected.txt").read_text())


def test_a_fixed_rule_file_is_checked_again(cli, tmp_path, monkeypatch):
    """The checked program is cached by content: a fixed file must not be served stale."""
    rules = tmp_path / "rules"
    rules.mkdir()
    bad = (DATA / "lint" / "unsafe_head" / "rules" / "r.dl").read_text()
    (rules / "r.dl").write_text(bad)
    monkeypatch.chdir(tmp_path)
    assert cli("lint", "--rules", "rules")[0] == 2
    (rules / "r.dl").write_text(bad.replace("p(X, Y) :- q(X).", "p(X, X) :- q(X)."))
    status, out, err = cli("lint", "--rules", "rules")
    assert (status, err) == (0, "")
    (rules / "r.dl").write_text(bad)
    assert cli("lint", "--rules", "rules")[0] == 2


@pytest.mark.parametrize("missing", ["nowhere", "empty"])
def test_a_missing_or_empty_rules_folder_is_an_error(cli, tmp_path, monkeypatch, missing):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty").mkdir()
    status, out, err = cli("lint", "--rules", missing)
    assert (status, out) == (2, "")
    assert err.count("\n") == 1 and missing in err
