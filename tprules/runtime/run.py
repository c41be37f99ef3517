"""`tprules run` as one call: a plan lowered and compiled for a device (`Prepared`), run, and
reported on (`RunReport`); `execute` plans (unless given a plan), prepares, runs and compares.

>>> from tprules.workspace import Workspace                        # doctest: +SKIP
>>> report = execute(Workspace("facts/megatron-mlp-tp2"), device="cpu")
>>> report.ok, report.kernels
(True, 10)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..ops import Ops
from ..program.model import Program
from .execution.executor import kernel_timing
from .plan.groups import ordered_groups, unfused
from .trace import phases
from .values.compare import OutputCheck, compare

if TYPE_CHECKING:
    from .devices.base import Compiled


@dataclass
class ChipStats:
    chip: int
    kernels: int
    launches: int
    busy_s: float
    threads: int | None = None  # CPU threads the chip got (None on a GPU)


@dataclass
class RunReport:
    program: str
    device: str
    shim: str
    groups: int
    kernels: int  # one per group
    compiled: int  # distinct kernel sources compiled (equal groups on different chips share one)
    kinds: dict[str, int]  # kernel kind → count
    chips: list[ChipStats]
    outputs: list[OutputCheck]
    compile_s: float
    run_s: float
    transfers: int
    moved_bytes: int
    values: dict[str, np.ndarray] = field(default_factory=dict, repr=False)  # an output's device value
    matmul: dict[str, str] = field(default_factory=dict)  # the device's matmul core: kind, library, reason
    shim_source: str = "library"  # where the shim is described: program | library
    timing: dict[str, tuple[int, float]] = field(default_factory=dict)  # kernel kind → (runs, seconds), fastest run
    uncompiled: int = 0  # kernels that only move memory or add exactly: numpy runs them, no compile (codegen/moves.py)

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outputs)

    @property
    def max_abs_err(self) -> float:
        return max((o.max_abs_err for o in self.outputs), default=0.0)

    @property
    def max_rel_err(self) -> float:
        return max((o.max_rel_err for o in self.outputs), default=0.0)

    def to_json(self) -> dict:
        return {"program": self.program, "device": self.device, "shim": self.shim,
                "shim_source": self.shim_source, "ok": self.ok,
                "max_abs_err": self.max_abs_err, "max_rel_err": self.max_rel_err,
                "outputs": [o.to_json() for o in self.outputs], "kernels": self.kernels, "groups": self.groups,
                "compiled": self.compiled, "uncompiled": self.uncompiled, "kinds": self.kinds,
                "chips": [{"chip": c.chip, "kernels": c.kernels, "launches": c.launches, "busy_s": c.busy_s,
                           "threads": c.threads} for c in self.chips],
                "compile_s": self.compile_s, "run_s": self.run_s, "transfers": self.transfers,
                "moved_bytes": self.moved_bytes, Ops.MATMUL.value: self.matmul}


class Prepared:
    """A plan lowered and compiled for a device, with its inputs and the reference: run it
    as often as wanted (`run`), then report on a run (`report`)."""

    def __init__(self, prog: Program, plan, device, progress=None, show_kernels=None, matmul: str = "auto",
                 trace=None, share: bool = True, world=None, jobs: int | None = None):
        """`device`: a device's name (made here, its matmul core chosen by `matmul`) or a `Device`;
        `trace` (runtime/trace.py) gets a slice per compile phase; `share` False: every
        chip runs each spine kernel, even where the device's chips could share it (runtime/execution/executor.py);
        `world` (runtime/execution/world.py): the chips this process holds, every chip unless given (one MPI
        rank's: only its kernels are compiled, only its inputs read, `compiled[i]` None for the others);
        `jobs`: worker processes compiling the distinct sources first (runtime/devices/pool.py;
        default one per idle core; 1: every kernel compiled in this process)."""
        from ..codegen import lower
        from .devices import get_device, pool
        from .execution.executor import Executor, is_scatter, runs_here, shares_spine
        from .execution.world import World
        from .plan.reduce_scatter import reduce_scatters, shown
        from .values.inputs import program_inputs

        self.prog = prog
        self.plan = plan
        self.worker_s: dict[str, float] = {}  # source → seconds a worker process took to compile it
        self.trace = trace
        self.world = world = world or World(prog.chips)
        phase = phases(trace)
        from .plan.collective import expand

        groups, self.spans = expand(ordered_groups(plan, prog), prog)  # a collective kernel as its parts
        overlapped = {i for at, k in self.spans.items() for i in range(at, at + len(k.parts))} \
            if world.collectives else set()  # on ranks, run on the host as one kernel (runtime/execution/overlap.py)
        self.device = get_device(device, matmul) if isinstance(device, str) else device
        with phase("lower", groups=len(groups)):
            self.kernels = [lower(g, prog) for g in groups]
        self.device.for_chips(len(world.chips))
        share = shares_spine(self.device, prog, share)
        started = time.perf_counter()
        tick = progress("compile", len(self.kernels)) if progress else None
        self.compiled: list[Compiled | None] = []
        scatters = reduce_scatters(prog)
        warm = getattr(self.device, "warm", None)
        if warm is not None:  # the distinct sources not in the cache, in a pool of processes
            with phase("compile in workers"):
                self.worker_s = warm([(k, share and k.place == "spine") for i, k in enumerate(self.kernels)
                                      if i not in overlapped and runs_here(k, world, scatters)],
                                     pool.idle_cores() if jobs is None else jobs)
        for i, k in enumerate(self.kernels):
            if i in overlapped:  # a collective kernel on ranks, run on the host: what it does
                self.compiled.append(None)
                if show_kernels and i in self.spans:
                    from .execution.overlap import shown as overlapped_shown

                    show_kernels(*overlapped_shown(self.spans[i]))
                continue
            if not runs_here(k, world, scatters):
                self.compiled.append(None)
                if show_kernels and is_scatter(k, scatters):  # a collective, not a kernel: what it does
                    show_kernels(*shown(k, prog, scatters[k.members[0]], world))
                continue
            with phase(f"compile {k.group}", group=k.group, kind=k.kind):
                compiled = self.device.compile(k, shared=share and k.place == "spine")
            self.compiled.append(compiled)
            if show_kernels:
                show_kernels(k, compiled.source)
            if tick:
                tick()
        self.compile_s = time.perf_counter() - started
        with phase("inputs"):
            inputs = program_inputs(prog, {t for t in prog.inputs if world.holds(prog.tensors[t].home)})
        with phase("reference"):
            self.expected = world.reference(prog, inputs)
        self.executor = Executor(prog, self.device, self.kernels, self.compiled, inputs, share, world, self.spans)

    def run(self, progress=None):
        """One run of the whole program (an `executor.Execution`)."""
        return self.executor.run(progress("run", len(self.compiled)) if progress else None, self.trace)

    def report(self, done, fastest=None) -> RunReport:
        """The report on run `done`, with the timings of `fastest` (default: `done`)."""
        prog, best = self.prog, fastest or done
        kinds: dict[str, int] = {}
        for k in self.kernels:
            kinds[k.kind] = kinds.get(k.kind, 0) + 1
        chips = [ChipStats(c, best.kernels[c], best.launches[c], best.busy[c], best.threads.get(c))
                 for c in range(prog.chips)]
        values = {}
        for t, per_chip in done.outputs.items():
            home = prog.tensors[t].home
            values[t] = per_chip[home if home in per_chip else min(per_chip)]
        return RunReport(prog.display, self.device.describe(), prog.shim, len(self.plan.groups), len(self.kernels),
                         len({c.source for c in self.compiled if c is not None and c.compiles}), kinds, chips,
                         compare(prog, done.outputs, self.expected), self.compile_s, best.seconds, best.transfers,
                         best.moved_bytes, values, matmul_core(self.device), prog.shim_source,
                         kernel_timing(best.kernel_seconds),
                         sum(1 for c in self.compiled if c is not None and not c.compiles))


def matmul_core(device) -> dict[str, str]:
    core = getattr(device, "core", None)
    return {} if core is None else {"kind": core.kind, "library": core.library, "reason": core.reason}


def run_plan(workspace, prog: Program, device, matmul: str = "auto", *, baseline: bool = False, trace=None):
    """The plan `run` runs: one kernel per statement with `baseline`, else the planner's,
    its costs as on `device` (a `Device`, or a name made here with its `matmul` core), the
    one that runs it. The launcher of `--ranks` plans with it too (distributed/job.py)."""
    if baseline:
        return unfused(prog)
    from ..planner import plan as make_plan
    from .devices import get_device

    dev = get_device(device, matmul) if isinstance(device, str) else device
    with phases(trace)("plan"):
        return make_plan(workspace, machine=dev.machine)


def execute(workspace, plan=None, device: str = "cpu", *, baseline: bool = False, repeat: int = 1,
            progress=None, show_kernels=None, prog: Program | None = None, matmul: str = "auto",
            trace=None, share: bool = True, jobs: int | None = None) -> RunReport:
    """Plan (unless given), compile, run on `device` and compare with the reference.

    `baseline` runs one kernel per statement instead of the plan; `repeat` runs the
    program that many times and reports the fastest; `progress(phase, total)` returns a
    callback to call once per step of that phase; `show_kernels(kernel, source)` sees
    each kernel's generated source; `matmul` (auto | library | own) picks the device's matmul
    core (runtime/devices/matmul.py); `trace` (runtime/trace.py) records the compile phases and
    every launch, copy and collective of every run; `share` False keeps a spine kernel on every
    chip where the device's chips could share one run of it (runtime/execution/executor.py);
    `jobs`: the processes that compile the distinct kernel sources (default one per idle core).
    """
    from .devices import get_device

    prog = prog or Program.from_workspace(workspace)
    dev = get_device(device, matmul) if isinstance(device, str) else device  # a name, or a Device
    if baseline or plan is None:
        plan = run_plan(workspace, prog, dev, baseline=baseline, trace=trace)
    prepared = Prepared(prog, plan, dev, progress, show_kernels, trace=trace, share=share, jobs=jobs)
    best = done = None
    for _ in range(max(1, repeat)):
        done = prepared.run(progress)
        if best is None or done.seconds < best.seconds:
            best = done
    return prepared.report(done, best)

