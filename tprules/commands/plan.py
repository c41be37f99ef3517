"""`tprules plan DIR`: fuse the program greedily, asking the rules before every merge."""

from __future__ import annotations

import sys
import time
from dataclasses import replace

from ..verdicts import known_module, module_paths, under
from . import common


def add_parser(sub):
    p = sub.add_parser("plan", help="plan fused groups, asking the rules before every merge")
    p.add_argument("dir", metavar="DIR", help="program folder of .facts files")
    common.add_rules(p)
    common.add_shim(p)
    p.add_argument("--machine", default="auto", choices=("auto", "cpu", "gpu", "none"),
                   help="the cost model's machine: a fusion estimated slower than its parts there is not made "
                        "(auto: the shim's kind of chip; none: every fusion the rules allow)")
    common.add_format(p, choices=("text", "json", "dot"))
    common.add_engine(p)
    common.add_show(p)
    common.add_module(p)
    return p


def run(args) -> int:
    from ..planner import Stats, plan
    from ..progress import Progress
    from ..workspace import Workspace

    started = time.perf_counter()
    ws = Workspace(args.dir, args.rules, args.shim, engine=args.engine, include_dirs=args.include_dirs)
    stats = Stats()
    result = plan(ws, stats=stats, machine=None if args.machine == "none" else args.machine, progress=Progress())
    from ..planner.render import fold_labels, render_dot, render_text

    modules = module_paths(ws.program.facts)
    if args.module is not None:
        known_module(modules, args.module)
        result = replace(result, groups=tuple(g for g in result.groups
                                              if any(under(modules.get(o, ""), args.module) for o in g.members)))
    if args.format == "json":
        data = result.to_json()
        if modules:  # each member's module path, in the order of members
            for g in data["groups"]:
                g["modules"] = [modules.get(o, "") for o in g["members"]]
        common.emit_json({"shim": data.pop("shim"), "shim_source": ws.shim_source, **data})
    else:

        facts = ws.program.facts
        classes = dict(facts.tuples("op"))
        folds = fold_labels(facts)
        if args.format == "dot":
            from ..program.order import data_flow

            flows = {o: sorted(rs) for o, rs in data_flow(facts).items()}
            sys.stdout.write(render_dot(result, classes, folds, flows,
                                        f"{ws.program.display}   shim {ws.program.shim_label}"))
        else:
            header = ws.header("plan")
            sys.stdout.write(render_text(result, classes, folds, header, modules))
    if "plan" in args.show:
        print(f"[plan] {stats.rounds} rounds, {stats.asked} fused ops asked in {stats.batches} batches "
              f"({stats.refused} refused), {stats.merged} merges, {stats.costly} not made as slower than their parts "
              f"({', '.join(f'{k} {v}' for k, v in stats.by_pass.items())})"
              + (f"; {stats.kernels} collective kernels formed first" if stats.kernels else ""), file=sys.stderr)
    if "cost" in args.show:
        from ..planner import shim_machine
        from ..planner.cost_lines import cost_lines, input_lines
        from ..runtime import Program

        machine = shim_machine(ws.shim) if args.machine in ("auto", "none") else args.machine
        prog = Program.from_workspace(ws)
        for line in [*input_lines(prog), *cost_lines(prog, result, machine)]:
            print(line, file=sys.stderr)
    if "timing" in args.show:
        print(f"[timing] plan: {time.perf_counter() - started:.3f} s", file=sys.stderr)
    return 0
