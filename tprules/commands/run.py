"""`tprules run DIR`: run the planned program, one device per chip, and compare every
program output with the unfused reference (exit 1 on a mismatch)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..verdicts import module_paths
from . import common


def add_parser(sub):
    p = sub.add_parser("run", help="run the planned program on a device and check it against the reference")
    p.add_argument("dir", metavar="DIR", help="program folder of .facts files (inputs from DIR/data/*.npy)")
    common.add_rules(p)
    common.add_shim(p)
    p.add_argument("--device", choices=("cpu", "sim", "cuda"), default="cpu",
                   help="cpu: Numba CPU functions (default); sim: Numba's CUDA simulator; cuda: real GPUs")
    p.add_argument("--matmul", choices=("auto", "library", "own"), default="auto",
                   help="matmul core: a library where present (auto, default), the library or an error, or our own kernels")
    p.add_argument("--save", metavar="OUT", help="write each program output as OUT/<tensor>.npy")
    p.add_argument("--unfused", action="store_true", help="run one kernel per statement (the baseline) instead of the plan")
    p.add_argument("--repeat", type=int, default=1, metavar="N", help="run N times and report the fastest (default 1)")
    p.add_argument("--jobs", metavar="N", help="compile the distinct kernel sources in N worker processes "
                                               "(default one per idle core; 1: in this process)")
    p.add_argument("--trace", metavar="OUT.json", help="write the run's timeline as Chrome trace-event JSON (Perfetto): "
                                                      "a process per rank, a thread per chip")
    ranks = p.add_mutually_exclusive_group()
    ranks.add_argument("--ranks", type=int, metavar="N",
                       help="start N MPI ranks with the MPI's own mpiexec; rank r holds the chips k with k mod N == r")
    ranks.add_argument("--mpi", action="store_true",
                       help="run as one rank of a user's own launcher: mpiexec -n N tprules run DIR --mpi")
    p.add_argument("--timeout", type=float, default=600.0, metavar="S",
                   help="with --ranks/--mpi: the longest a rank waits for the others at one collective "
                        "(default 600); the launcher waits as long, and at least 120 s, for the ranks to start")
    p.add_argument("--job", help=argparse.SUPPRESS)  # the launcher's folder, handed to its ranks
    common.add_format(p)
    common.add_engine(p)
    common.add_show(p)
    return p


def run(args) -> int:
    from ..errors import UsageError
    from ..runtime import execute
    from ..workspace import Workspace

    if args.repeat < 1:
        raise UsageError("--repeat takes a count of at least 1")
    if args.timeout <= 0:
        raise UsageError("--timeout takes a positive number of seconds")
    from ..runtime.devices.pool import jobs_count

    jobs = jobs_count(args.jobs)
    if args.ranks is not None and args.jobs is not None:
        raise UsageError("--jobs is for one process; under --ranks N the N ranks compile side by side, one process "
                         "each")
    if args.ranks is not None:
        return run_ranks(args)
    if args.mpi:
        return run_mpi(args)
    ws = Workspace(args.dir, args.rules, args.shim, engine=args.engine, include_dirs=args.include_dirs)
    trace = _trace(args, ws)
    with progress_bar(enabled=sys.stderr.isatty()) as progress:
        report = execute(ws, device=args.device, baseline=args.unfused, repeat=args.repeat, progress=progress,
                         matmul=args.matmul, jobs=jobs,
                         show_kernels=_kernel_printer(module_paths(ws.program.facts), program_inputs(ws))
                         if "kernels" in args.show else None, trace=trace)
    from ..runtime.report import render_text

    show_timing(report, args)
    if trace is not None:
        trace.write(args.trace)
    return emit_report(report, args, render_text)


def show_timing(report, args) -> None:
    if "timing" in args.show:
        for line in timing_lines(report):
            print(line, file=sys.stderr)


def timing_lines(report) -> list[str]:
    """`--show timing`: where the fastest run's time went, per kind of kernel (every chip's
    kernels added up; a device that does not time its kernels says so)."""
    if not report.timing:
        return [f"[timing] {report.device}: kernels are not timed one by one on this device"]
    total = sum(s for _, s in report.timing.values()) or 1e-30
    lines = [f"[timing] {'kernel kind':<40} {'runs':>5} {'time':>10} {'share':>6}"]
    for kind, (runs, seconds) in sorted(report.timing.items(), key=lambda kv: -kv[1][1]):
        lines.append(f"[timing] {kind:<40} {runs:>5} {seconds * 1e3:>7.2f} ms {seconds / total:>6.1%}")
    lines.append(f"[timing] {'kernels, every chip':<40} {sum(r for r, _ in report.timing.values()):>5} "
                 f"{total * 1e3:>7.2f} ms; the run took {report.run_s * 1e3:.2f} ms")
    return lines


def _trace(args, ws):
    """The one-process run's trace (process 0), or None without --trace."""
    if not args.trace:
        return None
    import os
    import socket

    from ..runtime.trace import Trace

    return Trace(pid=0, name=f"run {ws.program.display} (pid {os.getpid()} on {socket.gethostname()})",
                 clock="cuda events" if args.device == "cuda" else "host")


def emit_report(report, args, render_text) -> int:
    """--save, then the report as JSON or text; the exit status (1: an output differs)."""
    if args.save:
        save(report, args.save)
    if args.format == "json":
        common.emit_json(report.to_json())
    else:
        sys.stdout.write(render_text(report))
    sys.stdout.flush()
    return 0 if report.ok else 1


# How each option of `run` reaches the ranks of `--ranks N`, so that it means there what it
# means in one process (a test checks that every option of `run` is in one of the two):
# the launcher plans the job once with these, and starts the ranks;
# (`jobs` the launcher refuses: the ranks compile side by side, one process each)
BY_LAUNCHER = ("dir", "rules", "include_dirs", "shim", "engine", "unfused", "device", "matmul", "show", "ranks", "mpi",
               "timeout", "job", "jobs")
# each rank is handed these as given (the ranks' run under --mpi reads them).
TO_RANKS = {"device": "--device", "matmul": "--matmul", "repeat": "--repeat", "format": "--format", "save": "--save",
            "trace": "--trace", "show": "--show"}


def rank_args(args) -> list[str]:
    """The options of this command line that every rank is started with."""
    from pathlib import Path

    out: list[str] = []
    for dest, flag in TO_RANKS.items():
        value = getattr(args, dest)
        if value is None or value == frozenset():
            continue
        if dest == "trace":
            value = Path(value).resolve()  # rank 0 writes it
        elif dest == "show":
            value = ",".join(sorted(value))
        out += [flag, str(value)]
    return out


def run_ranks(args) -> int:
    """`--ranks N`: plan here, then start N ranks (`--mpi`) with the same options."""
    from ..runtime.distributed.launch import launch

    return launch(args.dir, args.ranks, rank_args(args), rules=args.rules, shim=args.shim, engine=args.engine,
                  unfused=args.unfused, device=args.device, matmul=args.matmul, modules="kernels" in args.show,
                  timeout=args.timeout, traceback="traceback" in args.show, include_dirs=args.include_dirs)


def run_mpi(args) -> int:
    """`--mpi`: this process is one rank; rank 0 prints the report."""
    from pathlib import Path

    from ..runtime.distributed.rank import RankOptions, run_rank

    def emit(report) -> int:
        from ..runtime.distributed.report import render_text

        show_timing(report, args)
        return emit_report(report, args, render_text)

    options = RankOptions(args.dir, args.device, args.repeat, args.timeout, Path(args.job) if args.job else None,
                          args.rules, args.shim, args.engine, args.unfused,
                          _kernel_printer if "kernels" in args.show else None, "traceback" in args.show, args.trace,
                          args.matmul, tuple(args.include_dirs or ()))
    return run_rank(options, emit)


def program_inputs(ws) -> frozenset[str]:
    """The tensors no statement writes (weights, constants, ids): what `--show kernels`
    counts as weights read."""
    facts = ws.program.facts
    return frozenset(t for t, *_ in facts.tuples("tensor")) - {t for _, t in facts.tuples("writes")}


def _kernel_printer(modules: dict[str, str], inputs: frozenset[str] = frozenset()):
    """`--show kernels`: each kernel's group, its members with their module paths (an
    imported model's), the bytes of the program's inputs it reads (weights: a gather of
    experts' weights per token reads one matrix a pair; a line of its own), and its source."""
    from ..codegen.cost import weight_bytes
    from ..codegen.ir import Kernel
    from ..runtime.report import size

    def show(kernel, source: str) -> None:
        members = common.with_modules(kernel.members, modules)
        print(f"# --- group {kernel.group}: {kernel.kind} [{members}] on {kernel.place}", file=sys.stderr)
        # a collective's heading (runtime/scatter.Shown) is no kernel: it reads no weights
        weights = weight_bytes(kernel, inputs) if inputs and isinstance(kernel, Kernel) else 0
        if weights:  # a kernel that reads none of the program's inputs (a fold's sum) says nothing
            print(f"# weights read: {size(int(weights))}", file=sys.stderr)
        print(source, file=sys.stderr)

    return show


def save(report, out: str) -> None:
    from pathlib import Path

    import numpy as np

    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    for name, value in report.values.items():
        np.save(folder / f"{name}.npy", value)


class progress_bar:
    """A rich progress bar on stderr for the compile and run phases, on a terminal only."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.bar: Any = None  # a rich Progress while entered

    def __enter__(self):
        if not self.enabled:
            return None
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.bar = Progress(TextColumn("{task.description:<8}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            console=Console(file=sys.stderr), transient=True)
        self.bar.start()
        return self.phase

    def phase(self, name: str, total: int):
        task = self.bar.add_task(name, total=total)
        return lambda: self.bar.advance(task)

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.stop()
        return False
