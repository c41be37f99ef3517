"""Where the time of `tprules check DIR --format json` goes, phase by phase, in one process.

    python benchmarks/generate.py 70b /tmp/70b
    python benchmarks/profile_check.py /tmp/70b            # phases, then cProfile's top functions
    python benchmarks/profile_check.py /tmp/70b --top 0    # phases only

Phases are timed by wrapping the functions that do them (a phase whose function no longer
exists is left out), so the figures are inclusive and nest as indented. The modules a
check imports are imported first, as their own phase, so that no phase pays for imports.
The JSON goes to /dev/null. Run it twice and trust the second: the rules cache is warm then.
"""

from __future__ import annotations

import time

STARTED = time.perf_counter()

import argparse  # noqa: E402
import cProfile  # noqa: E402
import contextlib  # noqa: E402
import importlib  # noqa: E402
import io  # noqa: E402
import os  # noqa: E402
import pstats  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# (label, module, attribute path, depth): what to time.
PHASES = [
    ("rules (checked program from the cache)", "tprules.workspace", "load_checked_rules", 0),
    ("load program", "tprules.workspace", "load_program", 0),
    ("read and encode facts", "tprules.program.load", "load_fact_dir", 1),
    ("well-formedness", "tprules.program.load", "check_wellformed", 1),
    ("topological order", "tprules.program.load", "topological_order", 1),
    ("evaluate", "tprules.engine.columnar", "ColumnarEngine.evaluate", 0),
    ("stratum", "tprules.engine.columnar", "ColumnarEngine._run_stratum", 1),
    ("verdicts (judge)", "tprules.workspace", "judge", 0),
    ("output (JSON)", "tprules.commands.common", "emit_json_lines", 0),
]
IMPORTS = ["numpy", "json", "tprules.cli", "tprules.commands.check", "tprules.workspace", "tprules.program.load",
           "tprules.engine.columnar", "tprules.verdicts", "tprules.commands.common"]


class Timer:
    def __init__(self):
        self.spent: dict[str, float] = {}
        self.order: list[tuple[str, int]] = []

    def wrap(self, label: str, depth: int, func, describe=None):
        def timed(*args, **kwargs):
            name = describe(*args) if describe else label
            if name not in self.spent:
                self.spent[name] = 0.0
                self.order.append((name, depth))
            started = time.perf_counter()
            try:
                return func(*args, **kwargs)
            finally:
                self.spent[name] += time.perf_counter() - started

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

    imported = time.perf_counter()
    for name in IMPORTS:
        importlib.import_module(name)
    imported = time.perf_counter() - imported
    timer = Timer()
    install(timer)
    from tprules.cli import main as cli

    profile = cProfile.Profile() if args.top else None
    started = time.perf_counter()
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        if profile:
            profile.enable()
        status = cli(["check", args.dir, "--format", "json"])
        if profile:
            profile.disable()
    total = time.perf_counter() - started
    if status != 0:
        print(f"tprules check exited {status}", file=sys.stderr)
        return status
    print(f"python start-up to here: {started - STARTED:.3f} s (of which imports {imported:.3f} s)")
    print(f"check in process: {total:.3f} s" + (" (under cProfile: slower than without)" if profile else ""))
    for name, depth in timer.order:
        print(f"  {'  ' * depth}{name:<{60 - 2 * depth}} {timer.spent[name]:7.3f} s")
    accounted = sum(timer.spent[n] for n, d in timer.order if d == 0)
    print(f"  {'other (argument parsing, workspace glue)':<60} {total - accounted:7.3f} s")
    if profile:
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(args.top)
        print(out.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
