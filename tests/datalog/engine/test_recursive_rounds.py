"""A recursive stratum's bookkeeping (datalog/engine/fast.py): the keys seen so far kept as sorted
runs that merge as they grow, and a linear stratum's relation grown by a list of rounds."""

from __future__ import annotations

import numpy as np

from tprules.datalog.engine.fast import _linear, _Seen
from tprules.datalog.lang.parser import parse_text


def test_seen_keeps_exactly_the_rows_not_seen_before_over_many_rounds():
    rng = np.random.default_rng(7)
    start = rng.integers(0, 50, size=(40, 2))
    seen = _Seen(("symbol", "symbol"), 50, start)
    known = set(map(tuple, start.tolist()))
    for _ in range(60):  # rounds of every size, repeats within a round and against old rounds
        new = rng.integers(0, 50, size=(int(rng.integers(0, 80)), 2))
        got = seen.fresh(new, None)
        expected = []
        for row in map(tuple, new.tolist()):
            if row not in known and row not in expected:
                expected.append(row)
        assert sorted(map(tuple, got.tolist())) == sorted(expected)
        assert len(got) == len(expected)  # each row once
        known.update(expected)
        sizes = [len(r) for r in seen.runs]
        assert all(len(np.unique(r)) == len(r) and np.all(np.diff(r) > 0) for r in seen.runs)
        assert all(a > 2 * b for a, b in zip(sizes, sizes[1:])), sizes  # geometric: O(log n) runs
        assert sum(sizes) == len(known)


def test_a_stratum_is_linear_when_each_rule_reads_it_once():
    rules = parse_text("""
        .decl e(a: symbol, b: symbol)
        .decl p(a: symbol, b: symbol)
        p(X, Y) :- e(X, Y).
        p(X, Z) :- p(X, Y), e(Y, Z).
        .decl q(a: symbol, b: symbol)
        q(X, Z) :- q(X, Y), q(Y, Z).
    """, "t.dl").rules
    by_head = {}
    for rule in rules:
        by_head.setdefault(rule.head.rel, []).append(rule)
    assert _linear(by_head["p"], frozenset({"p"}))
    assert not _linear(by_head["q"], frozenset({"q"}))
