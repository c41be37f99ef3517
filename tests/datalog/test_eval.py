"""`tprules eval`: Soufflé's command-line shape over any rule program.

Each folder under tests/data/eval/ is one case, run from inside that folder:
- `command.txt`: the command line (`{out}` stands for a fresh output folder); without an
  `--engine`, the case runs on every engine (or those `engines.txt` names) and each must
  give the same output;
- `expected/`: exactly the files eval writes into `{out}` (none for a failing case);
- `stdout.txt`: exactly what it prints (nothing when absent);
- `stderr.txt`: for a case that fails, the one line on stderr; exit status 2.
"""

from __future__ import annotations

import shlex

import pytest
from conftest import DATA
from helpers import SOUFFLE, case_dirs, case_ids, needs_souffle, skip_unless_64_bit

from tprules.workspace import ENGINES

CASES = case_dirs(DATA / "eval")


def engines(case) -> list[str]:
    if "--engine" in (case / "command.txt").read_text():
        return ["given"]
    return (case / "engines.txt").read_text().split() if (case / "engines.txt").exists() else list(ENGINES)


RUNS = [(case, engine) for case in CASES for engine in engines(case)]


def files(folder) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(folder.iterdir())} if folder.is_dir() else {}


@pytest.mark.parametrize("case, engine", RUNS, ids=[f"{c.name}-{e}" for c, e in RUNS])
def test_eval_case(case, engine, cli, monkeypatch, tmp_path):
    monkeypatch.chdir(case)
    out = tmp_path / "out"
    args = [a.replace("{out}", str(out)) for a in shlex.split((case / "command.txt").read_text())]
    if engine != "given":
        args += ["--engine", engine]
    status, stdout, stderr = cli(*args)
    failing = (case / "stderr.txt").exists()
    assert status == (2 if failing else 0), stderr
    assert stderr == ((case / "stderr.txt").read_text() if failing else "")
    assert stdout == ((case / "stdout.txt").read_text() if (case / "stdout.txt").exists() else "")
    assert files(out) == files(case / "expected")


FAILING = [c for c in CASES if (c / "stderr.txt").exists()]


@pytest.mark.parametrize("case", FAILING, ids=case_ids(FAILING))
def test_a_failing_case_is_one_line_naming_where(case):
    (line,) = (case / "stderr.txt").read_text().splitlines()
    assert line.startswith(("program.dl:", "facts/", "usage: ")), line


def _souffle_cases() -> list:
    """The cases that succeed with `eval PROGRAM.dl [-I DIR] [-F DIR] -D ...` on every engine
    (no tprules-only option): Soufflé runs each the same way. `no-souffle.txt` says why a
    case is left out (a functor Soufflé does not have, say)."""
    found = []
    for case in CASES:
        words = shlex.split((case / "command.txt").read_text())
        if (case / "stderr.txt").exists() or (case / "no-souffle.txt").exists() or "--engine" in words:
            continue
        if words[0] == "eval" and words[1].endswith(".dl") and "--magic-transform" not in words and "-D" in words:
            found.append(case)
    return found


def _printed(text: str) -> dict[str, str]:
    """`-D -` output by relation (Soufflé prints each when its stratum is done, tprules in
    the order of the `.output` lines)."""
    blocks = text.split("---------------\n")
    return {block.split("\n", 1)[0]: block for block in blocks if block.strip()}


@needs_souffle
@pytest.mark.parametrize("case", _souffle_cases(), ids=case_ids(_souffle_cases()))
def test_souffle_gives_the_case_the_same_output(case, tmp_path):
    """Soufflé 2.5 on the same program, facts and options writes the same relations."""
    import subprocess

    skip_unless_64_bit(case)
    words = shlex.split((case / "command.txt").read_text())[1:]
    out = tmp_path / "out"
    out.mkdir()
    args = [a.replace("{out}", str(out)) for a in words]
    done = subprocess.run([SOUFFLE, "-w", *args], cwd=case, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    printed = (case / "stdout.txt").read_text() if (case / "stdout.txt").exists() else ""
    assert _printed(done.stdout) == _printed(printed)
    expected = files(case / "expected")
    assert {name: sorted(text.splitlines()) for name, text in files(out).items()} == \
        {name: sorted(text.splitlines()) for name, text in expected.items()}
