"""Figures of `tprules import torch` at full size: Llama-3-70B's shape with torchtitan's TP plan
(facts/recipes/llama3_70b.py), no weights, at TP 8; then `check` and `plan` on the program.

    python benchmarks/bench_torch_import.py [--tp 8] [--seq 2048] [--repeat 1] [--work DIR]

Each command runs in its own process, start-up included, timed by wall clock, with its CPU
time and its own peak resident memory from GNU time (bench.py's `measure`). The best of
--repeat rounds is shown, each round every command once. Prints a Markdown table with
each command as it was run.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench import Row, measure, tprules  # noqa: E402

RECIPE = ROOT / "facts" / "recipes" / "llama3_70b.py"


def commands(out: Path, tp: int, seq: int) -> list[tuple[str, list[str]]]:
    """(step, command): the import writes `out`, which check and plan then read."""
    return [
        ("import", tprules("import", "torch", RECIPE.relative_to(ROOT), "--tp", tp, "--seq", seq, "--no-data",
                           "--no-verify", "--out", out)),
        ("check", tprules("check", out, "--format", "json")),
        ("plan", tprules("plan", out, "--format", "json")),
    ]


def shown(cmd: list[str], work: Path) -> str:
    """The command as a reader would type it (`tprules ...`, the work folder as DIR)."""
    words = ["tprules" if i == 0 else str(w) for i, w in enumerate(cmd[2:])]
    return " ".join(words).replace(str(work / "program"), "DIR")


def bench(work: Path, tp: int, seq: int, repeat: int, timeout: float) -> list[Row]:
    out = work / "program"
    steps = commands(out, tp, seq)
    rows = [Row("70b-torch", step, shown(cmd, work), []) for step, cmd in steps]
    for _ in range(repeat):
        for row, (step, cmd) in zip(rows, steps):
            if step == "import" and out.exists():
                shutil.rmtree(out)
            run = measure(cmd, work / f"{step}.out", timeout)
            row.runs.append(run)
            if run.status != 0:
                err = (work / f"{step}.err").read_text().strip().splitlines()
                row.note = err[-1] if err else f"exit {run.status}"
                for later in rows[rows.index(row) + 1:]:
                    later.note = f"not run: {step} failed"
                return rows  # check and plan need the import
    return rows


def table(rows: list[Row], tp: int, seq: int, repeat: int) -> str:
    lines = [f"Llama-3-70B's shape, torchtitan's TP plan, TP {tp}, sequence {seq}, no weights; "
             f"best of {repeat} (each command its own process, start-up included)", "",
             "| step | command | wall (s) | CPU (s) | peak memory (MiB) |", "|---|---|---:|---:|---:|"]
    for r in rows:
        best = min(r.ok, key=lambda x: x.wall_s) if r.ok else None
        if best is None:
            lines.append(f"| {r.tool} | `{r.command}` | {r.note if not r.runs else 'failed: ' + r.note} | | |")
            continue
        lines.append(f"| {r.tool} | `{r.command}` | {best.wall_s:.2f} | {best.cpu_s:.2f} | {best.peak_mib:.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tp", type=int, default=8)
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds a command may take")
    p.add_argument("--work", type=Path, help="a folder for the program (default: a temporary one)")
    args = p.parse_args(argv)
    if args.work is not None:
        args.work.mkdir(parents=True, exist_ok=True)
        rows = bench(args.work, args.tp, args.seq, args.repeat, args.timeout)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            rows = bench(Path(tmp), args.tp, args.seq, args.repeat, args.timeout)
    print(table(rows, args.tp, args.seq, args.repeat))
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
