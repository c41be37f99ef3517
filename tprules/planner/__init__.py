"""The fusion planner: greedy vertical and horizontal fusion that asks the shim before each merge.

The planner holds no legality logic. It proposes merges, asks a `Shim` (tprules.shim)
about them in batches, and merges only what the shim allows; with the project's
`TensorParallelShim` every answer comes from the rule files. In order:

1. index      the program as integer arrays (`index.py`: data flow, kinds, shared reads),
              and each statement's place (from the shim);
2. greedy     rounds of proposals, asked in batches, applied while the groups stay acyclic,
              each round worked with numpy (`greedy.py`; the groups as arrays in `state.py`,
              merged one at a time in `groups.py` where a round needs it; the cost model's
              keys of many groups in `shapes.py`);
3. plan       groups in program order, members in program order, each with its place.

Under a shim that declares collective kernels (SPEC §3), each declared pattern is proposed
whole before step 2 and formed where the rules allow it and its overlap pays (`kernels.py`:
a group of place `collective`); the greedy passes then keep every fold, and so every
kernel, as it is (`keeping_folds_alone`).

>>> from tprules.workspace import Workspace
>>> p = plan(Workspace("facts/megatron-mlp-tp2"))
>>> [(g.members, g.place) for g in p.groups][:2]
[(('mm1_0', 'gelu_0', 'mm2_0'), 'chip:0'), (('mm1_1', 'gelu_1', 'mm2_1'), 'chip:1')]
"""

from __future__ import annotations

from .cost import KernelCost
from .greedy import Greedy, Stats
from .index import PlanIndex
from .plan import Group, Plan

DEVICE = "device"  # the one place of a shim that does not say where statements run


def plan(workspace, *, stats: Stats | None = None, across_places: bool = True, machine: str | None = "auto",
         progress=None) -> Plan:
    """The fusion plan of a workspace's program for its shim, asking its rules.

    `stats` (a `Stats`) is filled with what the planner did; `across_places=False` skips
    the last pass, which asks about merges across places (the project's rules refuse them all).
    `machine` names the cost model's machine (codegen/cost.py: cpu, gpu, ...); `auto` takes
    the kind of chip the shim describes (a `cpu:` shim the cpu, any other the gpu); None
    makes every merge the shim allows. `progress` (a tprules.progress.Progress) counts the merges.

    The questions are those a `TensorParallelShim` over the workspace's `FactShim` answers
    (tprules.shim: the TP rules and the base rules in one evaluation), asked of the
    workspace directly, and the program is the workspace's one `Program` (program/model.py),
    read as arrays (`PlanIndex.of`): no graph of Python objects is built. `plan_graph` plans
    any `TensorGraph` for any shim.
    """
    program = workspace.tensor_program
    index = PlanIndex.of(program)
    from ..verdicts import place_ids

    on = place_ids(workspace.places_model, program.facts.symbols)
    assert index.ids is not None  # from_program's
    places = [on.get(i, "") for i in index.ids.tolist()]
    cost = None
    if machine is not None:
        cost = KernelCost(checked_view(workspace), shim_machine(workspace.shim) if machine == "auto" else machine)

    ask = rules_asker(workspace, index)
    kernels: list[list[int]] = []
    patterns = declared_patterns(workspace)
    if patterns:
        from .kernels import Relations, form

        kernels = form(index, ask, places, Relations.of_facts(workspace.program.facts), patterns, cost,
                       cost.view if cost is not None else None)
        ask = keeping_folds_alone(ask, program.fold)
    return _plan(index, ask, places, workspace.shim, stats, across_places, cost, progress, kernels)


def declared_patterns(workspace) -> list[str]:
    """The collective kernels the workspace's shim declares (SPEC §2 `collective_kernel`)."""
    return sorted(p for s, p in workspace.program.facts.tuples("collective_kernel") if s == workspace.shim)


def declares_collective_kernels(workspace) -> bool:
    """Whether the workspace's shim declares a collective kernel (SPEC §2 `collective_kernel`)."""
    return bool(declared_patterns(workspace))


def keeping_folds_alone(ask, fold):
    """`ask`, with every proposal that holds a fold (`fold`: a bool per statement) refused.

    Under a shim that declares collective kernels the rules allow a candidate that is
    exactly a pattern (rules/collective.dl). The planner forms those whole, before the
    greedy passes (kernels.py); a pairwise merge holding a fold (or a kernel) is never made:
    the runtime runs a fold either alone or as the one collective of a kernel."""
    import numpy as np

    def guarded(fusions: list[str], owner, statements) -> list[bool]:
        allowed = ask(fusions, owner, statements)
        holds_fold = np.zeros(len(fusions), dtype=bool)
        holds_fold[np.asarray(owner)[fold[np.asarray(statements)]]] = True
        return [ok and not f for ok, f in zip(allowed, holds_fold.tolist())]

    return guarded


def rules_asker(workspace, index: PlanIndex):
    """Proposals judged by the workspace's rules (`Workspace.ask`), on encoded member facts
    where its engine takes them."""
    import numpy as np

    from .greedy import member_lists

    symbols, ids = workspace.program.facts.symbols, index.ids
    assert ids is not None  # from_program's

    def ask(fusions: list[str], owner, statements) -> list[bool]:
        fusion_ids = np.asarray(symbols.intern(fusions, distinct=True))
        members = np.stack([fusion_ids[owner], ids[statements]], axis=1)
        refused = workspace.refused_rows(fusion_ids, members)
        if refused is not None:
            return (~refused).tolist()
        keys = member_lists(owner, statements, len(fusions))
        found = workspace.ask({f: tuple(index.names[k] for k in key) for f, key in zip(fusions, keys)})
        return [not found[f] for f in fusions]

    return ask


def checked_view(workspace):
    """The workspace's program as the cost model reads it, its shapes checked (SPEC §4): a
    bad shape is the error `run` gives, naming the first bad statement's file and line."""
    from ..program.model import Program

    return Program.from_workspace(workspace)


def registry_kinds() -> dict[str, str]:
    """class → kind (SPEC §4), from the shim library's class registry on disk (what
    `plan_graph` asks by default; `plan` reads the registry loaded with the program)."""
    from ..shim.base import library_facts

    return {cls: kind for cls, kind, _ in library_facts()["registry"]}


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
    from ..shim.graph import FusedOp
    from ..shim.protocol import fits_all
    from .greedy import member_lists

    if places is None:
        places = shim.places(g) if hasattr(shim, "places") else dict.fromkeys(g.order(), DEVICE)
    index = PlanIndex.from_graph(g, registry_kinds() if kinds is None else kinds)

    names = index.names

    def ask(fusions: list[str], owner, statements) -> list[bool]:
        keys = member_lists(owner, statements, len(fusions))
        ops = [FusedOp(f, tuple(g.op(names[k]) for k in key)) for f, key in zip(fusions, keys)]
        answers = fits_all(shim, ops, g)
        return [answers[f].ok for f in fusions]

    listed = [places.get(o, "") for o in index.names]
    kernels: list[list[int]] = []
    patterns = list(shim.collective_kernels()) if hasattr(shim, "collective_kernels") else []
    if patterns:  # as `plan`: each pattern proposed whole, then every fold kept as it is
        import numpy as np

        from .kernels import COLLECTIVE, Relations, form

        relations = g.to_facts()
        relations.update(shim.manifest.to_facts())
        kernels = form(index, ask, listed, Relations.of_lists(relations), patterns, cost,
                       cost.view if cost is not None else None)
        ask = keeping_folds_alone(ask, np.array([p == COLLECTIVE for p in listed], dtype=bool))
    return _plan(index, ask, listed, name if name is not None else shim.name(), stats, across_places, cost, progress,
                 kernels)


def _plan(index: PlanIndex, ask, places: list[str], name: str, stats, across_places: bool, cost, progress,
          kernels: list[list[int]] | None = None) -> Plan:
    import numpy as np

    from .kernels import COLLECTIVE

    greedy = Greedy(index, ask, places, across_places=across_places, cost=cost, progress=progress)
    greedy.preform(kernels or [], COLLECTIVE)
    try:
        groups = greedy.run()
    finally:
        if progress is not None:
            progress.close()
    if stats is not None:
        stats.__dict__.update(greedy.stats.__dict__)
    names = index.names
    order, start, size = groups.members()
    live = groups.live()
    live = live[np.argsort(order[start[live]])]  # by first member
    rank = np.zeros(groups.wide, dtype=np.int64)
    rank[live] = np.arange(len(live))
    members = [names[k] for k in np.argsort(rank[groups.group_of], kind="stable").tolist()]
    ends = np.cumsum(size[live]).tolist()
    place = [greedy.place_names[p] or DEVICE for p in groups.place[live].tolist()]
    out = [Group(f"g{i}", tuple(members[a:b]), p) for i, (a, b, p) in enumerate(zip([0, *ends[:-1]], ends, place))]
    return Plan(name, tuple(out))


__all__ = ["Group", "KernelCost", "Plan", "PlanIndex", "Stats", "checked_view", "plan", "plan_graph", "registry_kinds",
           "rules_asker", "shim_machine"]
