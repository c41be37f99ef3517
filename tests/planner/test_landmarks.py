"""Landmarks (planner/state.py): each statement's reach of them is the data flow's, and a
landmark path between two groups is always one that merging them would close into a cycle."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tprules.planner import state
from tprules.planner.state import GroupArrays, landmark_reach


@st.composite
def dags(draw):
    n = draw(st.integers(1, 40))
    edges = sorted({(i, j) for i in range(n - 1) for j in draw(st.lists(st.integers(i + 1, n - 1), max_size=3))})
    landmarks = draw(st.integers(1, 8))
    merges = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=n))
    return n, edges, landmarks, merges


def arrays(edges) -> tuple[np.ndarray, np.ndarray]:
    return (np.array([x for x, _ in edges], dtype=np.int64).reshape(-1),
            np.array([y for _, y in edges], dtype=np.int64).reshape(-1))


@settings(max_examples=200, deadline=None)
@given(dags())
def test_masks_are_each_statements_reach_of_the_landmarks(case):
    n, edges, landmarks, _ = case
    with pytest.MonkeyPatch.context() as m:
        m.setattr(state, "LANDMARKS", landmarks)
        own, down, up = landmark_reach(n, *arrays(edges))
    graph = nx.DiGraph(edges)
    graph.add_nodes_from(range(n))
    marks = {int(own[k]).bit_length() - 1: k for k in np.flatnonzero(own).tolist()}
    assert sorted(int(own[k]) for k in marks.values()) == [1 << i for i in range(len(marks))]
    assert len(marks) == min(landmarks, n)
    for k in range(n):
        below, above = nx.descendants(graph, k) | {k}, nx.ancestors(graph, k) | {k}
        assert int(down[k]) == sum(1 << i for i, m in marks.items() if m in below)
        assert int(up[k]) == sum(1 << i for i, m in marks.items() if m in above)


def test_an_edge_backwards_gives_no_landmarks():
    own, down, up = landmark_reach(3, np.array([2, 0]), np.array([1, 1]))
    assert not own.any() and not down.any() and not up.any()


def merges_cycle(groups: GroupArrays, edges, a: int, b: int) -> bool:
    of = groups.group_of.tolist()
    graph = nx.DiGraph()
    graph.add_edges_from((of[x], of[y]) for x, y in edges if of[x] != of[y])
    graph.add_nodes_from([a, b])
    return not nx.is_directed_acyclic_graph(nx.contracted_nodes(graph, a, b, self_loops=False))


@settings(max_examples=200, deadline=None)
@given(dags())
def test_a_landmark_path_is_a_cycle_after_any_merges(case):
    n, edges, landmarks, merges = case
    groups = GroupArrays(n, *arrays(edges), [0] * n)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(state, "LANDMARKS", landmarks)
        groups.through_landmark(np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64))  # the landmarks made now
    for x, y in merges:  # merges that keep the groups acyclic, one at a time
        gx, gy = int(groups.group_of[x]), int(groups.group_of[y])
        if gx != gy and groups.can_merge(gx, gy):
            graph = groups.graph()
            graph.merge(gx, gy)
            new = graph._next - 1
            groups.read_back(graph)
            groups.first[new] = min(groups.first[gx], groups.first[gy])
    live = groups.live().tolist()
    pairs = [(x, y) for x in live for y in live if x < y]
    if not pairs:
        return
    a, b = (np.array(side, dtype=np.int64) for side in zip(*pairs))
    found = groups.through_landmark(a, b)
    for (x, y), hit in zip(pairs, found.tolist()):
        assert not hit or merges_cycle(groups, edges, x, y)
        assert not hit or not groups.can_merge(x, y)


def test_landmarks_find_a_cycle_many_steps_long():
    # a chain 0 → 1 → ... → 99 and a side reader 100 of statement 0 feeding statement 99:
    # merging 0 and 99 closes a cycle that no two steps show
    n = 101
    edges = [(k, k + 1) for k in range(99)] + [(0, 100), (100, 99)]
    order = sorted(range(n), key=lambda k: (k if k < 100 else 0.5))  # program order, a topological one
    at = {k: i for i, k in enumerate(order)}
    groups = GroupArrays(n, *arrays([(at[x], at[y]) for x, y in edges]), [0] * n)
    a, b = np.array([at[0]]), np.array([at[99]])
    assert groups.through_landmark(a, b).tolist() == [True]
    assert groups.through_another(a, b).tolist() == [True]
    assert not groups.can_merge(at[0], at[99])
    assert groups.through_landmark(np.array([at[98]]), np.array([at[99]])).tolist() == [False]  # an edge, no path
