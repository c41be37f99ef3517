"""Time tprules at model scale, beside Soufflé, clingo and plain pyDatalog on the same facts.

    python benchmarks/bench.py                      # 70b and 405b, best of 5 interleaved rounds
    python benchmarks/bench.py --sizes small -r 1   # a quick look
    python benchmarks/bench.py --json figures.json  # also save every measurement

For each size it writes the program (benchmarks/generate.py), then runs each command as
its own process, start-up included, and records wall time, CPU time (user + system) and
peak memory (the child's maximum resident set, from GNU time). The sizes `8b-hf`, `70b-hf`
(TP 8) and `405b-hf` (TP 16) are real models instead: Llama-3-8B, Llama-3-70B and
Llama-3.1-405B imported from config.json files written from their published shapes
(benchmarks/bench_import.py), `tprules import hf --no-data --seq 2048`, and the import
itself is timed in every round:

- import       `tprules import hf CONFIG_DIR --tp N --seq 2048 --no-data --out DIR2` (the -hf sizes)

- load         `tprules lint DIR`: rules parsed and checked (lint skips the cache), facts read and checked
- check        `tprules check DIR --format json`
- check-floor  `tprules check facts/megatron-mlp-tp2 --format json`: what any check costs (start-up)
- plan         `tprules plan DIR --format json`
- why-legal    `tprules why DIR 'legal("F")'` for a legal candidate F from the middle of the program
- why-refused  `tprules why DIR 'refused("F", R)'` for a refused one (every reason, each with its proof)
- souffle      `souffle -F facts -D out rules.dl` on `tprules export DIR` (when souffle is on PATH)
- souffle-compiled  the same rules compiled (`souffle -o`, C++ built once beforehand into the work
               folder and not timed; the rules are the same at every size), run on the same facts
- clingo       `python -m clingo --enable-python rules.lp facts.lp` on the rules translated by
               tprules/datalog/engine/asp.py (its `#script` block computes `match` and `to_number`)
- pydatalog    `tprules check DIR --engine pydatalog` (one run, with a timeout; --pydatalog-sizes)

A command that does not exist yet (or a tool that is not installed) is skipped with a note.

The commands run in --repeat rounds, each round every command once (interleaved, so that a
burst of load on a shared machine hits every tool alike), and the best (fastest) run of
each is reported, with the median beside it. "÷ Soufflé" is a command's best time over
Soufflé's best time at the same size. The verdicts of Soufflé and clingo are compared
with tprules' (`agree`).
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_import import FULL, TP  # noqa: E402
from benchmarks.generate import SIZES, generate  # noqa: E402

IMPORTED = {f"{size}-hf": size for size in FULL}  # real models, imported from their configs
SEQ = 2048

PY = sys.executable
FLOOR = ROOT / "facts" / "megatron-mlp-tp2"  # the smallest bundled example
TARGETS = {"70b": 1.0, "405b": 2.5}  # seconds for `check` (issue 8), and 1 GiB peak memory
IMPORT_TARGETS = {"8b-hf": 4.0, "70b-hf": 8.0, "405b-hf": 15.0}  # seconds for `import` (issue 24)
PLAN_TARGET = 1.5  # plan ÷ check (issue 24)
SOUFFLE_TARGETS = {"70b": 2.0, "405b": 1.5}  # `check` ÷ Soufflé's interpreter (issue 17)
INTERPRETER_TARGET = 1.0  # `check` ÷ Soufflé's interpreter at the benchmark sizes (issue 24)
GOAL_SIZES = ("70b", "405b")  # the sizes issue 24's goals against Soufflé are for
COMPILED_TARGETS = {"405b": 1.5}  # `check` ÷ Soufflé compiled (issue 24)
SOUFFLE_MEMORY_TARGET = 2.0  # `check`'s peak memory ÷ Soufflé's interpreter's (issue 24)
MEMORY_TARGET_MIB = 1024
TIME = "/usr/bin/time" if Path("/usr/bin/time").exists() else None  # GNU time, for peak memory


@dataclass
class Run:
    wall_s: float
    cpu_s: float  # user + system
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
        """The best (fastest) run: on a shared machine, the one least disturbed."""
        return min(r.wall_s for r in self.ok) if self.ok else None

    @property
    def median(self) -> float | None:
        return statistics.median(r.wall_s for r in self.ok) if self.ok else None

    @property
    def cpu(self) -> float | None:
        return min(r.cpu_s for r in self.ok) if self.ok else None

    @property
    def peak(self) -> float | None:
        return statistics.median(r.peak_mib for r in self.ok) if self.ok else None


def measure(cmd: list[str], stdout: Path, timeout: float | None = None) -> Run:
    """Run `cmd` once: its wall time, CPU time and its own peak resident memory.

    CPU time and the peak come from /usr/bin/time (GNU time), which forks the command from
    a small process: a child forked from this (large) Python process would report at least
    the parent's memory, since Linux carries the resident high-water mark across exec.
    """
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    rusage = stdout.with_suffix(".time")
    wrapped = [TIME, "-f", "%U %S %M", "-o", str(rusage), *map(str, cmd)] if TIME else list(map(str, cmd))
    with open(stdout, "wb") as out, open(stdout.with_suffix(".err"), "wb") as err:
        started = time.perf_counter()
        proc = subprocess.Popen(wrapped, stdout=out, stderr=err, cwd=ROOT, env=env, start_new_session=True)
        # A blocking wait, the timeout kept by a timer: `Popen.wait(timeout)` polls with sleeps
        # of up to 50 ms, which rounded every short command's wall time up to the next poll.
        killed = threading.Event()

        def kill():
            killed.set()
            os.killpg(proc.pid, signal.SIGKILL)  # the command and GNU time around it

        timer = threading.Timer(timeout, kill) if timeout else None
        if timer is not None:
            timer.start()
        status = proc.wait()
        wall = time.perf_counter() - started
        if timer is not None:
            timer.cancel()
        if killed.is_set():
            status = -9
    cpu = peak = float("nan")
    if TIME and status >= 0:
        fields = rusage.read_text().split()[-3:]
        if len(fields) == 3 and fields[2].isdigit():
            cpu, peak = float(fields[0]) + float(fields[1]), int(fields[2]) / 1024
    return Run(round(wall, 3), round(cpu, 3), round(peak, 1), status)


def tprules(*args: str) -> list[str]:
    return [PY, "-m", "tprules", *map(str, args)]


def available_commands() -> tuple[str, ...]:
    from tprules.commands import COMMANDS

    return COMMANDS


def prepare(size: str, work: Path) -> dict:
    """Write the program, the Soufflé export and the clingo translation; warm the rules cache
    and byte-compile tprules, as daily use has them (`pip install` compiles a package's
    modules; an environment with PYTHONDONTWRITEBYTECODE=1 would otherwise compile every
    module of tprules in every command, about 0.09 s)."""
    compileall.compile_dir(ROOT / "tprules", quiet=1)
    base = work / size
    if base.exists():
        shutil.rmtree(base)
    started = time.perf_counter()
    if size in IMPORTED:
        done = subprocess.run(import_command(size, base, base / "program"), check=True, cwd=ROOT, capture_output=True,
                              text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
        report = json.loads(done.stdout)
        info = {"generate_s": round(time.perf_counter() - started, 2), "statements": report["statements"],
                "candidates": report["candidates"], "chips": TP[IMPORTED[size]]}
    else:
        b = generate(size, base / "program")
        info = {"generate_s": round(time.perf_counter() - started, 2), "statements": len(b.statements),
                "candidates": len({f for f, _ in b.facts["member"]}), "chips": b.chips}
    subprocess.run(tprules("lint", base / "program"), check=True, cwd=ROOT, capture_output=True,
                   env=dict(os.environ, PYTHONPATH=str(ROOT)))  # fills the rules cache, as in daily use
    subprocess.run(tprules("export", base / "program", base / "souffle"), check=True, cwd=ROOT, capture_output=True,
                   env=dict(os.environ, PYTHONPATH=str(ROOT)))
    info["souffle_compiled"] = compile_souffle(base / "souffle" / "rules.dl", work)
    write_clingo(base / "program", base / "clingo")
    return info


def compile_souffle(rules: Path, work: Path) -> str | None:
    """The rules compiled by `souffle -o` (C++, built once per rule text into the work
    folder, not timed); None when souffle is not on PATH or cannot compile."""
    if shutil.which("souffle") is None:
        return None
    import hashlib

    version = subprocess.run(["souffle", "--version"], capture_output=True, text=True).stdout
    digest = hashlib.sha256(rules.read_bytes() + version.encode()).hexdigest()[:16]
    exe = work / "souffle-compiled" / digest / "rules"
    if not exe.exists():
        exe.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(rules, exe.parent / "rules.dl")
        done = subprocess.run(["souffle", "-o", str(exe), str(exe.parent / "rules.dl")], cwd=exe.parent,
                              capture_output=True, text=True)
        if done.returncode != 0 or not exe.exists():
            print(f"souffle -o failed: {done.stderr.strip()[:400]}", file=sys.stderr)
            return None
    return str(exe)


def import_command(size: str, base: Path, out: Path) -> list[str]:
    """`tprules import hf` of a full-size config (written into base/config/ here)."""
    model = IMPORTED[size]
    source = base / "config"
    source.mkdir(parents=True, exist_ok=True)
    (source / "config.json").write_text(json.dumps(FULL[model], indent=1))
    return tprules("import", "hf", source, "--tp", TP[model], "--seq", SEQ, "--no-data", "--out", out,
                   "--format", "json")


def write_clingo(program: Path, out: Path) -> None:
    from tprules.datalog.engine.asp import facts_to_asp, program_to_asp
    from tprules.workspace import Workspace

    ws = Workspace(program)
    out.mkdir(parents=True, exist_ok=True)
    (out / "rules.lp").write_text(program_to_asp(ws.checked, show=("legal", "refused"), with_script=True))
    (out / "facts.lp").write_text(facts_to_asp({r: ws.program.facts.ordered(r) for r in ws.checked.inputs}))


def pick(check_json: Path, legal: bool) -> str | None:
    """A legal (or refused) candidate from the middle of the program, for `why`."""
    fusions = [f["fusion"] for f in json.loads(check_json.read_text())["fusions"] if f["legal"] == legal]
    return fusions[len(fusions) // 2] if fusions else None


def shown(cmd: list[str]) -> str:
    return " ".join(str(c).replace(str(ROOT) + "/", "") for c in cmd).replace(PY, "python")


def run_rounds(size: str, commands: list[tuple[str, list[str]]], work: Path, repeat: int,
               timeout: float | None, log) -> list[Row]:
    """Every command once per round, `repeat` rounds; a command that fails is not run again."""
    rows = [Row(size, tool, shown(cmd), []) for tool, cmd in commands]
    for i in range(repeat):
        for row, (tool, cmd) in zip(rows, commands):
            if row.runs and row.runs[-1].status != 0:
                continue
            row.runs.append(measure(cmd, work / f"{tool}.{i}.out", timeout))
    for row in rows:
        last = row.runs[-1]
        if last.status != 0:
            row.note = f"timed out after {timeout:.0f} s" if last.status < 0 else f"exit {last.status}"
        log(f"  {row.tool:<11} " + (f"best {row.wall:.2f} s, median {row.median:.2f} s, cpu {row.cpu:.2f} s, "
                                    f"{row.peak:.0f} MiB" if row.wall is not None else row.note))
    return rows


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
    # `why` asks about candidates that `check` judged: one check first, outside the rounds.
    first = measure(tprules("check", program, "--format", "json"), base / "check.pick.out", timeout)
    fusions = {legal: pick(base / "check.pick.out", legal) if first.status == 0 else None for legal in (True, False)}
    timed: list[tuple[str, list[str]]] = [("load", tprules("lint", program)),
                                          ("check", tprules("check", program, "--format", "json")),
                                          # what any check costs: Python, numpy, tprules, a 10-statement program
                                          ("check-floor", tprules("check", FLOOR, "--format", "json"))]
    if size in IMPORTED:  # into a folder of its own: the other commands read the first import's
        timed.insert(0, ("import", import_command(size, base, base / "imported")))
    for tool, cmd, ok, why_not in (
            ("plan", tprules("plan", program, "--format", "json"), "plan" in commands, "command not built yet"),
            ("why-legal", tprules("why", program, f'legal("{fusions[True]}")'), fusions[True] is not None,
             "no such candidate"),
            ("why-refused", tprules("why", program, f'refused("{fusions[False]}", R)'), fusions[False] is not None,
             "no such candidate"),
            ("souffle", ["souffle", "-F", base / "souffle" / "facts", "-D", base / "souffle" / "out",
                         base / "souffle" / "rules.dl"], shutil.which("souffle") is not None, "souffle not on PATH"),
            ("souffle-compiled", [info["souffle_compiled"], "-F", base / "souffle" / "facts", "-D",
                                  base / "souffle" / "out-compiled"], info["souffle_compiled"] is not None,
             "souffle not on PATH, or souffle -o failed"),
            ("clingo", [PY, "-m", "clingo", "--enable-python", base / "clingo" / "rules.lp", base / "clingo" / "facts.lp",
                        "-V0", "--warn=none", "--outf=0"], importlib.util.find_spec("clingo") is not None,
             "clingo not installed")):
        if ok:
            timed.append((tool, cmd))
        else:
            rows.append(Row(size, tool, tool, [], why_not))
    (base / "souffle" / "out").mkdir(exist_ok=True)
    (base / "souffle" / "out-compiled").mkdir(exist_ok=True)
    rows = run_rounds(size, timed, base, repeat, timeout, log) + rows
    if pydatalog:
        rows += run_rounds(size, [("pydatalog", tprules("check", program, "--engine", "pydatalog", "--format", "json"))],
                           base, 1, timeout, log)
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
    if "souffle-compiled" in tools:
        found["souffle-compiled"] = verdicts_souffle(base / "souffle" / "out-compiled") == ours
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
    by = {(r.size, r.tool): r for r in rows}
    lines = [f"Wall time of the whole command in seconds, best of {repeat} interleaved rounds (median beside it), "
             "CPU time (user + system) of the best round, peak memory in MiB; ÷ Soufflé: best time over "
             "Soufflé's best time.", ""]
    lines.append("| command | " + " | ".join(f"{s} best | {s} median | {s} cpu | {s} ÷ Soufflé | {s} MiB"
                                              for s in sizes) + " |")
    lines.append("|---|" + "---:|---:|---:|---:|---:|" * len(sizes))
    for tool in dict.fromkeys(r.tool for r in rows):
        cells = []
        for s in sizes:
            r, souffle = by.get((s, tool)), by.get((s, "souffle"))
            if r is None or r.wall is None:
                cells += [(r.note if r is not None else "") or "-", "-", "-", "-", "-"]
                continue
            ratio = f"{r.wall / souffle.wall:.2f}" if souffle is not None and souffle.wall else "-"
            cells += [_fmt(r.wall), _fmt(r.median), _fmt(r.cpu), ratio, f"{r.peak:.0f}"]
        lines.append(f"| {tool} | " + " | ".join(cells) + " |")
    lines += ["", "Goals (`check`): issue 17, at most 1.5 × Soufflé at 405b and 2 × at 70b (on the best times; "
              "the ratios of the medians and of CPU time beside them); issue 8, 1.0 s at 70b and 2.5 s at 405b; "
              "at most 1 GiB peak memory for any tprules command.", ""]
    lines.append("| size | statements | candidates | check ÷ Soufflé | (median, cpu) | plan ÷ Soufflé | clingo ÷ check "
                 "| pyDatalog ÷ check | issue 17 goal | issue 8 goal | memory goal |")
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|")
    for s in sizes:
        check, plan, souffle = by.get((s, "check")), by.get((s, "plan")), by.get((s, "souffle"))

        def ratio(a, b):
            if a is None or b is None or b.wall is None:
                return "-"
            if a.wall is None:
                return f"> {a.runs[-1].wall_s / b.wall:.0f}" if a.runs else "-"
            return f"{a.wall / b.wall:.2f}"

        vs = SOUFFLE_TARGETS.get(s)
        goal17 = "-" if vs is None or ratio(check, souffle) == "-" else (
            f"{'met' if check.wall <= vs * souffle.wall else 'missed'} ({ratio(check, souffle)} vs {vs})")
        target = TARGETS.get(s)
        goal8 = "-" if target is None or check is None or check.wall is None else (
            f"{'met' if check.wall <= target else 'missed'} ({_fmt(check.wall)} s vs {target} s)")
        peak = max((r.peak for r in rows if r.size == s and r.tool in ("load", "check", "plan", "why-legal", "why-refused")
                    and r.peak is not None), default=None)
        memory = "-" if peak is None else f"{'met' if peak <= MEMORY_TARGET_MIB else 'missed'} ({peak:.0f} MiB)"
        info = infos[s]
        others = "-" if check is None or check.wall is None or souffle is None or souffle.wall is None else \
            f"{check.median / souffle.median:.2f}, {check.cpu / souffle.cpu:.2f}"
        lines.append(f"| {s} | {info['statements']} | {info['candidates']} | {ratio(check, souffle)} | {others} | "
                     f"{ratio(plan, souffle)} | {ratio(by.get((s, 'clingo')), check)} | "
                     f"{ratio(by.get((s, 'pydatalog')), check)} | {goal17} | {goal8} | {memory} |")
    lines += ["", "Goals of issue 24: `import` at most 4 s (8b-hf), 8 s (70b-hf), 15 s (405b-hf, under 2 GiB); "
              f"`plan` at most {PLAN_TARGET} × `check`; `check` at most {INTERPRETER_TARGET} × Soufflé's interpreter "
              f"(70b, 405b) and {COMPILED_TARGETS['405b']} × Soufflé compiled (405b); `check`'s peak memory at most "
              f"{SOUFFLE_MEMORY_TARGET} × Soufflé's (its interpreter's). Ratios of best wall times (of CPU times in "
              "brackets).", "",
              "| size | import | import cpu | import goal | import MiB | plan ÷ check | plan goal | "
              "check ÷ interpreter | goal | check ÷ compiled | goal | check MiB ÷ Soufflé's | goal |",
              "|---|---:|---:|---|---:|---:|---|---:|---|---:|---|---:|---|"]

    def over(a, b) -> str:
        if a is None or b is None or a.wall is None or b.wall is None:
            return "-"
        cpu = f" ({a.cpu / b.cpu:.2f})" if a.cpu and b.cpu else ""
        return f"{a.wall / b.wall:.2f}{cpu}"

    def goal(a, b, target) -> str:
        if target is None or a is None or b is None or a.wall is None or b.wall is None:
            return "-"
        return "met" if a.wall <= target * b.wall else "missed"

    for s in sizes:
        imp, check, plan, souffle, compiled = (by.get((s, t)) for t in ("import", "check", "plan", "souffle",
                                                                         "souffle-compiled"))
        target = IMPORT_TARGETS.get(s)
        imp_cell = "-" if imp is None or imp.wall is None else _fmt(imp.wall)
        imp_cpu = "-" if imp is None or imp.cpu is None else _fmt(imp.cpu)
        imp_goal = "-" if target is None or imp is None or imp.wall is None else \
            f"{'met' if imp.wall <= target and imp.peak <= 2048 else 'missed'} ({target} s)"
        imp_mib = "-" if imp is None or imp.peak is None else f"{imp.peak:.0f}"
        mem = "-" if check is None or souffle is None or check.peak is None or souffle.peak is None else \
            f"{check.peak / souffle.peak:.2f}"
        mem_goal = "-" if mem == "-" else "met" if check.peak <= SOUFFLE_MEMORY_TARGET * souffle.peak else "missed"
        generated = s in GOAL_SIZES
        lines.append(f"| {s} | {imp_cell} | {imp_cpu} | {imp_goal} | {imp_mib} | {over(plan, check)} | "
                     f"{goal(plan, check, PLAN_TARGET)} | {over(check, souffle)} | "
                     f"{goal(check, souffle, INTERPRETER_TARGET if generated else None)} | {over(check, compiled)} | "
                     f"{goal(check, compiled, COMPILED_TARGETS.get(s))} | {mem} | {mem_goal if generated else '-'} |")
    lines.append("")
    for s in sizes:
        floor, souffle = by.get((s, "check-floor")), by.get((s, "souffle"))
        if floor is not None and floor.wall is not None:
            beside = "" if souffle is None or souffle.wall is None else \
                f"; Soufflé's interpreter on the {s} program: {_fmt(souffle.wall)} s, {souffle.peak:.0f} MiB"
            lines.append(f"{s}: the floor of any `check` (Python, numpy and tprules started, the "
                         f"{FLOOR.name} example of 10 statements judged), in the same rounds: "
                         f"{_fmt(floor.wall)} s, {floor.peak:.0f} MiB{beside}")
    lines.append("")
    for s in sizes:
        agree = infos[s].get("agree", {})
        if agree:
            lines.append(f"{s}: verdicts equal to tprules check: "
                         + ", ".join(f"{t} {'yes' if ok else 'NO'}" for t, ok in agree.items()))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="70b,405b",
                        help=f"comma-separated, from {', '.join([*SIZES, *IMPORTED])}")
    parser.add_argument("-r", "--repeat", type=int, default=5, help="interleaved rounds (best and median reported)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds before a run is killed")
    parser.add_argument("--pydatalog-sizes", default="70b", help="sizes to also run on plain pyDatalog ('' for none)")
    parser.add_argument("--work", help="folder for programs and outputs (default: a temporary folder)")
    parser.add_argument("--json", help="also write every measurement to this file")
    args = parser.parse_args(argv)
    sizes = [s for s in args.sizes.split(",") if s]
    unknown = [s for s in sizes if s not in SIZES and s not in IMPORTED]
    if unknown:
        parser.error(f"unknown size {', '.join(unknown)}; sizes: {', '.join([*SIZES, *IMPORTED])}")
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
            "rows": [dict(asdict(r), wall_s=r.wall, median_s=r.median, cpu_s=r.cpu, peak_mib=r.peak) for r in rows],
        }, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
