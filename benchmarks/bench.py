"""Time tprules at model scale, beside Soufflé, clingo and plain pyDatalog on the same facts.

    python benchmarks/bench.py                      # 70b and 405b, median of 3 runs
    python benchmarks/bench.py --sizes small -r 1   # a quick look
    python benchmarks/bench.py --json figures.json  # also save every measurement

For each size it writes the program (benchmarks/generate.py), then runs each command as
its own process, start-up included, and records wall time and peak memory (the child's
maximum resident set, from GNU time):

- load         `tprules lint DIR`: rules parsed and checked (lint skips the cache), facts read and checked
- check        `tprules check DIR --format json`
- plan         `tprules plan DIR --format json`
- why-legal    `tprules why DIR 'legal("F")'` for a legal candidate F from the middle of the program
- why-refused  `tprules why DIR 'refused("F", R)'` for a refused one (every reason, each with its proof)
- souffle      `souffle -F facts -D out rules.dl` on `tprules export DIR` (when souffle is on PATH)
- clingo       `python -m clingo rules.lp facts.lp` on the rules translated by tprules/engine/asp.py
- pydatalog    `tprules check DIR --engine pydatalog` (one run, with a timeout; --pydatalog-sizes)

A command that does not exist yet is skipped with a note.

Each command runs --repeat times and the median is reported: this machine is shared and
noisy, so the ratios matter more than single timings. The verdicts of Soufflé and clingo
are compared with tprules' (`agree`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.generate import SIZES, generate  # noqa: E402

PY = sys.executable
TARGETS = {"70b": 1.0, "405b": 2.5}  # seconds for `check` (issue 8), and 1 GiB peak memory
MEMORY_TARGET_MIB = 1024
TIME = "/usr/bin/time" if Path("/usr/bin/time").exists() else None  # GNU time, for peak memory


@dataclass
class Run:
    wall_s: float
    peak_mib: float
    status: int  # exit status; -9 when killed at the timeout


@dataclass
class Row:
    size: str
    tool: str
    command: str
    runs: list[Run]
    note: str = ""

    @property
    def ok(self) -> list[Run]:
        return [r for r in self.runs if r.status == 0]

    @property
    def wall(self) -> float | None:
        return statistics.median(r.wall_s for r in self.ok) if self.ok else None

    @property
    def peak(self) -> float | None:
        return statistics.median(r.peak_mib for r in self.ok) if self.ok else None


def measure(cmd: list[str], stdout: Path, timeout: float | None = None) -> Run:
    """Run `cmd` once: its wall time and its own peak resident memory.

    The peak comes from /usr/bin/time (GNU time), which forks the command from a small
    process: a child forked from this (large) Python process would report at least the
    parent's memory, since Linux carries the resident high-water mark across exec.
    """
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    rusage = stdout.with_suffix(".time")
    wrapped = [TIME, "-f", "%M", "-o", str(rusage), *map(str, cmd)] if TIME else list(map(str, cmd))
    with open(stdout, "wb") as out, open(stdout.with_suffix(".err"), "wb") as err:
        started = time.perf_counter()
        proc = subprocess.Popen(wrapped, stdout=out, stderr=err, cwd=ROOT, env=env, start_new_session=True)
        try:
            status = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the command and GNU time around it
            proc.wait()
            status = -9
        wall = time.perf_counter() - started
    peak = float("nan")
    if TIME and status >= 0:
        last = rusage.read_text().split()[-1]
        peak = int(last) / 1024 if last.isdigit() else peak
    return Run(round(wall, 3), round(peak, 1), status)


def tprules(*args: str) -> list[str]:
    return [PY, "-m", "tprules", *map(str, args)]


def available_commands() -> tuple[str, ...]:
    from tprules.commands import COMMANDS

    return COMMANDS


def prepare(size: str, work: Path) -> dict:
    """Write the program, the Soufflé export and the clingo translation; warm the rules cache."""
    base = work / size
    if base.exists():
        shutil.rmtree(base)
    started = time.perf_counter()
    b = generate(size, base / "program")
    info = {"generate_s": round(time.perf_counter() - started, 2), "statements": len(b.statements),
            "candidates": len({f for f, _ in b.facts["member"]}), "chips": b.chips}
    subprocess.run(tprules("lint", base / "program"), check=True, cwd=ROOT, capture_output=True,
                   env=dict(os.environ, PYTHONPATH=str(ROOT)))  # fills the rules cache, as in daily use
    subprocess.run(tprules("export", base / "program", base / "souffle"), check=True, cwd=ROOT, capture_output=True,
                   env=dict(os.environ, PYTHONPATH=str(ROOT)))
    write_clingo(base / "program", base / "clingo")
    return info


def write_clingo(program: Path, out: Path) -> None:
    from tprules.engine.asp import facts_to_asp, program_to_asp
    from tprules.workspace import Workspace

    ws = Workspace(program)
    out.mkdir(parents=True, exist_ok=True)
    (out / "rules.lp").write_text(program_to_asp(ws.checked, show=("legal", "refused")))
    (out / "facts.lp").write_text(facts_to_asp({r: ws.program.facts.ordered(r) for r in ws.checked.inputs}))


def pick(check_json: Path, legal: bool) -> str | None:
    """A legal (or refused) candidate from the middle of the program, for `why`."""
    fusions = [f["fusion"] for f in json.loads(check_json.read_text())["fusions"] if f["legal"] == legal]
    return fusions[len(fusions) // 2] if fusions else None


def run_row(size: str, tool: str, cmd: list[str], work: Path, repeat: int, timeout: float | None) -> Row:
    runs = []
    for i in range(repeat):
        run = measure(cmd, work / f"{tool}.{i}.out", timeout)
        runs.append(run)
        if run.status != 0:
            break
    shown = " ".join(str(c).replace(str(ROOT) + "/", "") for c in cmd).replace(PY, "python")
    note = ""
    if runs[-1].status != 0:
        note = f"timed out after {timeout:.0f} s" if runs[-1].status < 0 else f"exit {runs[-1].status}"
    return Row(size, tool, shown, runs, note)


# -- answers, to check that every engine says the same --------------------------------


def verdicts_tprules(path: Path) -> tuple[set, set]:
    data = json.loads(path.read_text())
    legal = {f["fusion"] for f in data["fusions"] if f["legal"]}
    refused = {(f["fusion"], r) for f in data["fusions"] for r in f["reasons"]}
    return legal, refused


def verdicts_souffle(out: Path) -> tuple[set, set]:
    def rows(name):
        text = (out / f"{name}.csv").read_text()
        return [line.split("\t") for line in text.splitlines() if line]

    return {r[0] for r in rows("legal")}, {(r[0], r[1]) for r in rows("refused")}


_ATOM = re.compile(r'(legal|refused)\(("(?:[^"\\]|\\.)*")(?:,("(?:[^"\\]|\\.)*"))?\)')


def verdicts_clingo(path: Path) -> tuple[set, set]:
    legal, refused = set(), set()
    for rel, a, b in _ATOM.findall(path.read_text()):
        if rel == "legal":
            legal.add(json.loads(a))
        else:
            refused.add((json.loads(a), json.loads(b)))
    return legal, refused


# -- one size ---------------------------------------------------------------------------


def bench_size(size: str, work: Path, repeat: int, timeout: float, pydatalog: bool, log) -> tuple[dict, list[Row]]:
    info = prepare(size, work)
    log(f"{size}: {info['statements']} statements, {info['candidates']} candidates, {info['chips']} chips "
        f"(written in {info['generate_s']} s)")
    base = work / size
    program = base / "program"
    commands = available_commands()
    rows: list[Row] = []

    def add(tool, cmd, reps=repeat, limit=timeout):
        row = run_row(size, tool, cmd, base, reps, limit)
        rows.append(row)
        shown = f"{row.wall:.2f} s, {row.peak:.0f} MiB" if row.wall is not None else row.note
        log(f"  {tool:<10} {shown}")
        return row

    add("load", tprules("lint", program))
    check = add("check", tprules("check", program, "--format", "json"))
    if "plan" in commands:
        add("plan", tprules("plan", program, "--format", "json"))
    else:
        rows.append(Row(size, "plan", "tprules plan", [], "command not built yet"))
    for tool, legal in (("why-legal", True), ("why-refused", False)):
        fusion = pick(base / "check.0.out", legal) if check.ok else None
        if "why" not in commands or fusion is None:
            rows.append(Row(size, tool, "tprules why", [], "command not built yet" if "why" not in commands
                            else "no such candidate"))
            continue
        add(tool, tprules("why", program, f'legal("{fusion}")' if legal else f'refused("{fusion}", R)'))
    if shutil.which("souffle"):
        out = base / "souffle" / "out"
        out.mkdir(exist_ok=True)
        add("souffle", ["souffle", "-F", base / "souffle" / "facts", "-D", out, base / "souffle" / "rules.dl"])
    else:
        rows.append(Row(size, "souffle", "souffle", [], "souffle not on PATH"))
    add("clingo", [PY, "-m", "clingo", base / "clingo" / "rules.lp", base / "clingo" / "facts.lp",
                   "-V0", "--warn=none", "--outf=0"])
    if pydatalog:
        add("pydatalog", tprules("check", program, "--engine", "pydatalog", "--format", "json"), reps=1)
    info["agree"] = agreement(base, rows)
    log(f"  answers agree: {info['agree']}")
    return info, rows


def agreement(base: Path, rows: list[Row]) -> dict[str, bool]:
    tools = {r.tool: r for r in rows if r.ok}
    if "check" not in tools:
        return {}
    ours = verdicts_tprules(base / "check.0.out")
    found = {}
    if "souffle" in tools:
        found["souffle"] = verdicts_souffle(base / "souffle" / "out") == ours
    if "clingo" in tools:
        found["clingo"] = verdicts_clingo(base / "clingo.0.out") == ours
    if "pydatalog" in tools:
        found["pydatalog"] = verdicts_tprules(base / "pydatalog.0.out") == ours
    return found


# -- report -----------------------------------------------------------------------------


def _fmt(x: float | None, unit: str = "") -> str:
    return "-" if x is None else f"{x:.2f}{unit}" if x < 100 else f"{x:.0f}{unit}"


def report(infos: dict[str, dict], rows: list[Row], repeat: int) -> str:
    sizes = list(infos)
    lines = [f"Wall time of the whole command in seconds (median of {repeat}) and peak memory in MiB.", ""]
    lines.append("| command | " + " | ".join(f"{s} time | {s} MiB" for s in sizes) + " |")
    lines.append("|---|" + "---:|---:|" * len(sizes))
    tools = list(dict.fromkeys(r.tool for r in rows))
    by = {(r.size, r.tool): r for r in rows}
    for tool in tools:
        cells = []
        for s in sizes:
            r = by.get((s, tool))
            if r is None:
                cells += ["-", "-"]
            elif r.wall is None:
                cells += [r.note or "-", "-"]
            else:
                cells += [_fmt(r.wall), f"{r.peak:.0f}"]
        lines.append(f"| {tool} | " + " | ".join(cells) + " |")
    lines += ["", "Ratios (time of the other tool / time of `tprules check`; above 1: tprules is faster):", ""]
    lines.append("| size | statements | candidates | " + " | ".join(
        t for t in ("souffle", "clingo", "pydatalog") if t in tools) + " | check target | memory target |")
    others = [t for t in ("souffle", "clingo", "pydatalog") if t in tools]
    lines.append("|---|---:|---:|" + "---:|" * len(others) + "---|---|")
    for s in sizes:
        check = by.get((s, "check"))
        cells = []
        for t in others:
            r = by.get((s, t))
            if r is None or check is None or check.wall is None:
                cells.append("-")
            elif r.wall is None:
                cells.append(f"> {r.runs[-1].wall_s / check.wall:.0f}" if r.runs else "-")
            else:
                cells.append(f"{r.wall / check.wall:.2f}")
        target = TARGETS.get(s)
        verdict = "-" if target is None or check is None or check.wall is None else (
            f"{'met' if check.wall <= target else 'missed'} ({_fmt(check.wall)} s vs {target} s)")
        peak = max((r.peak for r in rows if r.size == s and r.tool in ("load", "check", "plan", "why-legal", "why-refused")
                    and r.peak is not None), default=None)
        memory = "-" if peak is None else f"{'met' if peak <= MEMORY_TARGET_MIB else 'missed'} ({peak:.0f} MiB)"
        info = infos[s]
        lines.append(f"| {s} | {info['statements']} | {info['candidates']} | " + " | ".join(cells)
                     + f" | {verdict} | {memory} |")
    lines.append("")
    for s in sizes:
        agree = infos[s].get("agree", {})
        if agree:
            lines.append(f"{s}: verdicts equal to tprules check: "
                         + ", ".join(f"{t} {'yes' if ok else 'NO'}" for t, ok in agree.items()))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="70b,405b", help=f"comma-separated, from {', '.join(SIZES)}")
    parser.add_argument("-r", "--repeat", type=int, default=3, help="runs per command (median reported)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds before a run is killed")
    parser.add_argument("--pydatalog-sizes", default="70b", help="sizes to also run on plain pyDatalog ('' for none)")
    parser.add_argument("--work", help="folder for programs and outputs (default: a temporary folder)")
    parser.add_argument("--json", help="also write every measurement to this file")
    args = parser.parse_args(argv)
    sizes = [s for s in args.sizes.split(",") if s]
    unknown = [s for s in sizes if s not in SIZES]
    if unknown:
        parser.error(f"unknown size {', '.join(unknown)}; sizes: {', '.join(SIZES)}")
    pyd = {s for s in args.pydatalog_sizes.split(",") if s}
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="tprules-bench-"))

    def log(text):
        print(text, file=sys.stderr, flush=True)

    infos, rows = {}, []
    for size in sizes:
        infos[size], found = bench_size(size, work, args.repeat, args.timeout, size in pyd, log)
        rows += found
    print(report(infos, rows, args.repeat), end="")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "command": "python benchmarks/bench.py " + " ".join(argv if argv is not None else sys.argv[1:]),
            "sizes": infos,
            "rows": [dict(asdict(r), wall_s=r.wall, peak_mib=r.peak) for r in rows],
        }, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
