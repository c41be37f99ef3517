"""Reading fact files (SPEC §2's layout) into encoded rows.

One tuple per line, columns separated by one TAB, no header, no quoting, symbols
unquoted, numbers in decimal; empty lines are ignored. A file is read in one of two ways:

- **columnar** (scan.py): numpy over the file's bytes splits it, parses the number
  columns and interns the symbol columns, each symbol of the files read together decoded
  and interned into the shared symbol table once. No Python object is
  made per line or per field.
- **by lines**: the definition of the format in Python, line by line. It reads what the
  columnar reader declines (a CR, a byte-order mark, a number written other than
  `-?[0-9]{1,18}`, a relation without columns) and names the file and line of the first
  problem of a bad file.

Both give the same rows and the same line numbers (tests/datalog/test_fact_reader.py holds them
to it on random files), and intern symbols in the same order: by first occurrence, file
after file, column after column.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ...errors import FactError
from ...pos import Pos
from . import scan
from .columns import I64, Symbols, encode_rows

_INT64 = (-(1 << 63), (1 << 63) - 1)


def read_files(files: list[tuple[Path, str, tuple[str, ...], str]],
               symbols: Symbols) -> list[tuple[np.ndarray, np.ndarray | None]]:
    """Read files given as (path, relation, column types, path as shown): for each, its
    rows as an (n, arity) int64 array in `symbols`' ids (repeats kept, file order) and the
    line of each row (None when row k is line k + 1). Raises `FactError` for the first bad
    line of the first bad file.

    Symbols are interned file after file, in order of first occurrence (column, line), as
    the line reader interns them; a collision of the columnar reader's hashes, found in any
    file, has every file read by lines again (into the same ids: the files before were
    interned in the line reader's order)."""
    sizes = []
    for path, _, _, display in files:
        try:
            sizes.append(path.stat().st_size)
        except OSError as err:
            raise FactError(f"cannot read fact file: {err}", Pos(display, 0)) from None
    joined = scan.Joined(sum(sizes) + len(sizes))
    for (path, _, _, display), size in zip(files, sizes):
        try:
            joined.add_file(path, size)
        except OSError as err:
            raise FactError(f"cannot read fact file: {err}", Pos(display, 0)) from None
    buffer = joined.close()
    try:
        return _read(files, joined, buffer, symbols)
    except scan.Collision:  # two symbols hashed alike: read every file by lines
        return [read_lines(joined.data(k), rel, types, display, symbols)
                for k, (_, rel, types, display) in enumerate(files)]


def _read(files, joined: scan.Joined, buffer: np.ndarray, symbols: Symbols) -> list[tuple[np.ndarray, np.ndarray | None]]:
    interner = scan.Interner(buffer, symbols)
    read = []
    for k, ((_, rel, types, display), (begin, size)) in enumerate(zip(files, joined.places)):
        split = scan.split(buffer, begin, size, types)
        read.append((interner.rows(split), split.lines) if split is not None
                    else read_lines(joined.data(k), rel, types, display, symbols))
    return read


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
