"""Subsumption evaluated semi-naively (issue 27) gives, on random weighted graphs with cycles,
the shortest distances that a plain formulation computes: every path length up to a bound
no shortest path exceeds, then a `min` aggregate. Both run on the fast and compiled
engines; long chains (hundreds of rounds of a few tuples) take the fast engine's
tuple-at-a-time rounds, which delete too."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tprules.datalog.analysis.checked import check_rules
from tprules.datalog.engine.compiled import Evaluator
from tprules.datalog.engine.fast import ColumnarEngine
from tprules.datalog.lang.parser import parse_text

ENGINES = {"fast": ColumnarEngine, "compiled": Evaluator}

DECLS = """.decl edge(x: number, y: number, w: number)
.input edge
.decl node(x: number)
node(x) :- edge(x, _, _).
node(y) :- edge(_, y, _).
.decl sp(s: number, x: number, d: number)
"""

SUBSUMPTIVE = DECLS + """.decl dist(s: number, x: number, d: number)
dist(s, s, 0) :- node(s).
dist(s, y, d + w) :- dist(s, x, d), edge(x, y, w).
dist(s, x, d1) <= dist(s, x, d2) :- d2 <= d1.
sp(s, x, d) :- dist(s, x, d).
"""

# Every path length up to BOUND (the sum of the weights: no shortest path is longer), then the least.
PLAIN = DECLS + """.decl reach(s: number, x: number, d: number)
reach(s, s, 0) :- node(s).
reach(s, y, d + w) :- reach(s, x, d), edge(x, y, w), d + w <= BOUND.
sp(s, x, m) :- reach(s, x, _), m = min d : { reach(s, x, d) }.
"""


def distances(rules: str, engine: str, edges: set[tuple[int, int, int]]) -> set[tuple]:
    checked = check_rules(parse_text(rules))
    return set(ENGINES[engine](checked).evaluate({"edge": edges}).tuples("sp"))


def plain(edges) -> str:
    return PLAIN.replace("BOUND", str(sum(w for *_, w in edges)))


graphs = st.sets(st.tuples(st.integers(0, 6), st.integers(0, 6), st.integers(1, 9)), min_size=1, max_size=14)


@pytest.mark.parametrize("engine", sorted(ENGINES))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edges=graphs)
def test_subsumption_gives_the_plain_formulations_shortest_distances(engine, edges):
    assert distances(SUBSUMPTIVE, engine, edges) == distances(plain(edges), engine, edges)


@pytest.mark.parametrize("engine", sorted(ENGINES))
@pytest.mark.parametrize("seed", [1, 2])
def test_a_long_ring_with_chords_gives_the_plain_distances(engine, seed):
    """A ring of 40 nodes: up to 40 rounds of a few tuples each (the fast engine hands such
    rounds to the tuple-at-a-time ones), with a few shortcuts that later rounds improve on."""
    import random

    rng = random.Random(seed)
    n = 40
    edges = {(i, (i + 1) % n, rng.randint(1, 3)) for i in range(n)}
    edges |= {(rng.randrange(n), rng.randrange(n), rng.randint(5, 30)) for _ in range(6)}
    single = SUBSUMPTIVE.replace("dist(s, s, 0) :- node(s).", "dist(0, 0, 0).")
    found = distances(single, engine, edges)
    assert len(found) == n
    assert found == {t for t in distances(plain(edges), engine, edges) if t[0] == 0}


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_a_subsumptive_relation_records_the_round_of_each_tuple(engine):
    """Semi-naive rounds, as for any recursive relation: on a chain, node i's distance is
    first derived in round i - 1 (the fact and what the rules derive from the facts alone
    are round 0), one round after node i - 1's; the whole-relation rounds recorded none."""
    rules = SUBSUMPTIVE.replace("dist(s, s, 0) :- node(s).", "dist(0, 0, 0).")
    edges = {(i, i + 1, 1) for i in range(30)} | {(0, 30, 100)}  # the long edge's distance is later dominated
    model = ENGINES[engine](check_rules(parse_text(rules))).evaluate({"edge": edges})
    rounds = {t: model.rounds["dist"][t] for t in model.tuples("dist")}
    assert rounds == {(0, i, i): max(i - 1, 0) for i in range(31)}
