"""The sharding table (frontends/sharding/table.py): a record for every registry class, none
for anything else, and each column what the Sharder reads it for."""

from __future__ import annotations

import pytest

from tprules.frontends.sharding import rules, table
from tprules.frontends.sharding.placement import PARTIAL, REPLICATE, Shard, Split, plain
from tprules.ops import CLASSES, ELEMENTWISE, ROW, Ops


@pytest.mark.parametrize("cls", list(Ops))
def test_every_registry_class_has_a_record(cls):
    assert isinstance(table.TABLE[cls], table.Sharding)


def test_the_table_holds_the_registry_s_classes_and_no_other_name():
    assert list(table.TABLE) == list(CLASSES)


def test_a_table_without_a_class_fails_at_import():
    # what table.py hands `require`: one class fewer is an ImportError naming it
    from tprules.ops import require

    short = {op: e for op, e in table.TABLE.items() if op != Ops.SOFTMAX}
    with pytest.raises(ImportError, match="softmax"):
        require(short, set(Ops), "the sharding table")


@pytest.mark.parametrize("name", ["frobnicate", "Matmul", ""])
def test_a_name_that_is_no_class_has_no_rule_to_fall_through_to(name):
    with pytest.raises(KeyError, match="no class"):
        table.rule(name)
    with pytest.raises(KeyError):
        table.partial_through(name, [PARTIAL])


def test_transpose_moves_its_split_as_a_layout_class_not_as_an_elementwise_one():
    x = Shard((plain(0, 2, 8),))
    assert table.rule(Ops.TRANSPOSE)({}, [x], [(8, 4)], (4, 8), 2) == Shard((plain(1, 2, 8),))
    assert table.rule(Ops.TRANSPOSE) is not rules.elementwise and not table.entry(Ops.TRANSPOSE).blockwise


@pytest.mark.parametrize("cls", sorted(ELEMENTWISE))
def test_an_elementwise_class_broadcasts_and_reads_local_blocks(cls):
    e = table.entry(cls)
    assert e.rule is rules.elementwise and e.blockwise


@pytest.mark.parametrize("cls", sorted(ROW))
def test_a_row_class_keeps_its_rows_split(cls):
    assert table.entry(cls).rule is rules.row


@pytest.mark.parametrize(("cls", "ins", "through"), [
    (Ops.ADD, [PARTIAL, PARTIAL], True), (Ops.ADD, [PARTIAL, REPLICATE], False),
    (Ops.MUL, [PARTIAL, REPLICATE], True), (Ops.MUL, [PARTIAL, PARTIAL], False),
    (Ops.DIV, [PARTIAL, REPLICATE], True), (Ops.DIV, [REPLICATE, PARTIAL], False),
    (Ops.TAKE_ROWS, [PARTIAL, REPLICATE], True), (Ops.EXP, [PARTIAL], False), (Ops.RESHAPE, [REPLICATE], False)])
def test_a_partial_goes_through_a_class_linear_in_it(cls, ins, through):
    assert table.partial_through(cls, ins) is through


def test_only_views_of_a_sum_reach_their_rule_partial():
    assert {op for op, e in table.TABLE.items() if e.partial_view} == {Ops.RESHAPE, Ops.PERMUTE}


def test_the_classes_reading_split_experts_by_id_or_groups():
    assert {op: e.by_expert for op, e in table.TABLE.items() if e.by_expert} == \
        {Ops.TAKE_ROWS: "ids", Ops.GROUPED_MATMUL: "groups"}


def test_a_slice_of_packed_parts_and_a_vocabulary_parallel_embedding_have_chip_attributes():
    packed = Shard((Split(0, 2, 8),))  # two packed parts of 16 rows, each cut in 2
    slice_attrs = table.entry(Ops.SLICE).local_attrs({"axis": "0", "start": "0", "end": "16"}, [packed], [(32, 4)], 2)
    assert slice_attrs is not None and slice_attrs(1) == {"start": "0", "end": "8"}
    vocab = table.entry(Ops.EMBEDDING).local_attrs({}, [Shard((plain(0, 2, 10),)), REPLICATE], [(10, 4), (1, 3)], 2,
                                                   table="vocab")
    assert vocab is not None and vocab(1) == {"offset": "5"}


def test_a_vocabulary_parallel_table_gives_a_partial_and_a_hidden_parallel_one_a_split_result():
    split_rows, split_hidden = Shard((plain(0, 2, 10),)), Shard((plain(1, 2, 4),))
    shapes, out = [(10, 4), (1, 3)], (1, 3, 4)
    assert table.rule(Ops.EMBEDDING)({}, [split_rows, REPLICATE], shapes, out, 2, table="vocab") == PARTIAL
    assert table.rule(Ops.EMBEDDING)({}, [split_hidden, REPLICATE], shapes, out, 2, table="embedding_colwise") == \
        Shard((plain(2, 2, 4),))
    with pytest.raises(table.NotShardable, match="replicated ids"):
        table.rule(Ops.EMBEDDING)({}, [split_rows, split_rows], shapes, out, 2, table="vocab")
