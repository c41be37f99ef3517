"""A run's timeline as Chrome trace-event JSON (`tprules run --trace OUT.json`), the format
Perfetto and chrome://tracing open.

Each MPI rank is one process (the one-process run is process 0), each chip one thread, and
a `host` thread per process holds the compile phases, the MPI collectives and messages,
and the rank's wall time. Slices ("X" events, microseconds):

- `kernel`: one per kernel launch on a chip, named by its group and kind, with the group's
  members, their classes, its place and the cost model's estimate as args;
- `collective`: one per fold run as a collective (kind, bytes, peers);
- `transfer`: one per copy of a tensor between chips (and per MPI message);
- `compile`: the phases before the run (lower, compile each kernel, inputs, reference).

Times are taken on one clock for every process, the host's wall clock (so ranks on one
machine share a time base); a queue reports its launches on the device's own clock where
it has one (CUDA events), placed on that base by an event recorded when tracing began.

>>> trace = Trace(pid=0, name="run facts/megatron-mlp-tp2")
>>> trace.phase("lower", 0.0, 0.001); len(trace.events) > 0
True
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path

HOST = 1000  # the host thread's id in every process (chips are 0..n-1)


class Trace:
    """The trace events of one process; `merge` joins several processes' into one file."""

    def __init__(self, pid: int = 0, name: str = "tprules run", clock: str = "host"):
        self.pid = pid
        self.events: list[dict] = []
        # one time base: the host's wall clock, read through perf_counter (steadier) from here on
        self.wall0, self.perf0 = time.time(), time.perf_counter()
        self.clock = clock
        self.meta("process_name", HOST, name=name)
        self.meta("thread_name", HOST, name="host")
        self._chips: set[int] = set()

    def us(self, perf: float) -> float:
        """Microseconds on the shared wall-clock base, of a `time.perf_counter()` reading."""
        return (self.wall0 + (perf - self.perf0)) * 1e6

    def meta(self, what: str, tid: int, **args) -> None:
        self.events.append({"name": what, "ph": "M", "pid": self.pid, "tid": tid, "args": args})

    def chip(self, chip: int) -> None:
        if chip not in self._chips:
            self._chips.add(chip)
            self.meta("thread_name", chip, name=f"chip {chip}")
            self.meta("thread_sort_index", chip, sort_index=chip)

    def slice(self, name: str, cat: str, tid: int, start: float, end: float, **args) -> None:
        """A complete slice from `start` to `end` (perf_counter seconds) on thread `tid`."""
        if tid != HOST:
            self.chip(tid)
        self.events.append({"name": name, "cat": cat, "ph": "X", "pid": self.pid, "tid": tid,
                            "ts": round(self.us(start), 3), "dur": round(max(end - start, 0.0) * 1e6, 3),
                            "args": args})

    def host(self, name: str, cat: str, start: float, end: float, **args) -> None:
        self.slice(name, cat, HOST, start, end, **args)

    def wall(self, started: float, seconds: float, **args) -> None:
        """The process's wall time, from `started` (a `time.time()` reading) for `seconds`."""
        self.slice("rank wall time", "rank", HOST, self.perf0 + (started - self.wall0),
                   self.perf0 + (started - self.wall0) + seconds, **args)

    def phase(self, name: str, start: float, end: float, **args) -> None:
        """A compile phase (plan, lower, compile a kernel, inputs, reference) on the host thread."""
        self.slice(name, "compile", HOST, start, end, **args)

    # -- what the executors hand over ---------------------------------------------------------

    def queue_records(self, chip: int, records: list[tuple], prog, machine) -> None:
        """A chip's queue records, in its order: (("kernel", compiled) | ("transfer", source
        chip, bytes[, "read"]), start, end). A fold's kernel, with the transfers that brought it every other
        chip's partial right before it, is also one collective slice."""
        incoming: list[tuple] = []
        for what, start, end in records:
            if what[0] == "transfer":  # ("transfer", source, bytes[, "read"]: read where it lies, no copy)
                source, nbytes = what[1], what[2]
                self.slice(f"{what[3] if len(what) > 3 else 'copy'} from chip {source}", "transfer", chip, start, end,
                           source=source, to=chip, bytes=nbytes)
                incoming.append((source, nbytes, start))
                continue
            kernel = what[1].kernel
            self.slice(f"{kernel.group} {kernel.kind}", "kernel", chip, start, end, **kernel_args(kernel, prog, machine))
            if kernel.place == "collective":
                self.slice(f"{kind_of(kernel, prog)} {kernel.group}", "collective", chip,
                           min([s for _, _, s in incoming] + [start]), end, kind=kind_of(kernel, prog),
                           group=kernel.group, bytes=sum(b for _, b, _ in incoming),
                           peers=sorted({s for s, _, _ in incoming}), members=list(kernel.members),
                           **member_modules(prog, kernel.members))
            incoming = []

    def write(self, path: str | Path) -> None:
        write(path, self.events, {"clock": self.clock})


def phases(trace: Trace | None):
    """`with phase(name, **args):` records a compile phase in `trace`; nothing without one."""

    @contextlib.contextmanager
    def phase(name: str, **args):
        started = time.perf_counter()
        yield
        if trace is not None:
            trace.phase(name, started, time.perf_counter(), **args)

    return phase


def kernel_args(kernel, prog, machine) -> dict:
    """What a kernel slice says: group, members, their classes, place, estimated seconds, and
    the bytes it reads of the program's inputs (weights: codegen/cost.py's weight_bytes)."""
    from ..codegen.cost import MACHINES, estimate, weight_bytes

    classes = [prog.statement(m).cls for m in kernel.members]
    machine = MACHINES.get(machine, MACHINES["cpu"]) if isinstance(machine, str) else machine
    out = {"group": kernel.group, "members": list(kernel.members), "classes": classes, "place": kernel.place,
           "kind": kernel.kind, "estimated_us": round(machine.seconds(estimate(kernel, machine)) * 1e6, 3),
           "weights_read_bytes": int(weight_bytes(kernel, frozenset(prog.inputs)))}
    return {**out, **member_modules(prog, kernel.members)}


def member_modules(prog, members) -> dict:
    """`{"modules": [...]}`, an imported model's module path of each member in the order of
    members, for a trace slice's args; {} for a program without paths."""
    modules = [prog.statement(m).attr("module", "") for m in members]
    return {"modules": modules} if any(modules) else {}


def kind_of(kernel, prog) -> str:
    """A fold's collective: an all-gather when its statement is a `cat`, else an all-reduce (SPEC §1)."""
    from ..ops import Ops

    classes = {prog.statement(m).cls for m in kernel.members}
    return "all_gather" if classes == {Ops.CAT} else "all_reduce"


def write(path: str | Path, events: list[dict], other: dict | None = None) -> None:
    """One trace file. Several processes' events share the wall-clock base, so merging them is
    a join; times are written from the earliest slice (`otherData.origin_us`, since the epoch)."""
    origin = min((e["ts"] for e in events if e["ph"] == "X"), default=0.0)
    events = [dict(e, ts=round(e["ts"] - origin, 3)) if e["ph"] == "X" else e for e in events]
    data = {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"time_base": "host wall clock", "origin_us": origin, **(other or {})}}
    path = Path(path)
    if path.parent and not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, separators=(",", ":")) + "\n")
