"""Where the time of `tprules check DIR --format json` goes, phase by phase, in one process.

    python benchmarks/generate.py 70b /tmp/70b
    python benchmarks/profile_check.py /tmp/70b            # phases, then cProfile's top functions
    python benchmarks/profile_check.py /tmp/70b --top 0    # phases only

Phases are timed by wrapping the functions that do them (a phase whose function no longer
exists is left out), so the figures are inclusive and nest as indented. The modules a
check imports are imported first, as their own phase, so that no phase pays for imports.
Beside each phase: the process's resident memory and its peak so far, at the phase's end.
The JSON goes to /dev/null. Run it twice and trust the second: the rules cache is warm then.
tprules is byte-compiled first (as `pip install` does), so imports do not include compiling it.
"""

from __future__ import annotations

import compileall
import time
from pathlib import Path

# tprules' modules byte-compiled first, as an installed package has them (see bench.py).
compileall.compile_dir(Path(__file__).resolve().parent.parent / "tprules", quiet=1)
STARTED = time.perf_counter()

import argparse  # noqa: E402
import contextlib  # noqa: E402
import cProfile  # noqa: E402
import importlib  # noqa: E402
import io  # noqa: E402
import os  # noqa: E402
import pstats  # noqa: E402
import sys  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# (label, module, attribute path, depth): what to time.
PHASES = [
    ("parse arguments", "tprules.cli", "build_parser", 0),
    ("rules (checked program from the cache)", "tprules.workspace", "load_checked_rules", 0),
    ("load program", "tprules.workspace", "load_program", 0),
    ("read and encode facts", "tprules.program.load", "load_fact_dir", 1),
    ("well-formedness", "tprules.program.load", "check_wellformed", 1),
    ("topological order", "tprules.program.load", "topological_ids", 1),
    ("computed inputs (target, topo)", "tprules.datalog.facts.base", "FactBase.extend", 1),
    ("engine set-up", "tprules.workspace", "make_engine", 0),
    ("evaluate", "tprules.datalog.engine.fast", "ColumnarEngine.evaluate", 0),
    ("stratum", "tprules.datalog.engine.fast", "ColumnarEngine._run_stratum", 1),
    ("verdicts (judge)", "tprules.workspace", "judge", 0),
    ("output (JSON)", "tprules.commands.common", "emit_json_lines", 0),
    ("verdicts as JSON lines", "tprules.verdicts", "VerdictTable.json_lines", 1),
]
IMPORTS = ["numpy", "json", "tprules.cli", "tprules.commands.check", "tprules.workspace", "tprules.program.load",
           "tprules.datalog.facts.scan", "tprules.datalog.engine.fast", "tprules.verdicts", "tprules.commands.common"]


def resident_mib() -> tuple[float, float]:
    """This process's resident memory now and at its peak so far, in MiB (Linux)."""
    with open("/proc/self/status") as status:
        fields = dict(line.split(":", 1) for line in status)
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


class Timer:
    def __init__(self):
        self.spent: dict[str, list[float]] = {}  # name → [wall, cpu]
        self.order: list[tuple[str, int]] = []
        self.memory: dict[str, tuple[float, float]] = {}  # name → (resident, peak) at its last end

    def wrap(self, label: str, depth: int, func, describe=None):
        def timed(*args, **kwargs):
            name = describe(*args) if describe else label
            if name not in self.spent:
                self.spent[name] = [0.0, 0.0]
                self.order.append((name, depth))
            started, cpu = time.perf_counter(), time.process_time()
            try:
                return func(*args, **kwargs)
            finally:
                self.spent[name][0] += time.perf_counter() - started
                self.spent[name][1] += time.process_time() - cpu
                self.memory[name] = resident_mib()

        return timed


def _stratum_name(_engine, _model, stratum, *_rest) -> str:
    names = ", ".join(stratum.relations)
    return f"stratum {stratum.index}{' (recursive)' if stratum.recursive else ''}: {names}"


def install(timer: Timer) -> None:
    for label, module_name, path, depth in PHASES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        owner, attr = module, path
        if "." in path:
            cls, attr = path.split(".")
            owner = getattr(module, cls, None)
        func = getattr(owner, attr, None) if owner is not None else None
        if func is None:
            continue
        describe = _stratum_name if label == "stratum" else None
        setattr(owner, attr, timer.wrap(label, depth, func, describe))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", help="program folder")
    parser.add_argument("--top", type=int, default=15, help="cProfile's top functions by own time (0: none)")
    args = parser.parse_args(argv)

    from tprules.cli import _batch_process

    _batch_process()  # as `tprules check` sets its process up (cli.entry), before numpy loads
    imported, imported_cpu = time.perf_counter(), time.process_time()
    for name in IMPORTS:
        importlib.import_module(name)
    imported, imported_cpu = time.perf_counter() - imported, time.process_time() - imported_cpu
    timer = Timer()
    install(timer)
    from tprules.cli import main as cli

    profile = cProfile.Profile() if args.top else None
    at_start = resident_mib()
    started, cpu = time.perf_counter(), time.process_time()
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        if profile:
            profile.enable()
        status = cli(["check", args.dir, "--format", "json"])
        if profile:
            profile.disable()
    total, total_cpu = time.perf_counter() - started, time.process_time() - cpu
    if status != 0:
        print(f"tprules check exited {status}", file=sys.stderr)
        return status
    print(f"{'':<62} {'wall':>7}   {'cpu':>7}     resident, peak at the end (MiB)")
    print(f"{'python start-up to here':<62} {started - STARTED:7.3f} s {'':9} {at_start[0]:6.0f} {at_start[1]:6.0f}")
    print(f"{'  of which imports':<62} {imported:7.3f} s {imported_cpu:7.3f} s")
    print(f"{'check in process' + (' (under cProfile: slower)' if profile else ''):<62} {total:7.3f} s {total_cpu:7.3f} s")
    for name, depth in timer.order:
        wall, used = timer.spent[name]
        rss, peak = timer.memory[name]
        print(f"  {'  ' * depth}{name:<{60 - 2 * depth}} {wall:7.3f} s {used:7.3f} s {rss:6.0f} {peak:6.0f}")
    top = [timer.spent[n] for n, d in timer.order if d == 0]
    print(f"  {'other':<60} {total - sum(w for w, _ in top):7.3f} s {total_cpu - sum(c for _, c in top):7.3f} s")
    if profile:
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(args.top)
        print(out.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
