"""Check a plan against the program and put its groups in an order that can run:
every statement in exactly one group, producers' groups before consumers' groups."""

from __future__ import annotations

from ...errors import BadInput
from ...planner.plan import Group, Plan
from ...program.model import Program


class BadPlan(BadInput):
    kind = "bad plan"


def unfused(prog: Program, shim: str | None = None) -> Plan:
    """The baseline plan: every statement alone, one kernel each."""
    groups = tuple(Group(s.name, (s.name,), prog.places.get(s.name, "spine")) for s in prog.statements)
    return Plan(shim or prog.shim, groups)


def ordered_groups(plan: Plan, prog: Program) -> list[Group]:
    owner: dict[str, str] = {}
    for g in plan.groups:
        if not g.members:
            raise BadPlan(f"group {g.group} has no members")
        for o in g.members:
            if o not in prog.by_name:
                raise BadPlan(f"group {g.group} holds {o}, which is not a statement of {prog.display}")
            if o in owner:
                raise BadPlan(f"{o} is in two groups, {owner[o]} and {g.group}")
            owner[o] = g.group
        if not (g.place in ("spine", "collective") or (g.place.startswith("chip:") and _chip(g.place, prog))):
            raise BadPlan(f"group {g.group} has place {g.place}; places are chip:K (K < {prog.chips}), spine, collective")
    missing = [s.name for s in prog.statements if s.name not in owner]
    if missing:
        raise BadPlan(f"statements in no group: {', '.join(missing)}")
    import networkx as nx  # here: the planner's cost model imports this package, and plan need not pay for it

    graph = nx.DiGraph()
    index = {g.group: i for i, g in enumerate(plan.groups)}
    graph.add_nodes_from(index)
    for s in prog.statements:
        for t in s.reads:
            w = prog.writer.get(t)
            if w is not None and owner[w] != owner[s.name]:
                graph.add_edge(owner[w], owner[s.name])
    try:
        order = list(nx.lexicographical_topological_sort(graph, key=index.get))
    except nx.NetworkXUnfeasible:
        cycle = " -> ".join(a for a, _ in nx.find_cycle(graph))
        raise BadPlan(f"the groups depend on each other in a cycle: {cycle}") from None
    by_name = {g.group: g for g in plan.groups}
    return [by_name[name] for name in order]


def _chip(place: str, prog: Program) -> bool:
    k = place.split(":", 1)[1]
    return k.isdigit() and int(k) < prog.chips
