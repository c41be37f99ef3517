"""Run the data-driven explanation cases: `tests/data/why/<case>/` and `tests/data/repl/<case>/`.

A why case holds `args` (one command-line argument per line, after `tprules why`) and the
expected `expected.out`, plus `expected.err` and `status` when it is an error. A REPL case
holds `session.in` (piped to `tprules repl`), `args` (the program folder and options) and
`expected.out`. Cases run from the project root so paths print as the README shows them.

Regenerate after a deliberate change, then read the diff: `python tests/explain_cases.py`.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"


def why_cases() -> list[Path]:
    return sorted(p for p in (DATA / "why").iterdir() if (p / "args").exists())


def repl_cases() -> list[Path]:
    return sorted(p for p in (DATA / "repl").iterdir() if (p / "session.in").exists())


def _args(case: Path) -> list[str]:
    path = case / "args"
    return path.read_text().splitlines() if path.exists() else []


def run_case(case: Path) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of one case, run in-process from the project root."""
    from tprules.cli import main

    kind = case.parent.name
    argv = [kind, *_args(case)]
    stdin = (case / "session.in").read_text() if kind == "repl" else ""
    out, err = io.StringIO(), io.StringIO()
    saved = os.getcwd(), sys.stdin
    try:
        os.chdir(ROOT)
        sys.stdin = io.StringIO(stdin)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main(argv)
    finally:
        os.chdir(saved[0])
        sys.stdin = saved[1]
    return status, out.getvalue(), err.getvalue()


def expected(case: Path) -> tuple[int, str, str]:
    status = int((case / "status").read_text()) if (case / "status").exists() else 0
    err = (case / "expected.err").read_text() if (case / "expected.err").exists() else ""
    return status, (case / "expected.out").read_text(), err


def update(case: Path) -> None:
    status, out, err = run_case(case)
    (case / "expected.out").write_text(out)
    for name, content, keep in (("expected.err", err, bool(err)), ("status", f"{status}\n", status != 0)):
        path = case / name
        if keep:
            path.write_text(content)
        elif path.exists():
            path.unlink()


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("TPRULES_CACHE_DIR", str(Path("/tmp") / "tprules-explain-cases"))
    wanted = set(sys.argv[1:])
    for case in why_cases() + repl_cases():
        if not wanted or case.name in wanted:
            update(case)
            print(f"wrote {case.relative_to(ROOT)}")
