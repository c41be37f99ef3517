"""The fusion planner: greedy vertical and horizontal fusion that asks the shim before each merge.

The planner holds no legality logic. It proposes merges, asks a `Shim` (tprules.shim)
about them in batches, and merges only what the shim allows; with the project's
`TensorParallelShim` every answer comes from the rule files. In order:

1. graph      the program as a `TensorGraph`, and each statement's place (from the shim);
2. greedy     rounds of proposals, asked in batches, applied while the groups stay acyclic
              (`greedy.py`; acyclicity of the group graph in `groups.py`);
3. plan       groups in program order, members in program order, each with its place.

>>> from tprules.workspace import Workspace
>>> p = plan(Workspace("facts/megatron-mlp-tp2"))
>>> [(g.members, g.place) for g in p.groups][:2]
[(('mm1_0', 'gelu_0', 'mm2_0'), 'chip:0'), (('mm1_1', 'gelu_1', 'mm2_1'), 'chip:1')]
"""

from __future__ import annotations

from .greedy import Greedy, Stats
from .plan import Group, Plan

DEVICE = "device"  # the one place of a shim that does not say where statements run


def plan(workspace, *, stats: Stats | None = None, across_places: bool = True, machine: str | None = "auto",
         progress=None) -> Plan:
    """The fusion plan of a workspace's program for its shim, asked through the Shim API.

    `stats` (a `Stats`) is filled with what the planner did; `across_places=False` skips
    the last pass, which asks about merges across places (the project's rules refuse them all).
    `machine` names the cost model's machine (codegen/cost.py: cpu, gpu, ...); `auto` takes
    the kind of chip the shim describes (a `cpu:` shim the cpu, any other the gpu); None
    makes every merge the shim allows. `progress` (a tprules.progress.Progress) counts the merges.
    """
    from ..shim import FactShim, Manifest, TensorGraph, TensorParallelShim

    facts = workspace.program.facts
    g = TensorGraph.from_facts(facts)
    base = FactShim(workspace.shim, facts, checked=workspace.checked, engine=workspace.engine_name)
    shim = TensorParallelShim(base, Manifest.from_facts(facts), checked=workspace.checked,
                              engine=workspace.engine_name)
    shim.bind(g, workspace)  # the workspace already holds these facts, loaded and checked
    cost = None
    if machine is not None:
        from ..program.model import RunProgram
        from .cost import KernelCost

        cost = KernelCost(RunProgram.from_workspace(workspace), shim_machine(workspace.shim) if machine == "auto" else machine)
    return plan_graph(g, shim, name=workspace.shim, stats=stats, across_places=across_places, cost=cost,
                      progress=progress)


def shim_machine(shim: str) -> str:
    """The cost model's machine for a shim: `cpu:...` shims are CPUs, the others GPUs."""
    return "cpu" if shim.split(":")[0] == "cpu" else "gpu"


def plan_graph(g, shim, *, name: str | None = None, places: dict[str, str] | None = None,
               kinds: dict[str, str] | None = None, stats: Stats | None = None, across_places: bool = True,
               cost=None, progress=None) -> Plan:
    """Plan a `TensorGraph` for any `Shim` (a compiler's own one too).

    `places` defaults to the shim's `places(g)` when it has one (TensorParallelShim does),
    else every statement in one place. `kinds` (class → kind, SPEC §4) defaults to the
    shim library's class registry; the planner uses kinds only to order its proposals.
    `cost` (a `planner.cost.KernelCost`) turns down allowed merges estimated slower than
    their parts.
    """
    if places is None:
        places = shim.places(g) if hasattr(shim, "places") else dict.fromkeys(g.order(), DEVICE)
    if kinds is None:
        from ..shim.base import library_facts

        kinds = {cls: kind for cls, kind, _ in library_facts()["registry"]}
    greedy = Greedy(g, shim, places, kinds, across_places=across_places, cost=cost, progress=progress)
    try:
        groups = greedy.run()
    finally:
        if progress is not None:
            progress.close()
    if stats is not None:
        stats.__dict__.update(greedy.stats.__dict__)
    position = g.position
    out = []
    for gid in sorted(groups.members, key=lambda gid: min(position[o] for o in groups.members[gid])):
        members = tuple(sorted(groups.members[gid], key=position.__getitem__))
        out.append(Group(f"g{len(out)}", members, greedy.place[gid] or DEVICE))
    return Plan(name if name is not None else shim.name(), tuple(out))


__all__ = ["Group", "Plan", "Stats", "plan", "plan_graph"]
