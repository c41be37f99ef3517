"""Program order and a topological order of the data flow (the `topo` input of the rules).

Computed here rather than in Datalog: a topological order is a graph fact that Datalog
expresses badly, and the `cycle` rule only needs it to bound its search. Kahn's algorithm
with a heap keyed by program order, so a program written in order keeps its order.
"""

from __future__ import annotations

import heapq
from collections import defaultdict

from ..errors import IllFormed
from .facts import FactBase


def data_flow(facts: FactBase) -> dict[str, set[str]]:
    """Statement → statements that read what it writes."""
    writer = {t: o for o, t in facts.tuples("writes")}
    succ: dict[str, set[str]] = defaultdict(set)
    for o, _, t in facts.tuples("reads"):
        w = writer.get(t)
        if w is not None:
            succ[w].add(o)
    return succ


def topological_order(facts: FactBase) -> list[str]:
    """Every statement, producers before consumers, ties in program (op.facts) order."""
    statements = [o for o, _ in facts.ordered("op")]
    rank = {o: i for i, o in enumerate(statements)}
    succ = data_flow(facts)
    if all(rank[o] < rank[nxt] for o, targets in succ.items() for nxt in targets):
        return statements  # written in order already (the common case): no sorting needed
    indegree = dict.fromkeys(statements, 0)
    for targets in succ.values():
        for o in targets:
            indegree[o] += 1
    ready = [(rank[o], o) for o in statements if indegree[o] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, o = heapq.heappop(ready)
        order.append(o)
        for nxt in succ.get(o, ()):
            indegree[nxt] -= 1
            if indegree[nxt] == 0:
                heapq.heappush(ready, (rank[nxt], nxt))
    if len(order) < len(statements):
        stuck = [o for o in statements if indegree[o] > 0]
        first = ("op", next(t for t in facts.ordered("op") if t[0] == stuck[0]))
        shown = ", ".join(stuck[:5]) + (", ..." if len(stuck) > 5 else "")
        raise IllFormed(f"the data flow has a cycle through {shown}", facts.where(*first))
    return order
