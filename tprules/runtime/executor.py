"""Run compiled kernels on one device queue per chip.

A kernel runs where its group's place says: on chip K, or on every chip (spine groups and
folds). Every tensor is held by the chips that computed it (a spine tensor by all of
them); a kernel that reads a tensor its chip does not hold first copies it from a chip
that does. A fold alone is therefore a real all-reduce: each chip receives every other
chip's partial into its own buffer and sums them there with the fold's kernel. A fold
fused into a bigger group reads only its own chip's partial (a `local` parameter): the
local sum that the collective_fold rule exists to refuse.

On a device whose chips share the process's memory (`Device.shares_spine`, the CPU) a spine
kernel runs once, on chip 0, and every other chip that reads what it wrote reads chip 0's
buffer where it lies (`Queue.share_from`: no copy, only a wait for the kernel), instead of
each chip computing the same value again. Nothing ever writes into a buffer a kernel reads,
so sharing it is safe. The ranks of `--ranks`/`--mpi` keep a copy on each chip
(distributed/executor.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..codegen.ir import Kernel
from ..program.model import RunProgram
from .buffers import buffers
from .devices.base import Compiled, Queue


@dataclass
class Execution:
    """What one run left: program outputs per chip that holds them, and per-chip counts."""

    outputs: dict[str, dict[int, np.ndarray]]
    kernels: dict[int, int]  # chip → kernels run
    launches: dict[int, int]  # chip → device launches (a CUDA kernel launches once per stage)
    busy: dict[int, float]
    seconds: float
    cpu: dict[int, float | None] = field(default_factory=dict)  # see Queue.cpu_seconds
    transfers: int = 0
    moved_bytes: int = 0
    held: dict[str, dict[int, object]] = field(default_factory=dict)
    threads: dict[int, int | None] = field(default_factory=dict)  # chip → CPU threads (see Queue.threads)
    process_cpu: float = 0.0  # processor time of the whole process (every thread) while the kernels ran
    kernel_seconds: list[tuple[str, float]] = field(default_factory=list)  # (kind, s) per kernel run, every chip


def chips_of(kernel: Kernel, chips: int) -> list[int]:
    if kernel.place.startswith("chip:"):
        return [int(kernel.place.split(":")[1])]
    return list(range(chips))  # spine, or a fold's all-reduce


def shares_spine(device, prog: RunProgram, share: bool = True) -> bool:
    """Whether spine kernels run once for all chips (see the module's docstring); `share`
    False keeps one on each chip wherever they run."""
    return share and device.shares_spine and prog.chips > 1


class Executor:
    def __init__(self, prog: RunProgram, device, compiled: list[Compiled], inputs: dict[str, np.ndarray],
                 share: bool = True):
        """`share` False: every chip runs each spine kernel, even where they could share it."""
        self.prog = prog
        self.device = device
        self.compiled = compiled  # in an order where producers come first
        self.inputs = inputs
        self.share = shares_spine(device, prog, share)

    def run(self, progress=None, trace=None) -> Execution:
        """One run; `trace` (a runtime/trace.py `Trace`) gets every launch and copy of it."""
        prog = self.prog
        queues = self.device.queues(prog.chips)
        try:
            held: dict[str, dict[int, object]] = {}
            for name, value in self.inputs.items():
                home = prog.tensors[name].home
                for c in ([home] if home is not None else range(prog.chips)):
                    held.setdefault(name, {})[c] = queues[c].upload(value.reshape(prog.tensors[name].buffer_shape))
            for q in queues:
                q.synchronize()
                if trace is not None:
                    q.start_trace()
            run = _Run(prog, queues, held, self.share)
            started, cpu = time.perf_counter(), time.process_time()
            for compiled in self.compiled:
                run.launch(compiled)
                if progress is not None:
                    progress()
            for q in queues:
                q.synchronize()
            seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
            if trace is not None:
                trace.host("run", "run", started, started + seconds)
                for q in queues:
                    trace.queue_records(q.chip, q.take_trace(), prog, self.device.machine)
            outputs = {t: {c: queues[c].download(buf).reshape(prog.tensors[t].shape) for c, buf in held[t].items()}
                       for t in prog.outputs}
            return Execution(outputs, run.kernels, run.launches, {q.chip: q.busy_seconds() for q in queues},
                             seconds, {q.chip: q.cpu_seconds() for q in queues}, run.transfers, run.moved, held,
                             {q.chip: q.threads for q in queues}, cpu,
                             [t for q in queues for t in q.kernel_seconds()])
        finally:
            for q in queues:
                q.close()


class _Run:
    def __init__(self, prog: RunProgram, queues: list[Queue], held: dict, share: bool = False):
        self.prog = prog
        self.queues = queues
        self.held = held
        self.share = share
        self.shared: set[str] = set()  # tensors written by a spine kernel that ran once for all chips
        self.ready: dict[tuple[str, int], object] = {}  # (tensor, chip) → the chip's mark after its writer
        self.kernels = {q.chip: 0 for q in queues}
        self.launches = {q.chip: 0 for q in queues}
        self.transfers = 0
        self.moved = 0

    def on(self, tensor: str, chip: int):
        """The tensor's buffer on `chip`, copied there from a chip that holds it if need be."""
        where = self.held[tensor]
        if chip in where:
            return where[chip]
        home = self.prog.tensors[tensor].home
        source = home if home is not None and home in where else min(where)
        after = self.ready.get((tensor, source))
        if tensor in self.shared:
            where[chip] = self.queues[chip].share_from(self.queues[source], where[source], after)
            return where[chip]
        buf = self.queues[chip].copy_from(self.queues[source], where[source], after)
        where[chip] = buf
        self.transfers += 1
        self.moved += buf.nbytes
        return buf

    def launch(self, compiled: Compiled) -> None:
        kernel = compiled.kernel
        chips = chips_of(kernel, self.prog.chips)
        if self.share and kernel.place == "spine":
            chips = chips[:1]
            self.shared.update(p.tensor for p in kernel.params if p.role == "out")
        for chip in chips:
            q = self.queues[chip]
            q.launch(compiled, buffers(kernel, chip, q, self.on, self.held))
            mark = q.mark()
            for p in kernel.params:
                if p.role == "out":
                    self.ready[(p.tensor, chip)] = mark
            self.kernels[chip] += 1
            self.launches[chip] += compiled.launches

