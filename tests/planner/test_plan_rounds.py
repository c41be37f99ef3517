"""A planning round worked with numpy (planner/greedy.py, state.py, shapes.py) gives what the
order gives one proposal and one merge at a time: the same plan and the same counts on every
example and on random programs; and each numpy step equals its one-at-a-time meaning."""

from __future__ import annotations

import random
import shutil

import networkx as nx
import numpy as np
import pytest
from conftest import FACTS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import tp_programs

from tprules import ops
from tprules.ops import Ops
from tprules.planner import KernelCost, Stats, checked_view, greedy, plan, shim_machine
from tprules.planner.greedy import Greedy
from tprules.planner.index import PASSES, priority_pairs
from tprules.planner.shapes import shape_keys
from tprules.planner.state import ONLY_CONSUMER, ONLY_PRODUCER, GroupArrays
from tprules.workspace import Workspace

EXAMPLES = sorted(p.name for p in FACTS.iterdir() if p.is_dir() and (p / "op.facts").exists())
SHIMS = ("cuda-lane:h100:Bf16", "cpu:x86:F32")
RANDOM = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def one_at_a_time(monkeypatch) -> None:
    """Make the planner choose proposals one by one and merge one at a time on a GroupGraph,
    searching for every cycle: what each numpy step stands for."""
    monkeypatch.setattr(greedy, "MATCHING_ROUNDS", 0)
    monkeypatch.setattr(GroupArrays, "through_another", lambda self, a, b: np.zeros(len(a), dtype=bool))

    def settle(self, a, b, either, why, disjoint):
        ok = np.array([self.legal[x] for x in either.tolist()], dtype=bool)
        return self._one_by_one(a, b, ok, *self._pays(a, b, ok))

    monkeypatch.setattr(Greedy, "settle", settle)


def plans_both_ways(ws: Workspace, monkeypatch, **options):
    stats, slow = Stats(), Stats()
    fast = plan(ws, stats=stats, **options)
    with monkeypatch.context() as m:
        one_at_a_time(m)
        assert plan(ws, stats=slow, **options) == fast
    assert slow == stats
    return fast, stats


@pytest.mark.parametrize("shim", SHIMS)
@pytest.mark.parametrize("example", EXAMPLES)
def test_rounds_plan_as_one_merge_at_a_time(example, shim, monkeypatch):
    ws = Workspace(FACTS / example, shim=shim)
    _, stats = plans_both_ways(ws, monkeypatch)
    assert stats.merged > 0
    plans_both_ways(ws, monkeypatch, machine=None)


@RANDOM
@given(builder=tp_programs(max_statements=16))
def test_rounds_plan_as_one_merge_at_a_time_on_random_programs(tmp_path, monkeypatch, builder):
    out = tmp_path / "p"
    shutil.rmtree(out, ignore_errors=True)
    builder.write(out)
    plans_both_ways(Workspace(out), monkeypatch)


def test_a_generated_model_plans_as_one_merge_at_a_time(tmp_path, monkeypatch):
    from benchmarks.generate import generate

    generate("small", tmp_path / "p")
    _, stats = plans_both_ways(Workspace(tmp_path / "p"), monkeypatch)
    assert stats.merged > 10 and stats.by_pass["vertical"] == stats.merged


class _Groups:
    """A stand-in for GroupArrays: `cyclic` pairs may not merge."""

    def __init__(self, cyclic: set[tuple[int, int]]):
        self.cyclic = cyclic

    def can_merge(self, a: int, b: int) -> bool:
        return (a, b) not in self.cyclic

    def through_another(self, a, b):
        return np.array([(x, y) in self.cyclic and (x + y) % 2 == 0 for x, y in zip(a.tolist(), b.tolist())],
                        dtype=bool)


@pytest.mark.parametrize("rounds", [0, 1, 32])
@pytest.mark.parametrize("seed", range(20))
def test_matching_takes_proposals_in_order_each_group_once(seed, rounds, monkeypatch):
    rng = random.Random(seed)
    groups, wide = rng.randint(2, 30), 64
    a = np.array([rng.randrange(groups) for _ in range(80)], dtype=np.int64)
    b = np.array([rng.randrange(groups) for _ in range(80)], dtype=np.int64)
    keep = a != b
    a, b = a[keep], b[keep]
    why = np.array([rng.choice([0, ONLY_CONSUMER, ONLY_PRODUCER]) for _ in a], dtype=np.int64)
    cyclic = {(x, y) for x, y, w in zip(a.tolist(), b.tolist(), why.tolist()) if not w and rng.random() < 0.4}
    g = Greedy.__new__(Greedy)
    g.groups, g.wide, g._dead = _Groups(cyclic), wide, []
    monkeypatch.setattr(greedy, "MATCHING_ROUNDS", rounds)
    taken = g._matching(a * wide + b, a, b, why).tolist()
    used, expected, dead = set(), [], set()
    for i, (x, y, w) in enumerate(zip(a.tolist(), b.tolist(), why.tolist())):
        if x in used or y in used:
            continue
        if not w and (x, y) in cyclic:
            dead.add(x * wide + y)
            continue
        expected.append(i)
        used |= {x, y}
    assert taken == expected
    assert set(np.concatenate(g._dead).tolist() if g._dead else []) == dead


@st.composite
def dags(draw):
    n = draw(st.integers(2, 16))
    edges = sorted({(i, j) for i in range(n - 1) for j in draw(st.lists(st.integers(i + 1, n - 1), max_size=3))})
    return n, edges, draw(st.randoms(use_true_random=False))


def group_graph(groups: GroupArrays, edges) -> nx.DiGraph:
    graph = nx.DiGraph()
    graph.add_nodes_from(groups.live().tolist())
    of = groups.group_of.tolist()
    graph.add_edges_from((of[x], of[y]) for x, y in edges if of[x] != of[y])
    return graph


def merges_cycle(graph: nx.DiGraph, a: int, b: int) -> bool:
    merged = nx.contracted_nodes(graph, a, b, self_loops=False)
    return not nx.is_directed_acyclic_graph(merged)


@settings(max_examples=200, deadline=None)
@given(dags())
def test_easy_merges_together_keep_slots_topological_and_cycles_found(case):
    n, edges, rng = case
    src = np.array([x for x, _ in edges], dtype=np.int64)
    dst = np.array([y for _, y in edges], dtype=np.int64)
    groups = GroupArrays(n, src, dst, [0] * n)
    for _ in range(n):
        graph = group_graph(groups, edges)
        pos = groups.pos
        assert all(pos[x] < pos[y] for x, y in graph.edges)
        pairs = [(x, y) for x in graph for y in graph if x < y]
        for x, y in rng.sample(pairs, min(len(pairs), 12)):
            cycle = merges_cycle(graph, x, y)
            assert groups.can_merge(x, y) == (not cycle)
            assert not groups.through_another(np.array([x]), np.array([y]))[0] or cycle
        # a round: disjoint easy edges, in a random order, all merged at once
        out, into = dict(graph.out_degree()), dict(graph.in_degree())
        easy = [(x, y) for x, y in graph.edges if out[x] == 1 or into[y] == 1]
        rng.shuffle(easy)
        used, chosen = set(), []
        for x, y in easy:
            if x not in used and y not in used:
                chosen.append((x, y))
                used |= {x, y}
        if not chosen:
            break
        a = np.array([x for x, _ in chosen], dtype=np.int64)
        b = np.array([y for _, y in chosen], dtype=np.int64)
        why = np.array([ONLY_CONSUMER if out[x] == 1 else ONLY_PRODUCER for x, _ in chosen], dtype=np.int64)
        before = groups.group_of.tolist()
        into_one = {x: y for x, y in chosen}
        expected = [into_one.get(g, g) for g in before]  # each statement's group, a merged one named by b
        new = groups.merge_easy(a, b, why, np.zeros(len(a), dtype=np.int64))
        after = groups.group_of.tolist()
        assert len(set(zip(expected, after))) == len(set(expected)) == len(set(after))  # the same partition
        assert set(new.tolist()) == set(after) - set(before)
        assert nx.is_directed_acyclic_graph(group_graph(groups, edges))


@pytest.mark.parametrize("example", ["llama-layer-tp4", "megatron-mlp-tp4", "gather-mlp-tp2", "int8-mlp-tp2"])
def test_shape_keys_are_equal_exactly_when_the_cost_models_keys_are(example):
    ws = Workspace(FACTS / example)
    view = checked_view(ws)
    cost = KernelCost(view, shim_machine(ws.shim))
    rng = random.Random(example)
    n = len(view)
    groups = [sorted(rng.sample(range(n), rng.randint(1, min(n, 5)))) for _ in range(60)]
    groups += [list(range(k, min(n, k + size))) for size in (2, 3, 4) for k in range(n)]
    owner = np.repeat(np.arange(len(groups)), [len(g) for g in groups])
    members = np.array([k for g in groups for k in g], dtype=np.int64)
    keys = shape_keys(view, owner, members)
    tuples = [cost._shape_key(g) for g in groups]
    assert len(set(keys)) == len(set(tuples)) == len(set(zip(keys, tuples)))
    assert cost.seconds_of_groups(owner, members).tolist() == [cost.seconds_of(g) for g in groups]


def reference_horizontal(g: Greedy) -> set[int]:
    """Greedy.horizontal's pairs, one tensor and one reader at a time."""
    group_of, place, first = g.groups.group_of.tolist(), g.groups.place.tolist(), g.groups.first.tolist()
    found = set()
    for readers in g.index.shared:
        by_place: dict[int, list[int]] = {}
        for o in readers:
            siblings = by_place.setdefault(place[group_of[o]], [])
            if group_of[o] not in siblings:
                siblings.append(group_of[o])
        for siblings in by_place.values():
            siblings.sort(key=first.__getitem__)
            if len(siblings) <= greedy.SIBLINGS_ALL_PAIRS:
                found |= {x * g.wide + y for i, x in enumerate(siblings) for y in siblings[i + 1:]}
            else:
                found |= {x * g.wide + y for x, y in zip(siblings, siblings[1:])}
    return found


@pytest.mark.parametrize("siblings", [1, 2, 8])
@pytest.mark.parametrize("example", EXAMPLES)
def test_horizontal_proposals_are_each_tensors_reader_groups(example, siblings, monkeypatch):
    from tprules.planner import PlanIndex

    monkeypatch.setattr(greedy, "SIBLINGS_ALL_PAIRS", siblings)
    ws = Workspace(FACTS / example)
    index = PlanIndex.of(ws.tensor_program)
    g = Greedy(index, lambda names, owner, statements: [True] * len(names), [""] * len(index))
    for _ in range(3):
        pairs, _ = g.horizontal()
        assert set(pairs.tolist()) == reference_horizontal(g) and len(set(pairs.tolist())) == len(pairs)
        g.run_pass(g.vertical, True)


def reference_priority(n, edges, classes, kinds) -> set[tuple[int, int]]:
    """index.priority_pairs, one statement at a time."""
    succ = {o: [d for s, d in edges if s == o] for o in range(n)}
    pred = {o: [s for s, d in edges if d == o] for o in range(n)}
    kind = [kinds.get(c) for c in classes]

    def reach(c):
        if kind[c] == "elementwise":
            return [c]
        if classes[c] not in ops.VIEWS:
            return []
        after = [x for d in succ[c] for x in reach(d)]
        return [c, *after] if after else []

    def closure(seeds, step):
        found, stack = set(), list(seeds)
        while stack:
            for c in step[stack.pop()]:
                if kind[c] in PASSES and c not in found:
                    found.add(c)
                    stack.append(c)
        return found

    pairs = {(o, c) for o in range(n) if kind[o] == Ops.MATMUL for d in succ[o] for c in reach(d)}
    bmm = {o for o in range(n) if classes[o] == Ops.BMM}
    inner = closure(bmm, succ) & closure(bmm, pred)
    return pairs | {(o, c) for o in bmm | inner for c in succ[o] if c in inner or (c in bmm and o in inner)}


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_priority_pairs_are_epilogues_and_attentions_chain(data):
    n = data.draw(st.integers(1, 14))
    classes = data.draw(st.lists(st.sampled_from(["matmul", "bmm", "gelu", "mul", "reshape", "permute", "softmax",
                                                  "sum"]), min_size=n, max_size=n))
    edges = sorted({(i, j) for i in range(n - 1) for j in data.draw(st.lists(st.integers(i + 1, n - 1), max_size=3))})
    kinds = {"matmul": "matmul", "bmm": "matmul", "gelu": "elementwise", "mul": "elementwise", "reshape": "layout",
             "permute": "layout", "softmax": "row", "sum": "reduce"}
    src = np.array([s for s, _ in edges], dtype=np.int64)
    dst = np.array([d for _, d in edges], dtype=np.int64)
    first_src, first_dst = priority_pairs(n, src, dst, classes, kinds)
    found = list(zip(first_src.tolist(), first_dst.tolist()))
    assert found == sorted(set(found)) and set(found) == reference_priority(n, edges, classes, kinds)


def test_shape_keys_tell_an_output_read_outside_from_one_read_inside(tmp_path):
    from tprules.program.builder import ProgramBuilder

    b = ProgramBuilder(chips=1)
    x = b.tensor("x", [2, 4], chip=0)
    for name, source in (("a", x), ("b", "a_out"), ("c", "b_out"), ("d", "a_out")):
        b.stmt(name, "relu", [source], b.tensor(f"{name}_out", [2, 4], chip=0))
    ws = Workspace(b.write(tmp_path / "p"))
    view = checked_view(ws)
    at = view.position
    groups = [[at["a"], at["b"]], [at["b"], at["c"]]]  # alike but for a's output, also read by d outside
    cost = KernelCost(view, shim_machine(ws.shim))
    keys = shape_keys(view, np.array([0, 0, 1, 1]), np.array([k for g in groups for k in g]))
    assert keys[0] != keys[1] and cost._shape_key(groups[0]) != cost._shape_key(groups[1])
