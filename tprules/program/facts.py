"""Read fact directories in Soufflé's layout, typed by the relation's declaration.

One `<relation>.facts` file per relation, one tuple per line, TAB-separated, no header,
symbols unquoted, numbers in decimal. A missing file is an empty relation; empty lines
are ignored. Every tuple remembers the file and line it came from, for error messages
and proof leaves.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import repeat
from pathlib import Path

from ..errors import FactError
from ..lang.ast import Pos
from ..paths import display_path
from .columns import Symbols, encode_rows


@dataclass
class FactBase:
    """Facts by relation, with the file and line of each tuple's first occurrence.

    `origins[rel]` maps each tuple to `(file, line)` in file order; a `Pos` is made only
    when one is asked for (errors, proofs), which keeps loading fast.
    """

    relations: dict[str, set[tuple]] = field(default_factory=dict)
    origins: dict[str, dict[tuple, tuple[str, int]]] = field(default_factory=dict)
    files: dict[str, list[str]] = field(default_factory=dict)  # relation → files read
    # With a symbol table, each file is also encoded as it is read (its strings are still
    # hot then): relation → row arrays, one per file. See program/columns.py.
    symbols: "Symbols | None" = None
    encoded: dict[str, list] = field(default_factory=dict)

    def tuples(self, rel: str) -> set[tuple]:
        return self.relations.get(rel, set())

    def where(self, rel: str, tup: tuple) -> Pos | None:
        found = self.origins.get(rel, {}).get(tup)
        return Pos(*found) if found is not None else None

    def ordered(self, rel: str) -> list[tuple]:
        """Tuples in file order (first occurrence), then any added without a position."""
        origins = self.origins.get(rel, {})
        tuples = self.relations.get(rel, set())
        if len(origins) == len(tuples):
            return list(origins)
        return list(origins) + sorted(t for t in tuples if t not in origins)

    def add(self, rel: str, tup: tuple, pos: Pos | None = None) -> None:
        self.relations.setdefault(rel, set()).add(tup)
        self.encoded.pop(rel, None)
        if pos is not None:
            self.origins.setdefault(rel, {}).setdefault(tup, (pos.file, pos.line))

    def absorb(self, other: "FactBase") -> "FactBase":
        """Add another fact base's tuples to this one (in place; this one's lines come first)."""
        for rel, tuples in other.relations.items():
            had = bool(self.relations.get(rel))
            self.relations.setdefault(rel, set()).update(tuples)
            mine = self.origins.setdefault(rel, {})
            for tup, origin in other.origins.get(rel, {}).items():
                mine.setdefault(tup, origin)
            self.files.setdefault(rel, []).extend(other.files.get(rel, []))
            if other.symbols is self.symbols and rel in other.encoded and (rel in self.encoded or not had):
                self.encoded.setdefault(rel, []).extend(other.encoded[rel])
            else:
                self.encoded.pop(rel, None)
        return self

    def rows(self, rel: str):
        """The relation's rows in `symbols`' ids, one int64 array per file, if every file
        of it was encoded when read; else None (`Columns` joins them)."""
        chunks = self.encoded.get(rel)
        if chunks is None or self.symbols is None:
            return None
        return chunks


def read_facts_file(path: Path, rel: str, types: tuple[str, ...], display: str, into: FactBase) -> None:
    """Read one fact file into `into`, checking widths and number columns."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise FactError(f"cannot read fact file: {err}", Pos(display, 0)) from None
    arity = len(types)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if "\r" in text or "\n\n" in text or text.startswith("\n"):  # the slow path: skip blank lines
        lines = [line[:-1] if line.endswith("\r") else line for line in lines]
        numbers = [n for n, line in enumerate(lines, 1) if line]
        lines = [lines[n - 1] for n in numbers]
    else:
        numbers = range(1, len(lines) + 1)
    rows = [line.split("\t") for line in lines] if arity else [[] for _ in lines]  # a line makes a nullary true
    if set(map(len, rows)) - {arity}:
        k = next(k for k, cols in enumerate(rows) if len(cols) != arity)
        spaces = "; this line separates with spaces" if " " in lines[k] and len(rows[k]) < arity else ""
        raise FactError(f"{rel} has {_columns(arity)} but this line has {len(rows[k])} "
                        f"(columns are separated by one TAB{spaces})", Pos(display, numbers[k]))
    for i, kind in enumerate(types):
        if kind == "number":
            _numbers(rows, i, rel, display, numbers)
    if into.symbols is not None:
        into.encoded.setdefault(rel, []).append(encode_rows(into.symbols, types, rows))
    tuples = list(map(tuple, rows))
    into.relations.setdefault(rel, set()).update(tuples)
    origins = into.origins.setdefault(rel, {})
    if not origins:
        origins.update(zip(tuples, zip(repeat(display), numbers)))
        if len(origins) < len(tuples):  # duplicate lines: keep each tuple's first line
            for tup, n in zip(reversed(tuples), reversed(numbers)):
                origins[tup] = (display, n)
    else:
        for tup, n in zip(tuples, numbers):
            origins.setdefault(tup, (display, n))
    into.files.setdefault(rel, []).append(display)


def _numbers(rows: list[list], i: int, rel: str, display: str, numbers) -> None:
    """Turn column i into ints, naming the first line that holds something else."""
    try:
        for cols in rows:
            cols[i] = int(cols[i])
    except ValueError:
        k = next(k for k, cols in enumerate(rows) if isinstance(cols[i], str))
        raise FactError(f"column {i + 1} of {rel} must be a number (a decimal integer), got {rows[k][i]!r}",
                        Pos(display, numbers[k])) from None


def _columns(n: int) -> str:
    return f"{n} column" if n == 1 else f"{n} columns"


def load_fact_dir(directory: Path, schema: dict[str, tuple[str, ...]], display_root: str | None = None,
                  strict: bool = True, symbols: "Symbols | None" = None) -> FactBase:
    """Load every `<rel>.facts` of a directory whose relation the schema knows.

    With `strict`, a `.facts` file of a relation nobody declares is an error.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise FactError(f"no such program folder: {directory}")
    root = display_root if display_root is not None else display_path(directory)
    base = FactBase(symbols=symbols)
    for path in sorted(directory.glob("*.facts")):
        rel = path.stem
        display = f"{root}/{path.name}"
        if rel not in schema:
            if strict:
                raise FactError(f"unknown relation {rel}: no rule file declares it and SPEC §2 has no such relation",
                                Pos(display, 1))
            continue
        read_facts_file(path, rel, schema[rel], display, base)
    return base
