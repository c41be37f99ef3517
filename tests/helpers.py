"""Helpers shared by the data-driven tests: relations as sorted TSV lines, and Soufflé.

A relation is compared as the lines Soufflé writes for it: one tuple per line, columns
separated by a TAB, a zero-arity tuple as `()`, lines sorted by character code
(`LC_ALL=C sort`).
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from pathlib import Path

import pytest


def tsv_lines(tuples) -> list[str]:
    """Tuples as sorted TSV lines, the way Soufflé's `.output` writes them."""
    return sorted("\t".join(str(c) for c in t) if t else "()" for t in tuples)


def read_tsv(path: Path) -> list[str]:
    """The non-empty lines of a TSV file, sorted."""
    return sorted(line for line in Path(path).read_text().split("\n") if line)


def case_dirs(root: Path) -> list[Path]:
    """The case folders under `root`, sorted by name (one test per folder)."""
    return sorted(p for p in Path(root).iterdir() if p.is_dir())


def case_ids(cases: list[Path]) -> list[str]:
    return [p.name for p in cases]


SOUFFLE = shutil.which("souffle")

needs_souffle = pytest.mark.skipif(SOUFFLE is None, reason="souffle is not on PATH")


@functools.lru_cache(maxsize=1)
def souffle_word_size() -> int:
    """The installed Soufflé's domain width (`souffle --version`: "Word size: 32 bits")."""
    done = subprocess.run([SOUFFLE, "--version"], capture_output=True, text=True, timeout=60)
    found = re.search(r"Word size: (\d+)", done.stdout + done.stderr)
    return int(found.group(1)) if found else 64


def skip_unless_64_bit(case: Path) -> None:
    """Skip a case whose values need Soufflé built with 64-bit domains (its `souffle-64.txt`
    says which) when the installed Soufflé's are 32 bits wide (cmake's default for 2.5)."""
    why = case / "souffle-64.txt"
    if why.exists() and souffle_word_size() < 64:
        pytest.skip(f"this souffle has {souffle_word_size()}-bit domains: {why.read_text().strip()}")


def run_souffle(program: Path, facts: Path, out: Path) -> None:
    """Run a rule file on Soufflé's interpreter: `souffle -F facts -D out program`."""
    out.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([SOUFFLE, "-w", "-F", str(facts), "-D", str(out), str(program)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"souffle failed on {program}:\n{done.stderr}"


# ---- verdicts as Soufflé's output relations ----------------------------------------


def verdict_lines(verdicts) -> tuple[list[str], list[str]]:
    """`legal` and `refused` of a list of Verdicts, as sorted TSV lines."""
    legal = tsv_lines((v.fusion,) for v in verdicts if v.legal)
    refused = tsv_lines((v.fusion, r) for v in verdicts for r in v.reasons)
    return legal, refused


def tprules_verdicts(program: Path, engine: str = "fast", shim: str | None = None) -> tuple[list[str], list[str]]:
    from tprules.workspace import Workspace

    return verdict_lines(Workspace(program, shim=shim, engine=engine).verdicts())


def souffle_verdicts(cli, program: Path, work: Path, shim: str | None = None) -> tuple[list[str], list[str]]:
    """`tprules export` the program, run the exported rules on Soufflé, read legal and refused."""
    status, _, err = cli("export", program, work, *(["--shim", shim] if shim else []))
    assert status == 0, err
    run_souffle(work / "rules.dl", work / "facts", work / "out")
    return read_tsv(work / "out" / "legal.csv"), read_tsv(work / "out" / "refused.csv")
