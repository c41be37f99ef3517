"""The columnar fact reader (pyarrow) reads every file exactly as the line reader, which
defines SPEC §2's layout: the same rows, the same line of each row, the same error.

Files are random text over an alphabet that holds what a fact file has and what tempts a
CSV reader to read it differently (quotes, CR, hexadecimal, signs, spaces, blank lines).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tprules.errors import FactError
from tprules.program.columns import Symbols, decode_rows
from tprules.program.facts import FactBase, load_fact_dir
from tprules.program.reader import read_files, read_lines

TYPES = [("symbol",), ("number",), ("symbol", "number"), ("symbol", "symbol"), ("symbol", "number", "symbol"),
         ("number", "number")]
CELLS = st.one_of(
    st.sampled_from(["a", "b_0", "x y", "", "0", "7", "-3", "+5", " 4", "4 ", "0x1f", "0X2", "1_000", "٣", '"q"',
                     "'s'", "9223372036854775807", "-9223372036854775808", "9223372036854775808", "é", "NA", "null",
                     "\\t", "1e3", "5.0", "\x0b5"]),
    st.text(alphabet="ab01-+ x\"'\\_é", max_size=4))
LINE_ENDS = st.sampled_from(["\n", "\n", "\n", "\n\n", "\r\n", "\r", "\t\n", " \n"])


@st.composite
def fact_files(draw):
    types = draw(st.sampled_from(TYPES))
    lines = []
    for _ in range(draw(st.integers(0, 6))):
        width = draw(st.sampled_from([len(types)] * 4 + [len(types) - 1, len(types) + 1]))
        lines.append("\t".join(draw(CELLS) for _ in range(max(width, 0))) + draw(LINE_ENDS))
    text = draw(st.sampled_from(["", "\n", "\ufeff"])) + "".join(lines)
    if lines and draw(st.booleans()):
        text = text.rstrip("\n")  # no newline after the last line
    return types, text.encode()


def _read(reader, path, data, types):
    symbols = Symbols()
    try:
        rows, lines = reader(path, data, types, symbols)
    except FactError as err:
        return "error", str(err)
    lines = lines.tolist() if lines is not None else list(range(1, len(rows) + 1))
    return decode_rows(symbols, types, rows), lines


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fact_files())
def test_columnar_reader_reads_as_the_line_reader(tmp_path, case):
    types, data = case
    path = tmp_path / "r.facts"
    path.write_bytes(data)
    by_lines = _read(lambda p, d, t, s: read_lines(d, "r", t, "r.facts", s), path, data, types)
    either = _read(lambda p, d, t, s: read_files([(p, "r", t, "r.facts")], s)[0], path, data, types)
    assert either == by_lines


def test_hexadecimal_is_not_a_number(tmp_path):
    (tmp_path / "placed.facts").write_text("t0\t0\nt1\t0x1\n")
    with pytest.raises(FactError, match=r"placed.facts:2: .*got '0x1'"):
        load_fact_dir(tmp_path, {"placed": ("symbol", "number")})


def test_files_of_a_folder_share_one_symbol_table(tmp_path):
    (tmp_path / "op.facts").write_text("mm\tmatmul\nadd1\tadd\n")
    (tmp_path / "writes.facts").write_text("add1\tz\nmm\ty\n")
    facts = load_fact_dir(tmp_path, {"op": ("symbol", "symbol"), "writes": ("symbol", "symbol")})
    op, writes = facts.rows("op"), facts.rows("writes")
    assert op[0, 0] == writes[1, 0] and op[1, 0] == writes[0, 0]
    assert facts.ordered("writes") == [("add1", "z"), ("mm", "y")]


def test_a_repeated_line_is_one_tuple_at_its_first_line(tmp_path):
    (tmp_path / "spine.facts").write_text("x\ny\n\nx\n")
    facts = load_fact_dir(tmp_path, {"spine": ("symbol",)})
    assert facts.ordered("spine") == [("x",), ("y",)]
    assert len(facts.rows("spine")) == 2
    assert (facts.where("spine", ("x",)).line, facts.where("spine", ("y",)).line) == (1, 2)


def test_tuples_added_later_keep_their_positions():
    facts = FactBase()
    facts.extend("op", [("a", "add"), ("b", "mul")], file="<graph>/op.facts")
    facts.add("op", ("c", "neg"))
    assert facts.tuples("op") == {("a", "add"), ("b", "mul"), ("c", "neg")}
    assert str(facts.where("op", ("b", "mul"))) == "<graph>/op.facts:2"
    assert facts.where("op", ("c", "neg")) is None
    assert facts.ordered("op") == [("a", "add"), ("b", "mul"), ("c", "neg")]
    assert facts.relations.replacing(op=set())["op"] == set() and len(facts.relations["op"]) == 3
