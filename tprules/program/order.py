"""Program order and a topological order of the data flow (the `topo` input of the rules).

Computed here rather than in Datalog: a topological order is a graph fact that Datalog
expresses badly, and the `cycle` rule only needs it to bound its search. Kahn's algorithm
with a heap keyed by program order, so a program written in order keeps its order.
"""

from __future__ import annotations

import heapq
from collections import defaultdict

import numpy as np

from ..datalog.facts.base import FactBase
from ..errors import IllFormed


def data_flow(facts: FactBase) -> dict[str, set[str]]:
    """Statement → statements that read what it writes."""
    writer = {t: o for o, t in facts.tuples("writes")}
    succ: dict[str, set[str]] = defaultdict(set)
    for o, _, t in facts.tuples("reads"):
        w = writer.get(t)
        if w is not None:
            succ[w].add(o)
    return succ


def _in_order(columns, statements: np.ndarray) -> bool:
    """Does every producer come before its readers in program order? (on encoded columns)"""
    size = len(columns.symbols.names)
    rank = np.full(size, -1, dtype=np.int64)
    rank[statements] = np.arange(len(statements))
    writes, reads = columns["writes"], columns["reads"]
    writer = np.full(size, -1, dtype=np.int64)
    writer[writes[:, 1]] = writes[:, 0]
    producer = writer[reads[:, 2]]
    made = producer >= 0
    return bool(np.all(rank[producer[made]] < rank[reads[made, 0]]))


def topological_ids(facts: FactBase, columns) -> np.ndarray:
    """`topological_order` in the facts' symbol ids, found on the encoded columns: a program
    written in order is its `op` column as it stands; any other is ordered by Kahn's
    algorithm over statement indices (a cycle raises as `topological_order` does)."""
    ids = columns["op"][:, 0]
    if _in_order(columns, ids):
        return ids
    size = len(columns.symbols.names)
    n = len(ids)
    at = np.full(size, -1, dtype=np.int64)  # symbol id → statement index in op.facts order
    at[ids] = np.arange(n)
    writes, reads = columns["writes"], columns["reads"]
    writer = np.full(size, -1, dtype=np.int64)
    writer[writes[:, 1]] = at[writes[:, 0]]
    producer, reader = writer[reads[:, 2]], at[reads[:, 0]]
    made = producer >= 0
    flow = np.unique(producer[made] * max(n, 1) + reader[made])
    src, dst = (flow // max(n, 1)).tolist(), (flow % max(n, 1)).tolist()
    succ: dict[int, list[int]] = defaultdict(list)
    indegree = [0] * n
    for a, b in zip(src, dst):
        succ[a].append(b)
        indegree[b] += 1
    ready = [k for k in range(n) if indegree[k] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        k = heapq.heappop(ready)
        order.append(k)
        for nxt in succ.get(k, ()):
            indegree[nxt] -= 1
            if indegree[nxt] == 0:
                heapq.heappush(ready, nxt)
    if len(order) < n:
        topological_order(facts)  # raises the error that names a cycle
    return ids[np.array(order, dtype=np.int64)]


def topological_order(facts: FactBase, columns=None) -> list[str]:
    """Every statement, producers before consumers, ties in program (op.facts) order.
    `columns` are the facts encoded: a program written in order is recognised on them."""
    if columns is not None:
        ids = columns["op"][:, 0]
        names = columns.symbols.names
        statements = [names[i] for i in ids.tolist()]
        if _in_order(columns, ids):
            return statements  # written in order already (the common case): nothing to sort
    else:
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
        cycle = _a_cycle(succ, {o for o in statements if indegree[o] > 0}, rank)
        first = ("op", next(t for t in facts.ordered("op") if t[0] == cycle[0]))
        raise IllFormed(f"the data flow has a cycle: {' -> '.join(cycle + cycle[:1])} "
                        "(each statement reads what the one before it writes)", facts.where(*first))
    return order


def _a_cycle(succ: dict[str, set[str]], stuck: set[str], rank: dict[str, int]) -> list[str]:
    """One cycle among the statements Kahn's algorithm could not order, from its first in program order."""
    import networkx as nx

    graph = nx.DiGraph((a, b) for a in stuck for b in succ.get(a, ()) if b in stuck)
    edges = nx.find_cycle(graph, source=min(stuck, key=rank.__getitem__))
    cycle = [a for a, _ in edges]
    start = cycle.index(min(cycle, key=rank.__getitem__))
    return cycle[start:] + cycle[:start]
