"""The columnar fact reader (numpy over the bytes, datalog/facts/scan.py) reads every file
exactly as the line reader, which defines SPEC §2's layout: the same rows, the same line
of each row, the same error, and one id per symbol across the files read together.

Files are random text over an alphabet that holds what a fact file has and what tempts a
columnar reader to read it differently (quotes, CR, hexadecimal, signs, spaces, blank
lines, NUL, non-ASCII, symbols longer than a word that share a prefix, 18 and 19 digits).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tprules.datalog.facts import scan
from tprules.datalog.facts.base import FactBase, load_fact_dir
from tprules.datalog.facts.columns import Symbols, decode_rows
from tprules.datalog.facts.reader import read_files, read_lines
from tprules.errors import FactError

TYPES = [("symbol",), ("number",), ("symbol", "number"), ("symbol", "symbol"), ("symbol", "number", "symbol"),
         ("number", "number")]
CELLS = st.one_of(
    st.sampled_from(["a", "b_0", "x y", "", "0", "7", "-3", "+5", " 4", "4 ", "0x1f", "0X2", "1_000", "٣", '"q"',
                     "'s'", "9223372036854775807", "-9223372036854775808", "9223372036854775808", "é", "NA", "null",
                     "\\t", "1e3", "5.0", "\x0b5", "-", "--1", "-0", "007", "a\x00", "\x00", "layer_0_attention_qkv",
                     "layer_0_attention_qkw", "layer_0_attention_qkv_", "layer_0_", "layer_0", "123456789012345678",
                     "-123456789012345678", "1234567890123456789", "ø" * 9]),
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


def _read_together(tmp_path, cases, reader):
    """Files read into one symbol table: each one's rows and lines, or the first error."""
    symbols = Symbols()
    files = []
    for k, (types, data) in enumerate(cases):
        (tmp_path / f"r{k}.facts").write_bytes(data)
        files.append((tmp_path / f"r{k}.facts", f"r{k}", types, f"r{k}.facts"))
    try:
        read = reader(files, symbols)
    except FactError as err:
        return "error", str(err)
    assert len(set(symbols.names)) == len(symbols.names) == len(symbols.ids)  # one id per symbol
    return [(decode_rows(symbols, types, rows), lines.tolist() if lines is not None else None)
            for (_, _, types, _), (rows, lines) in zip(files, read)]


def _by_lines(files, symbols):
    return [read_lines(path.read_bytes(), rel, types, display, symbols) for path, rel, types, display in files]


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(fact_files(), min_size=2, max_size=4))
def test_files_read_together_share_one_id_per_symbol(tmp_path, cases):
    """Columns of different widths, in several files: a symbol is one id wherever it is."""
    assert _read_together(tmp_path, cases, read_files) == _read_together(tmp_path, cases, _by_lines)


def test_a_symbol_is_one_id_in_columns_of_any_width(tmp_path):
    """A short symbol beside long ones, at the end of a line or not, in three files."""
    cases = [(("symbol", "symbol"), b"matmul\tx\nadd\tmatmul\n"),
             (("symbol",), b"a_symbol_longer_than_two_words\nmatmul\nadd"),
             (("symbol", "number"), b"matmul\t5\nx\t-7\na_symbol_longer_than_two_words\t0\n")]
    (first, _), (second, _), (third, _) = read = _read_together(tmp_path, cases, read_files)
    assert read == _read_together(tmp_path, cases, _by_lines)
    assert first == [("matmul", "x"), ("add", "matmul")] and third[0] == ("matmul", 5)
    symbols = Symbols()
    files = [(tmp_path / f"r{k}.facts", f"r{k}", types, f"r{k}.facts") for k, (types, _) in enumerate(cases)]
    (op, _), (spine, _), (shape, _) = read_files(files, symbols)
    assert op[0, 0] == op[1, 1] == spine[1, 0] == shape[0, 0] and op[1, 0] == spine[2, 0]


def _colliding(cases, monkeypatch):
    """The files joined and split, every symbol hashed alike: an interner and the splits."""
    monkeypatch.setattr(scan, "_hash", lambda words, starts, lengths: np.zeros(len(starts), dtype=np.uint64))
    joined = scan.Joined()
    for _, data in cases:
        joined.add(data)
    buffer = joined.close()
    splits = [scan.split(buffer, begin, size, types) for (types, _), (begin, size) in zip(cases, joined.places)]
    return scan.Interner(buffer, Symbols()), splits


def test_a_hash_collision_is_found_and_the_files_read_by_lines(tmp_path, monkeypatch):
    cases = [(("symbol", "number"), b"layer_0_attention_qkv\t1\nlayer_0_attention_qkw\t2\n\nb\t3\n"),
             (("symbol", "symbol"), b"b\tlayer_0_attention_qkv\nlayer_0_attention_qkw\ta\x00\n")]
    expected = _read_together(tmp_path, cases, _by_lines)
    interner, splits = _colliding(cases, monkeypatch)
    with pytest.raises(scan.Collision):
        interner.rows(splits[0])
    assert _read_together(tmp_path, cases, read_files) == expected


def test_a_hash_collision_across_files_is_found(tmp_path, monkeypatch):
    """Each file alone has one symbol per hash; the second file's symbol collides with the
    first file's, which only the comparison with the files before can find."""
    cases = [(("symbol", "number"), b"layer_0_attention_qkv\t1\nlayer_0_attention_qkv\t2\n"),
             (("symbol",), b"layer_0_attention_qkw\n\nlayer_0_attention_qkw\n")]
    expected = _read_together(tmp_path, cases, _by_lines)
    interner, splits = _colliding(cases, monkeypatch)
    assert interner.rows(splits[0]).tolist() == [[0, 1], [0, 2]]
    with pytest.raises(scan.Collision):
        interner.rows(splits[1])
    assert _read_together(tmp_path, cases, read_files) == expected


def test_symbols_are_interned_file_after_file_in_order_of_first_occurrence(tmp_path):
    """The ids the line reader gives: a symbol of a later file never takes an id before the
    symbols of the files before it, even when a file between them is read by lines."""
    cases = [(("symbol", "symbol"), b"b\ta\nc\tb\n"),
             (("symbol",), b"\xef\xbb\xbfd\ne\n"),  # a byte-order mark: the line reader's
             (("symbol", "number"), b"f\t1\na\t2\ng\t3\n")]
    files = []
    for k, (types, data) in enumerate(cases):
        (tmp_path / f"r{k}.facts").write_bytes(data)
        files.append((tmp_path / f"r{k}.facts", f"r{k}", types, f"r{k}.facts"))
    together, by_lines = Symbols(), Symbols()
    read = read_files(files, together)
    expected = _by_lines(files, by_lines)
    assert together.names == by_lines.names
    assert [rows.tolist() for rows, _ in read] == [rows.tolist() for rows, _ in expected]


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
