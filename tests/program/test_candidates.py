"""An imported program's candidates (program/candidates.py): each producer → consumer pair,
then each pair of siblings, each pair once, in a fixed order; rows or columns alike."""

from __future__ import annotations

import pytest

from tprules.program.builder import ProgramBuilder
from tprules.program.candidates import candidates
from tprules.program.facts import Facts

# name → (statements as (name, reads, writes), the candidates expected in order)
CASES = {
    "a_chain": ([("a", ["x"], "t"), ("b", ["t"], "u"), ("c", ["u"], "v")], ["a__b", "b__c"]),
    "siblings_after_producers": ([("a", ["x"], "t"), ("b", ["t"], "u"), ("c", ["t"], "v")],
                                 ["a__b", "a__c", "b__c"]),
    "a_program_input_makes_no_siblings": ([("a", ["x"], "t"), ("b", ["x"], "u")], []),
    "a_pair_both_ways_once": ([("a", ["x"], "t"), ("b", ["t"], "u"), ("c", ["t", "u"], "v")],
                              ["a__b", "a__c", "b__c"]),
    "a_statement_reading_twice_is_one_reader": ([("a", ["x"], "t"), ("b", ["t", "t"], "u")], ["a__b"]),
    "readers_in_order_of_first_read": ([("a", ["x"], "t"), ("c", ["x"], "w"), ("b", ["w", "t"], "u"),
                                        ("d", ["t"], "v")], ["a__b", "a__d", "c__b", "b__d"]),
    "nothing_reads_anything_computed": ([("a", ["x"], "t")], []),
}


def _program(statements) -> ProgramBuilder:
    b = ProgramBuilder(chips=1)
    b.tensor("x", [2], spine=True)
    for name, reads, out in statements:
        b.stmt(name, "add", reads, b.tensor(out, [2], spine=True))
    return b


def _fusions(facts: Facts) -> list[str]:
    return list(dict.fromkeys(f for f, _ in facts["member"]))


@pytest.mark.parametrize("case", sorted(CASES))
def test_candidates(case):
    statements, expected = CASES[case]
    b = _program(statements)
    assert candidates(b.facts) == len(expected)
    assert _fusions(b.facts) == expected


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_candidate_holds_its_two_statements_in_its_name_s_order(case):
    b = _program(CASES[case][0])
    candidates(b.facts)
    assert all(f == f"{a}__{c}" for (f, a), (_, c) in zip(b.facts["member"][0::2], b.facts["member"][1::2]))


def test_candidates_replace_earlier_ones():
    b = _program(CASES["a_chain"][0])
    b.candidate("old", ["a", "c"])
    candidates(b.facts)
    assert _fusions(b.facts) == ["a__b", "b__c"]


def test_columns_give_the_candidates_rows_give():
    b = _program(CASES["readers_in_order_of_first_read"][0])
    columns = Facts()
    for rel in b.facts:
        columns.set(rel, b.facts.columns(rel))
    assert candidates(columns) == candidates(b.facts)
    assert columns["member"] == b.facts["member"]
