"""A recursion that derives one tuple per round (issue 27): every round is cheap on the
compiled engine, and the fast engine hands such a stratum over to it part way, with the
same tuples and the same round of first derivation (which proofs rely on)."""

from __future__ import annotations

from tprules.datalog.analysis.checked import check_rules
from tprules.datalog.engine.compiled import Evaluator
from tprules.datalog.engine.fast import ColumnarEngine
from tprules.datalog.lang.parser import parse_text

CHAIN = """
.decl a(x: number)
.decl b(x: number)
.decl c(y: number)
.decl d(y: number)
b(0).
c(1). c(2). c(3).
d(2). d(3). d(4).
b(x + 1) :- a(x), x < 200.
a(x) :- b(x), c(y), d(y).
"""


def test_one_tuple_per_round_matches_across_engines():
    checked = check_rules(parse_text(CHAIN))
    fast_engine = ColumnarEngine(checked)
    fast = fast_engine.evaluate({})
    compiled = Evaluator(checked).evaluate({})
    assert fast_engine._tuples is not None  # the fast engine did hand the stratum over
    assert fast.tuples("b") == compiled.tuples("b") == {(x,) for x in range(201)}
    assert fast.tuples("a") == compiled.tuples("a") == {(x,) for x in range(201)}
    for rel in ("a", "b"):
        assert dict(fast.rounds[rel]) == dict(compiled.rounds[rel])
    assert compiled.rounds["b"][(200,)] == 399  # b(k) in round 2k - 1: a(k - 1), then b(k)


def test_a_wide_recursion_stays_columnar():
    checked = check_rules(parse_text("""
.decl e(x: number, y: number)
.decl p(x: number, y: number)
e(x, x + 1) :- x = range(0, 400), x % 10 != 9.  // 40 chains of 10: every round adds 40 or more
p(x, y) :- e(x, y).
p(x, z) :- p(x, y), e(y, z).
"""))
    engine = ColumnarEngine(checked)
    assert len(engine.evaluate({}).tuples("p")) == 40 * (9 * 10 // 2)
    assert engine._tuples is None
