"""The one fact container (program/facts.py): a relation held as rows or as columns is
written the same, byte for byte; each way reads as the other."""

from __future__ import annotations

import pytest

from tprules.program.builder import ProgramBuilder
from tprules.program.facts import Facts, strings
from tprules.program.schema import PROGRAM


def _small() -> ProgramBuilder:
    b = ProgramBuilder(chips=2)
    x = b.tensor("x", [4, 8], spine=True)
    w = b.tensor("w@0", [8, 8], chip=0)
    b.stmt("mm@0", "matmul", [x, w], b.tensor("h@0", [4, 8], chip=0), module="model.layers.0.mlp")
    b.stmt("relu@0", "relu", ["h@0"], b.tensor("r@0", [4, 8], chip=0))
    return b


def _as_columns(facts: Facts) -> Facts:
    """The same facts with every relation held as columns."""
    out = Facts()
    for rel in facts:
        out.set(rel, facts.columns(rel))
    return out


def test_every_program_relation_is_there_from_the_start_in_spec_order():
    assert list(Facts()) == list(PROGRAM)
    assert all(Facts().count(rel) == 0 for rel in PROGRAM)


def test_rows_and_columns_write_the_same_files(tmp_path):
    b = _small()
    b.facts.write(tmp_path / "rows")
    _as_columns(b.facts).write(tmp_path / "columns")
    rows, columns = sorted((tmp_path / "rows").iterdir()), sorted((tmp_path / "columns").iterdir())
    assert [p.name for p in rows] == [p.name for p in columns] != []
    assert [p.read_bytes() for p in rows] == [p.read_bytes() for p in columns]


def test_a_relation_written_twice_is_written_once(tmp_path):
    f = Facts()
    f["spine"].extend([("x",), ("y",), ("x",)])
    f.write(tmp_path)
    assert (tmp_path / "spine.facts").read_text() == "x\ny\n"
    assert f.count("spine") == 2
    assert f.column("spine", 0).to_pylist() == ["x", "y"]  # the distinct rows, as written


def test_an_empty_relation_writes_no_file_and_old_files_go(tmp_path):
    (tmp_path / "stale.facts").write_text("x\n")
    Facts().write(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_columns_read_as_rows_of_strings_and_are_held_as_rows_after():
    f = Facts()
    f.set("shape", [strings(["x", "x"]), strings(["0", "1"]), strings(["4", "8"])])
    assert f.count("shape") == 2
    f["shape"].append(("y", 0, 2))
    assert f["shape"] == [("x", "0", "4"), ("x", "1", "8"), ("y", 0, 2)]
    assert f.column("shape", 2).to_pylist() == ["4", "8", "2"]


def test_rows_read_as_columns_are_held_as_columns_after(tmp_path):
    b = _small()
    b.facts.column("reads", 2)
    assert b.facts["reads"] == [("mm@0", "0", "x"), ("mm@0", "1", "w@0"), ("relu@0", "0", "h@0")]
    b.write(tmp_path)
    assert (tmp_path / "reads.facts").read_text() == "mm@0\t0\tx\nmm@0\t1\tw@0\nrelu@0\t0\th@0\n"


def test_numbers_are_written_in_decimal_either_way():
    f = Facts()
    f["shape"].append(("x", 0, 4096))
    assert f.columns("shape")[2].to_pylist() == ["4096"]


def test_setting_rows_replaces_columns():
    f = Facts()
    f.set("spine", [strings(["x"])])
    f["spine"] = [("y",)]
    assert f.column("spine", 0).to_pylist() == ["y"]


@pytest.mark.parametrize("rel, arity", [("reads", 3), ("collective", 2), ("chips", 1), ("member", 2)])
def test_a_relations_arity_is_spec_s(rel, arity):
    assert Facts().arity(rel) == arity
    assert len(Facts().columns(rel)) == arity


def test_a_relation_outside_the_program_s_is_named_by_adding_to_it(tmp_path):
    b = _small()
    b.add_facts("shim", [("cuda-lane:h100:Bf16",)])
    assert "shim" in b.facts and b.facts.arity("shim") == 1
    b.write(tmp_path)
    assert (tmp_path / "shim.facts").read_text() == "cuda-lane:h100:Bf16\n"
