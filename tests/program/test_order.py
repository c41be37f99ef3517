"""Statement order (program/order.py): program order as written, producers first where it
is not, ties in program order, and a cycle named from its first statement at its line."""

from __future__ import annotations

import pytest

from tprules.datalog.facts.base import load_fact_dir
from tprules.datalog.facts.columns import Columns
from tprules.errors import IllFormed
from tprules.program.order import program_order, topological_ids, topological_order
from tprules.program.schema import PROGRAM, SPEC

# name → (statements in op.facts order as (name, reads, writes), the topological order)
CASES = {
    "in_order_stays": ([("a", ["x"], "t"), ("b", ["t"], "u")], ["a", "b"]),
    "a_reader_first_goes_after": ([("b", ["t"], "u"), ("a", ["x"], "t")], ["a", "b"]),
    "ties_keep_program_order": ([("c", ["t"], "v"), ("b", ["x"], "u"), ("a", ["x"], "t")], ["b", "a", "c"]),
    "a_statement_reading_nothing_computed_stays": ([("z", ["x"], "w"), ("b", ["t"], "u"), ("a", ["x"], "t")],
                                                   ["z", "a", "b"]),
}


def _folder(tmp_path, statements):
    rows = {"op": [(o, "add") for o, _, _ in statements], "writes": [(o, t) for o, _, t in statements],
            "reads": [(o, i, r) for o, rs, _ in statements for i, r in enumerate(rs)]}
    for rel, tuples in rows.items():
        (tmp_path / f"{rel}.facts").write_text("".join("\t".join(map(str, t)) + "\n" for t in tuples))
    facts = load_fact_dir(tmp_path, {rel: r.types for rel, r in PROGRAM.items()})
    return facts, Columns(facts, {rel: r.types for rel, r in SPEC.items()})


@pytest.mark.parametrize("case", sorted(CASES))
def test_topological_order(case, tmp_path):
    statements, expected = CASES[case]
    facts, columns = _folder(tmp_path, statements)
    assert topological_order(facts) == expected
    names = columns.symbols.names
    assert [names[i] for i in topological_ids(facts, columns).tolist()] == expected


def test_program_order_is_op_facts_order(tmp_path):
    facts, columns = _folder(tmp_path, CASES["ties_keep_program_order"][0])
    assert [columns.symbols.names[i] for i in program_order(columns).tolist()] == ["c", "b", "a"]


def test_a_cycle_is_named_from_its_first_statement_at_its_line(tmp_path):
    facts, columns = _folder(tmp_path, [("z", ["x"], "w"), ("b", ["t"], "u"), ("a", ["u"], "t")])
    with pytest.raises(IllFormed) as err:
        topological_ids(facts, columns)
    assert str(err.value).endswith("op.facts:2: ill-formed: the data flow has a cycle: b -> a -> b "
                                   "(each statement reads what the one before it writes)")
