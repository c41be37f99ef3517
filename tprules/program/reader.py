"""Reading fact files (SPEC §2's layout) into encoded rows.

One tuple per line, columns separated by one TAB, no header, no quoting, symbols
unquoted, numbers in decimal; empty lines are ignored. A file is read in one of two ways:

- **columnar**: pyarrow's CSV reader (C++) splits the file, parses the number columns and
  dictionary-encodes the symbol columns; the dictionaries of all the files read together
  are unified, each distinct symbol is interned into the shared symbol table once, and
  each column's codes become symbol ids with one numpy take. No Python object is made
  per line.
- **by lines**: the definition of the format in Python, line by line. It reads what the
  columnar reader declines (a CR, a byte-order mark, a `0x` that pyarrow would take for a
  hexadecimal number, a relation without columns) and every file the columnar reader
  finds fault with: it names the file and line of the first problem, or, where pyarrow
  was only stricter than the format (`+5`, `1_000`), reads the file itself.

Both give the same rows and the same line numbers (tests/test_fact_reader.py holds them
to it on random files).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import FactError
from ..lang.ast import Pos
from .columns import I64, Symbols, encode_rows

_BOM = b"\xef\xbb\xbf"
_INT64 = (-(1 << 63), (1 << 63) - 1)


@dataclass
class _Parsed:
    """A file pyarrow has read, its symbol columns still in the file's own dictionaries."""

    table: object  # a pyarrow Table
    types: tuple[str, ...]
    lines: np.ndarray | None


def read_files(files: list[tuple[Path, str, tuple[str, ...], str]],
               symbols: Symbols) -> list[tuple[np.ndarray, np.ndarray | None]]:
    """Read files given as (path, relation, column types, path as shown): for each, its
    rows as an (n, arity) int64 array in `symbols`' ids (repeats kept, file order) and the
    line of each row (None when row k is line k + 1). Raises `FactError` for the first bad
    line of the first bad file.

    Every symbol column of every file read by pyarrow is interned in one go: the files'
    dictionaries are unified in C++, so Python sees each distinct symbol once."""
    read: list[_Parsed | tuple[np.ndarray, np.ndarray | None]] = []
    for path, rel, types, display in files:
        try:
            data = path.read_bytes()
        except OSError as err:
            raise FactError(f"cannot read fact file: {err}", Pos(display, 0)) from None
        table = _read_columnar(data, types) if _columnar_reads(data, types) else None
        read.append(_Parsed(table, types, _line_numbers(data, table.num_rows)) if table is not None
                    else read_lines(data, rel, types, display, symbols))
    parsed = [p for p in read if isinstance(p, _Parsed)]
    encoded = iter(zip(_intern(parsed, symbols), [p.lines for p in parsed]))
    return [next(encoded) if isinstance(p, _Parsed) else p for p in read]


def _columnar_reads(data: bytes, types: tuple[str, ...]) -> bool:
    """Does the columnar reader read this file exactly as the format says?"""
    return bool(types) and b"\r" not in data and not data.startswith(_BOM) and b"0x" not in data \
        and b"0X" not in data


def _read_columnar(data: bytes, types: tuple[str, ...]):
    """The file as a pyarrow Table, or None when pyarrow finds fault with it (the line reader then names it)."""
    import pyarrow as pa
    from pyarrow import csv

    names = [f"c{i}" for i in range(len(types))]
    symbol = pa.dictionary(pa.int32(), pa.string())
    schema = pa.schema([(n, symbol if t == "symbol" else pa.int64()) for n, t in zip(names, types)])
    if data.count(b"\n") == len(data):  # nothing but empty lines
        return schema.empty_table()
    try:
        return csv.read_csv(
            pa.py_buffer(data),
            read_options=csv.ReadOptions(column_names=names, use_threads=False, block_size=max(len(data) + 1, 1 << 20)),
            parse_options=csv.ParseOptions(delimiter="\t", quote_char=False, escape_char=False,
                                           newlines_in_values=False, ignore_empty_lines=True),
            convert_options=csv.ConvertOptions(column_types=schema, null_values=[], strings_can_be_null=False,
                                               quoted_strings_can_be_null=False),
            memory_pool=_pool())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def _intern(parsed: list[_Parsed], symbols: Symbols) -> list[np.ndarray]:
    """Each parsed table as rows of symbol ids (and numbers).

    The symbol columns of every file are unified into one dictionary (in C++, without
    pyarrow's compute module, which is slow to load), whose strings are interned once."""
    import pyarrow as pa

    symbol = pa.dictionary(pa.int32(), pa.string())
    chunks = [chunk for p in parsed for i, kind in enumerate(p.types) if kind == "symbol"
              for chunk in p.table.column(i).chunks]
    unified = iter(pa.chunked_array(chunks, type=symbol).unify_dictionaries(memory_pool=_pool()).chunks if chunks else ())
    ids_of: np.ndarray | None = None
    out = []
    for p in parsed:
        table = p.table
        rows = np.empty((table.num_rows, len(p.types)), dtype=I64)
        for i, kind in enumerate(p.types):
            column = table.column(i)
            if kind == "number":
                rows[:, i] = column.to_numpy()
                continue
            start = 0
            for _ in column.chunks:
                chunk = next(unified)
                if ids_of is None:
                    ids_of = symbols.intern(chunk.dictionary.to_pylist(), distinct=True)
                rows[start:start + len(chunk), i] = ids_of[chunk.indices.to_numpy()]
                start += len(chunk)
        out.append(rows)
    return out


def _pool():
    """The C allocator's pool: Arrow's default pool (mimalloc) keeps the pages of every
    table read until the process ends, which at model size is 40 MiB more resident memory."""
    import pyarrow as pa

    return pa.system_memory_pool()


def _line_numbers(data: bytes, rows: int) -> np.ndarray | None:
    """The line of each of the `rows` non-empty lines, when some lines are empty (else
    None: row k is line k + 1, which a count of the newlines tells)."""
    if rows == data.count(b"\n") + (not data.endswith(b"\n")):
        return None
    text = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(text == 10)
    starts = np.concatenate(([0], ends + 1))
    stops = np.concatenate((ends, [len(text)]))
    return (np.flatnonzero(stops > starts) + 1).astype(I64)


def read_lines(data: bytes, rel: str, types: tuple[str, ...], display: str,
               symbols: Symbols) -> tuple[np.ndarray, np.ndarray | None]:
    """The format's definition, line by line; raises `FactError` naming the first bad line."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise FactError(f"cannot read fact file: {err}", Pos(display, 0)) from None
    arity = len(types)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    numbers = [n for n, line in enumerate(lines, 1) if line]
    lines = [lines[n - 1] for n in numbers]
    rows = [line.split("\t") for line in lines] if arity else [[] for _ in lines]  # a line makes a nullary true
    for k, cols in enumerate(rows):
        if len(cols) != arity:
            spaces = "; this line separates with spaces" if " " in lines[k] and len(cols) < arity else ""
            raise FactError(f"{rel} has {_columns(arity)} but this line has {len(cols)} "
                            f"(columns are separated by one TAB{spaces})", Pos(display, numbers[k]))
    for i, kind in enumerate(types):
        if kind == "number":
            _numbers(rows, i, rel, display, numbers)
    lines_of = None if numbers == list(range(1, len(numbers) + 1)) else np.asarray(numbers, dtype=I64)
    return encode_rows(symbols, types, rows), lines_of


def _numbers(rows: list[list], i: int, rel: str, display: str, numbers: list[int]) -> None:
    """Turn column i into ints, naming the first line that holds something else."""
    for k, cols in enumerate(rows):
        try:
            value = int(cols[i])
        except ValueError:
            raise FactError(f"column {i + 1} of {rel} must be a number (a decimal integer), got {cols[i]!r}",
                            Pos(display, numbers[k])) from None
        if not _INT64[0] <= value <= _INT64[1]:
            raise FactError(f"column {i + 1} of {rel} is {cols[i]!r}, which does not fit in 64 bits "
                            f"({_INT64[0]}..{_INT64[1]})", Pos(display, numbers[k]))
        cols[i] = value


def _columns(n: int) -> str:
    return f"{n} column" if n == 1 else f"{n} columns"
