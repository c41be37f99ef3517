"""Statement order: program order and a topological order of the data flow (the `topo`
input of the rules), the one place either is computed.

Program order is `op.facts`' order (each statement's first row). The topological order is
found on the facts' encoded columns (datalog/facts/columns.py), in symbol ids: a program
written in order is its program order as it stands (the common case, nothing sorted); any
other is ordered by Kahn's algorithm with a heap keyed by program order, so ties keep
program order. Computed here rather than in Datalog: a topological order is a graph fact
that Datalog expresses badly, and the `cycle` rule only needs it to bound its search.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Iterable, Mapping

import numpy as np

from ..datalog.facts.base import FactBase
from ..datalog.facts.columns import Columns
from ..errors import IllFormed
from .schema import SPEC


def data_flow(facts: FactBase) -> dict[str, set[str]]:
    """Statement → statements that read what it writes."""
    writer = {t: o for o, t in facts.tuples("writes")}
    succ: dict[str, set[str]] = defaultdict(set)
    for o, _, t in facts.tuples("reads"):
        w = writer.get(t)
        if w is not None:
            succ[w].add(o)
    return succ


def program_order(columns) -> np.ndarray:
    """The statements in program order (op.facts, each one's first row), as symbol ids."""
    return columns["op"][:, 0]


def _flow(columns, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(producer, reader) of every read of a statement's output, as indices into `ids`."""
    size = len(columns.symbols.names)
    at = np.full(size, -1, dtype=np.int64)  # symbol id → statement index in program order
    at[ids] = np.arange(len(ids))
    writes, reads = columns["writes"], columns["reads"]
    writer = np.full(size, -1, dtype=np.int64)
    writer[writes[:, 1]] = at[writes[:, 0]]
    producer, reader = writer[reads[:, 2]], at[reads[:, 0]]
    made = producer >= 0
    return producer[made], reader[made]


def kahn(succ: Mapping[int, Iterable[int]], indegree: list[int]) -> list[int]:
    """Kahn's algorithm over statements 0 .. len(indegree) - 1 numbered in program order,
    ties broken by that order (a heap). The order found: shorter than the statements where
    a cycle stops it (`indegree`, counted down, is above 0 at the statements left)."""
    ready = [k for k in range(len(indegree)) if indegree[k] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        k = heapq.heappop(ready)
        order.append(k)
        for nxt in succ.get(k, ()):
            indegree[nxt] -= 1
            if indegree[nxt] == 0:
                heapq.heappush(ready, nxt)
    return order


def topological_ids(facts: FactBase, columns) -> np.ndarray:
    """Every statement, producers before consumers, ties in program order, as the facts'
    symbol ids (a cycle raises IllFormed, naming it)."""
    ids = program_order(columns)
    producer, reader = _flow(columns, ids)
    if np.all(producer < reader):
        return ids  # written in order already: nothing to sort
    n = max(len(ids), 1)
    flow = np.unique(producer * n + reader)
    src, dst = (flow // n).tolist(), (flow % n).tolist()
    succ: dict[int, list[int]] = defaultdict(list)
    indegree = [0] * len(ids)
    for a, b in zip(src, dst):
        succ[a].append(b)
        indegree[b] += 1
    order = kahn(succ, indegree)
    if len(order) < len(ids):
        raise _cycle(facts, columns, ids, succ, {k for k in range(len(ids)) if indegree[k] > 0})
    return ids[np.array(order, dtype=np.int64)]


def topological_order(facts: FactBase, columns=None) -> list[str]:
    """`topological_ids` by name; `columns` are the facts encoded (made when not given)."""
    if columns is None:
        columns = Columns(facts, {rel: r.types for rel, r in SPEC.items()})
    names = columns.symbols.names
    return [names[i] for i in topological_ids(facts, columns).tolist()]


def _cycle(facts: FactBase, columns, ids: np.ndarray, succ: dict[int, list[int]], stuck: set[int]) -> IllFormed:
    """The error naming one cycle among the statements Kahn's algorithm could not order,
    from its first in program order, at that statement's `op` fact."""
    import networkx as nx

    graph = nx.DiGraph((a, b) for a in stuck for b in succ.get(a, ()) if b in stuck)
    edges = nx.find_cycle(graph, source=min(stuck))
    cycle = [a for a, _ in edges]
    start = cycle.index(min(cycle))
    cycle = cycle[start:] + cycle[:start]
    names = columns.symbols.names
    statements = [names[ids[k]] for k in cycle]
    op = tuple(names[i] for i in columns["op"][cycle[0]].tolist())
    return IllFormed(f"the data flow has a cycle: {' -> '.join(statements + statements[:1])} "
                     "(each statement reads what the one before it writes)", facts.where("op", op))
