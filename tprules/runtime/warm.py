"""`tprules compile DIR --device cpu`: every kernel of a plan compiled into the cache ahead
of a run, with what each distinct source cost (`warm`), slowest first in the report.

The distinct sources the cache lacks are compiled in worker processes (devices/pool.py), then
each kernel is loaded here as `run` loads it; a source's time is its worker's compile plus its
load here (only the load where the cache held it already). Kernels that only move memory
or only add and multiply (codegen/moves.py) need no compile and are counted apart.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..codegen import cache


@dataclass
class SourceTime:
    """One distinct kernel source: the kernels that share it, and what it cost."""

    kind: str
    groups: list[str]
    members: list[str]  # the first kernel's members
    seconds: float
    compiled_in: str  # pool (ahead, by a worker or this process) | here (as it was loaded) | cache (only loaded)

    def to_json(self) -> dict:
        return {"kind": self.kind, "groups": self.groups, "members": self.members, "seconds": self.seconds,
                "compiled_in": self.compiled_in}


@dataclass
class Warmed:
    program: str
    device: str
    groups: int
    kernels: int
    uncompiled: int  # kernels numpy runs, with no compile (codegen/moves.py)
    sources: list[SourceTime] = field(default_factory=list)  # slowest first
    seconds: float = 0.0
    jobs: int = 1

    def to_json(self) -> dict:
        return {"program": self.program, "device": self.device, "groups": self.groups, "kernels": self.kernels,
                "uncompiled": self.uncompiled, "distinct": len(self.sources), "seconds": self.seconds, "jobs": self.jobs,
                "sources": [s.to_json() for s in self.sources]}


def warm(prog, plan, device, jobs: int) -> Warmed:
    """Compile (or load from the cache) every kernel of `plan` on `device` (a CpuDevice)."""
    from ..codegen import lower
    from .execution.executor import is_scatter, shares_spine
    from .plan.collective import expand
    from .plan.groups import ordered_groups
    from .plan.reduce_scatter import reduce_scatters

    started = time.perf_counter()
    groups = expand(ordered_groups(plan, prog), prog)[0]  # a collective kernel as its parts, as run compiles them
    scatters = reduce_scatters(prog)
    kernels = [k for k in (lower(g, prog) for g in groups) if not is_scatter(k, scatters)]  # a collective: no kernel
    device.for_chips(prog.chips)
    share = shares_spine(device, prog)
    items = [(k, share and k.place == "spine") for k in kernels]
    cached = {}
    for k, shared in items:
        source = device.render(k, shared)[1]
        cached[source] = bool(cache.machine_code(source, "cpu"))
    in_workers = device.warm(items, jobs)
    by_source: dict[str, SourceTime] = {}
    uncompiled = 0
    for k, shared in items:
        began = time.perf_counter()
        compiled = device.compile(k, shared)
        took = time.perf_counter() - began
        if not compiled.compiles:
            uncompiled += 1
            continue
        entry = by_source.get(compiled.source)
        if entry is None:
            where = "pool" if compiled.source in in_workers else ("cache" if cached.get(compiled.source) else "here")
            entry = by_source[compiled.source] = SourceTime(k.kind, [], list(k.members),
                                                            in_workers.get(compiled.source, 0.0), where)
        entry.groups.append(k.group)
        entry.seconds += took
    sources = sorted(by_source.values(), key=lambda s: -s.seconds)
    return Warmed(prog.display, device.describe(), len(plan.groups), len(kernels), uncompiled, sources,
                  time.perf_counter() - started, jobs)


def render_text(w: Warmed, top: int | None = None) -> str:
    from .report import seconds

    lines = [f"compile {w.program} on {w.device}",
             f"plan: {w.groups} groups -> {w.kernels} kernels; {len(w.sources)} distinct sources, "
             f"{w.uncompiled} run by numpy with no compile; compiled by {w.jobs} process{'' if w.jobs == 1 else 'es'}", ""]
    shown = w.sources if top is None else w.sources[:top]
    head = ("seconds", "compiled", "kind", "kernels", "groups (members of the first)")
    rows = [(seconds(s.seconds), s.compiled_in, s.kind, str(len(s.groups)),
             f"{', '.join(s.groups[:4])}{' ...' if len(s.groups) > 4 else ''} [{', '.join(s.members[:6])}"
             f"{' ...' if len(s.members) > 6 else ''}]") for s in shown]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head) - 1)]
    for r in [head, *rows]:
        cells = [c.rjust(wd) if i in (0, 3) else c.ljust(wd) for i, (c, wd) in enumerate(zip(r, widths))]
        lines.append("  ".join(cells + [r[-1]]).rstrip())
    if top is not None and len(w.sources) > top:
        lines.append(f"... {len(w.sources) - top} more (--top 0 lists them all)")
    lines.append("")
    lines.append(f"{len(w.sources)} distinct sources ready in the cache in {seconds(w.seconds)}; "
                 "a run of this plan loads them from there")
    return "\n".join(lines) + "\n"
