"""Running a planned program: the steps of `tprules run`, in order.

1. program.py    the program as the runtime sees it (shapes checked against SPEC §4);
2. groups.py     the plan checked and its groups ordered (producers first);
3. codegen       each group lowered to one kernel and compiled for the device;
4. inputs.py     program inputs, from DIR/data/*.npy or a fixed seed;
5. reference.py  the unfused numpy reference (semantics.py: SPEC §4, the living definition);
6. executor.py   the kernels run on one device queue per chip, partials all-reduced;
7. compare.py    every program output compared with the reference.

>>> from tprules.workspace import Workspace                        # doctest: +SKIP
>>> report = execute(Workspace("facts/megatron-mlp-tp2"), device="cpu")
>>> report.ok, report.kernels
(True, 10)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .compare import OutputCheck, compare
from .groups import BadPlan, ordered_groups, unfused
from .program import RunProgram


@dataclass
class ChipStats:
    chip: int
    kernels: int
    launches: int
    busy_s: float


@dataclass
class RunReport:
    program: str
    device: str
    shim: str
    groups: int
    kernels: int  # one per group
    compiled: int  # distinct kernel sources (equal groups on different chips share one)
    kinds: dict[str, int]  # kernel kind → count
    chips: list[ChipStats]
    outputs: list[OutputCheck]
    compile_s: float
    run_s: float
    transfers: int
    moved_bytes: int
    values: dict[str, np.ndarray] = field(default_factory=dict, repr=False)  # an output's device value

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
        return {"program": self.program, "device": self.device, "shim": self.shim, "ok": self.ok,
                "max_abs_err": self.max_abs_err, "max_rel_err": self.max_rel_err,
                "outputs": [o.to_json() for o in self.outputs], "kernels": self.kernels, "groups": self.groups,
                "compiled": self.compiled, "kinds": self.kinds,
                "chips": [{"chip": c.chip, "kernels": c.kernels, "launches": c.launches, "busy_s": c.busy_s}
                          for c in self.chips],
                "compile_s": self.compile_s, "run_s": self.run_s, "transfers": self.transfers,
                "moved_bytes": self.moved_bytes}


def execute(workspace, plan=None, device: str = "cpu", *, baseline: bool = False, repeat: int = 1,
            progress=None, show_kernels=None, prog: RunProgram | None = None) -> RunReport:
    """Plan (unless given), compile, run on `device` and compare with the reference.

    `baseline` runs one kernel per statement instead of the plan; `repeat` runs the
    program that many times and reports the fastest; `progress(phase, total)` returns a
    callback to call once per step of that phase; `show_kernels(kernel, source)` sees
    each kernel's generated source.
    """
    from ..codegen import lower
    from .devices import get_device
    from .executor import Executor
    from .inputs import program_inputs
    from .reference import reference

    prog = prog or RunProgram.from_workspace(workspace)
    if baseline:
        plan = unfused(prog)
    elif plan is None:
        from ..planner import plan as make_plan

        plan = make_plan(workspace)
    groups = ordered_groups(plan, prog)
    dev = get_device(device)
    kernels = [lower(g, prog) for g in groups]
    started = time.perf_counter()
    tick = progress("compile", len(kernels)) if progress else None
    compiled = []
    for k in kernels:
        compiled.append(dev.compile(k))
        if show_kernels:
            show_kernels(k, compiled[-1].source)
        if tick:
            tick()
    compile_s = time.perf_counter() - started
    inputs = program_inputs(prog)
    expected = reference(prog, inputs)
    runner = Executor(prog, dev, compiled, inputs)
    best = None
    for _ in range(max(1, repeat)):
        tick = progress("run", len(compiled)) if progress else None
        done = runner.run(tick)
        if best is None or done.seconds < best.seconds:
            best = done
    checks = compare(prog, done.outputs, expected)
    kinds: dict[str, int] = {}
    for k in kernels:
        kinds[k.kind] = kinds.get(k.kind, 0) + 1
    chips = [ChipStats(c, best.kernels[c], best.launches[c], best.busy[c]) for c in range(prog.chips)]
    values = {t: per_chip[min(per_chip)] if prog.tensors[t].home is None or prog.tensors[t].home not in per_chip
              else per_chip[prog.tensors[t].home] for t, per_chip in done.outputs.items()}
    return RunReport(prog.display, dev.describe(), prog.shim, len(plan.groups), len(kernels),
                     len({c.source for c in compiled}), kinds, chips, checks, compile_s, best.seconds,
                     best.transfers, best.moved_bytes, values)


__all__ = ["BadPlan", "ChipStats", "RunReport", "RunProgram", "execute", "unfused"]
