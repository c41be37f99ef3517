"""GroupGraph: merges keep the graph of groups acyclic and its slot order topological."""

from __future__ import annotations

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tprules.planner.groups import GroupGraph


def contracted(gg: GroupGraph, flows: dict[str, list[str]], a: int, b: int) -> nx.DiGraph:
    """The graph of groups with a and b merged, built from scratch."""
    of = {o: ("merged" if g in (a, b) else g) for o, g in gg.group_of.items()}
    graph = nx.DiGraph()
    graph.add_nodes_from(set(of.values()))
    graph.add_edges_from((of[x], of[y]) for x, ys in flows.items() for y in ys if of[x] != of[y])
    return graph


@st.composite
def dags(draw):
    n = draw(st.integers(2, 14))
    names = [f"s{i}" for i in range(n)]
    flows = {o: sorted({names[j] for j in draw(st.lists(st.integers(i + 1, n - 1), max_size=3))})
             if i < n - 1 else [] for i, o in enumerate(names)}
    merges = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=2 * n))
    return names, flows, merges


@settings(max_examples=200, deadline=None)
@given(dags())
def test_merges_agree_with_networkx_and_keep_a_topological_order(case):
    names, flows, merges = case
    gg = GroupGraph(names, flows)
    for x, y in merges:
        a, b = gg.group_of[names[x]], gg.group_of[names[y]]
        if a == b:
            continue
        assert gg.can_merge(a, b) == nx.is_directed_acyclic_graph(contracted(gg, flows, a, b))
        if gg.can_merge(a, b):
            union = sorted(gg.members[a] + gg.members[b])
            new = gg.merge(a, b)
            assert sorted(gg.members[new]) == union and a not in gg.members and b not in gg.members
            assert gg.is_acyclic()
    # edges agree with the statements' data flow
    expected = {(gg.group_of[x], gg.group_of[y]) for x, ys in flows.items() for y in ys
                if gg.group_of[x] != gg.group_of[y]}
    assert {(a, b) for a, bs in gg.succ.items() for b in bs} == expected
    assert {(a, b) for b, as_ in gg.pred.items() for a in as_} == expected
    assert sorted(o for ms in gg.members.values() for o in ms) == sorted(names)


def test_a_merge_that_would_cycle_is_refused():
    gg = GroupGraph(["a", "b", "c"], {"a": ["b"], "b": ["c"]})
    with pytest.raises(ValueError, match="cycle"):
        gg.merge(gg.group_of["a"], gg.group_of["c"])


def test_siblings_merge_and_the_order_is_repaired():
    # a feeds b and d; c feeds d. Merging b with c puts c's slot before b's consumers.
    gg = GroupGraph(["a", "b", "c", "d"], {"a": ["b", "d"], "b": [], "c": ["d"]})
    new = gg.merge(gg.group_of["b"], gg.group_of["c"])
    assert gg.is_acyclic() and gg.groups()[0] == gg.group_of["a"] and new in gg.groups()
