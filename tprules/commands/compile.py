"""`tprules compile DIR --device cuda --arch sm_90`: build every kernel of DIR's plan for a
GPU architecture, with no GPU present (codegen/cuda/nvvm.py), and report what each uses.
Exit 1 when a kernel does not build; 2 on bad input or when NVVM is not installed.

`tprules compile DIR --device cpu [--jobs N]`: compile every kernel of the plan `run` runs on
the CPU into the cache (runtime/warm.py), in N worker processes, and report the time each
distinct source took, slowest first."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

from . import common


def add_parser(sub):
    p = sub.add_parser("compile", help="build every kernel of the plan for a GPU architecture, without a GPU")
    p.add_argument("dir", metavar="DIR", help="program folder of .facts files")
    common.add_rules(p)
    common.add_shim(p)
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                   help="the device to build for: cuda (default; no GPU needed) or cpu (fills the kernel cache)")
    p.add_argument("--jobs", metavar="N", help="cpu: compile in N processes (default one per idle core)")
    p.add_argument("--top", type=int, default=20, metavar="K",
                   help="cpu: list the K slowest sources (default 20; 0: all)")
    p.add_argument("--arch", default="sm_90", help="GPU architecture, e.g. sm_90 (H100, H200; default), sm_80 (A100)")
    p.add_argument("--unfused", action="store_true", help="one kernel per statement instead of the plan")
    p.add_argument("--matmul", choices=("own", "library"), default=None,
                   help="cuda: own, our shared-memory tiles (default), or library, the kernels split around "
                        "cuBLAS's gemm; cpu: own, our loops, or library, BLAS (default: BLAS where present)")
    p.add_argument("--out", metavar="KERNELS_DIR", help="keep each distinct kernel's source, PTX and cubin there")
    common.add_format(p)
    common.add_engine(p)
    return p


@dataclass
class CompileReport:
    program: str
    shim: str
    shim_source: str
    arch: str
    nvvm: str
    ptxas: str | None  # its version, None when not installed
    matmul: str
    groups: int
    builds: list  # nvvm.Build, one per kernel, in the order the groups run
    seconds: float

    @property
    def ok(self) -> bool:
        return all(b.ok for b in self.builds)

    @property
    def distinct(self) -> int:
        return sum(1 for b in self.builds if not b.reused)

    def to_json(self) -> dict:
        return {"program": self.program, "shim": self.shim, "shim_source": self.shim_source, "arch": self.arch,
                "nvvm": self.nvvm, "ptxas": self.ptxas, "matmul_core": self.matmul, "ok": self.ok,
                "distinct": self.distinct, "seconds": self.seconds, "kernels": [b.to_json() for b in self.builds]}


def build_program(ws, arch: str = "sm_90", *, unfused: bool = False, matmul: str = "own", fused=None,
                  compiler=None) -> CompileReport:
    """Build every kernel of the workspace's plan (or `unfused`; or only the groups of the
    member lists `fused`, each named by its members joined with +)."""
    from ..codegen import lower
    from ..codegen.cuda import kernel as cuda
    from ..codegen.cuda import nvvm
    from ..planner.plan import Group
    from ..runtime import Program
    from ..runtime.plan.groups import ordered_groups
    from ..runtime.plan.groups import unfused as one_each

    compiler = compiler or nvvm.Compiler(nvvm.parse_arch(arch))  # first: no NVVM, nothing else is done
    prog = Program.from_workspace(ws)
    if fused is not None:
        groups = [Group("+".join(ms), tuple(sorted(ms, key=prog.position.__getitem__)), _place(prog, ms)) for ms in fused]
    else:
        if unfused:
            plan = one_each(prog)
        else:
            from ..planner import plan as make_plan

            plan = make_plan(ws, machine="gpu" if matmul == "library" else "gpu (own tiles)")
        groups = ordered_groups(plan, prog)
    from ..runtime.plan.collective import expand
    from ..runtime.plan.reduce_scatter import reduce_scatters

    groups = expand(groups, prog)[0]  # a collective kernel's parts, as run compiles them (runtime/plan/collective.py)

    scatters = reduce_scatters(prog)  # a reduce-scatter's fold alone is no kernel: run does it as a collective
    groups = [g for g in groups if not (g.place == "collective" and len(g.members) == 1 and g.members[0] in scatters)]
    started = time.perf_counter()
    builds = []
    def build(g):
        return compiler.build(cuda.prepare(lower(g, prog), library=matmul == "library"))

    for g in groups:
        b = build(g)
        if not b.ok and b.statement is None:
            b.statement = _failing_member(g, build)
        builds.append(b)
    return CompileReport(prog.display, prog.shim, prog.shim_source, compiler.arch.name, compiler.nvvm,
                         compiler.ptxas_version or None, matmul, len(groups), builds, time.perf_counter() - started)


def _failing_member(group, build) -> str | None:
    """The member to blame where the compiler named no line: the group's only member, else
    the first whose own kernel does not build either (None: only the fusion fails)."""
    from ..planner.plan import Group

    if len(group.members) == 1:
        return group.members[0]
    for o in group.members:
        if not build(Group(o, (o,), group.place)).ok:
            return o
    return None


def _place(prog, members) -> str:
    """Where a fused op of these members runs: a chip member's chip, else the spine; folds
    alone are the collective."""
    places = sorted({prog.places[o] for o in members} - {"collective"})
    return places[0] if places else "collective"


def run(args) -> int:
    from ..codegen.cuda import nvvm
    from ..workspace import Workspace

    if args.device == "cpu":
        return run_cpu(args)
    args.matmul = args.matmul or "own"
    arch = nvvm.parse_arch(args.arch)
    compiler = nvvm.Compiler(arch)
    ws = Workspace(args.dir, args.rules, args.shim, engine=args.engine, include_dirs=args.include_dirs)
    report = build_program(ws, unfused=args.unfused, matmul=args.matmul, compiler=compiler)
    if args.out:
        nvvm.write(report.builds, Path(args.out))
    if args.format == "json":
        common.emit_json(report.to_json())
    else:
        sys.stdout.write(render_text(report))
    sys.stdout.flush()
    return 0 if report.ok else 1


def run_cpu(args) -> int:
    from ..errors import UsageError
    from ..runtime import Program, run_plan
    from ..runtime.devices import get_device
    from ..runtime.devices.pool import jobs_count
    from ..runtime.warm import render_text as warm_text
    from ..runtime.warm import warm
    from ..workspace import Workspace

    jobs = jobs_count(args.jobs)
    if args.top < 0:
        raise UsageError("--top takes a count of at least 0")
    if args.out:
        raise UsageError("--out keeps CUDA builds: it takes --device cuda")
    ws = Workspace(args.dir, args.rules, args.shim, engine=args.engine, include_dirs=args.include_dirs)
    prog = Program.from_workspace(ws)
    device = get_device("cpu", args.matmul or "auto")
    report = warm(prog, run_plan(ws, prog, device, baseline=args.unfused), device, jobs)
    if args.format == "json":
        common.emit_json(report.to_json())
    else:
        sys.stdout.write(warm_text(report, args.top or None))
    sys.stdout.flush()
    return 0


def render_text(report: CompileReport) -> str:
    from ..codegen.cuda.nvvm import INSTALL
    from ..runtime.report import seconds, size

    tools = report.nvvm + (f", ptxas {report.ptxas}" if report.ptxas else ", no ptxas")
    lines = [f"compile {report.program} for {report.arch}   {tools}   shim {report.shim} ({report.shim_source})",
             f"plan: {report.groups} groups -> {len(report.builds)} kernels, {report.distinct} distinct sources; "
             f"matmul: {'own tiles' if report.matmul == 'own' else 'split around the library gemm'}", ""]
    head = ("group", "place", "kinds", "registers", "shared", "spills st/ld", "launch", "members")
    rows = []
    for b in report.builds:
        k = b.kernel
        if not b.ok:
            usage = ("FAILED", "-", "-")
        elif b.registers is None:
            usage = ("-", "-", "-")
        else:
            usage = (str(b.registers), size(b.shared_bytes), f"{size(b.spill_stores)}/{size(b.spill_loads)}")
        launch = ", ".join("gemm" if s is None else f"{s[0]}x{s[1]}" for s in b.launch) or "-"
        rows.append((k.group, k.place, k.kind, *usage, launch, ", ".join(k.members)))
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head) - 1)]
    right = {3, 4, 5}
    for r in [head, *rows]:
        cells = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))]
        lines.append("  ".join(cells + [r[-1]]).rstrip())
    lines.append("")
    failed = [b for b in report.builds if not b.ok]
    for b in failed:
        where = f"statement {b.statement}" if b.statement else "every member builds alone"
        lines.append(f"FAILED {b.kernel.group} ({where}): {b.error}")
    built = [b for b in report.builds if b.ok and b.registers is not None]
    summary = (f"{len(report.builds)} kernels ({report.distinct} distinct) compiled for {report.arch} "
               f"in {seconds(report.seconds)}: ")
    if failed:
        summary += f"{len(failed)} failed"
    else:
        summary += "every kernel builds"
    if built:
        spills = sum(b.spill_stores + b.spill_loads for b in built)
        summary += (f"; at most {max(b.registers for b in built)} registers, "
                    f"{size(max(b.shared_bytes for b in built))} shared, "
                    + ("no spills" if not spills else f"{size(spills)} spilled"))
    lines.append(summary)
    if report.ptxas is None:
        lines.append(f"ptxas not found: PTX only, no registers, shared memory or spills ({INSTALL})")
    return "\n".join(lines) + "\n"
