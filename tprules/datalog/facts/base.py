"""A program's facts: per relation, int64 rows with the file and line each came from.

Fact directories are in Soufflé's layout (SPEC §2): one `<relation>.facts` file per
relation, read by datalog/facts/reader.py into rows in a shared symbol table. Python tuples are
made only when someone asks for them (`tuples`, `ordered`, `where`, `relations[rel]`):
error messages, proofs, the planner's graph. `check` asks only for the small relations.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...errors import FactError
from ...paths import display_path
from ...pos import Pos
from .columns import I64, Symbols, decode_rows, encode_rows, first_occurrences
from .reader import read_files


@dataclass(frozen=True)
class Chunk:
    """Rows that came together: from one file, or added without a position (`file` None)."""

    rows: np.ndarray  # (n, arity) int64, in the fact base's symbol ids
    file: str | None
    lines: np.ndarray | None = None  # the line of each row; None: row k is line k + 1

    def line_numbers(self) -> list[int]:
        return self.lines.tolist() if self.lines is not None else list(range(1, len(self.rows) + 1))


def _types_of(tup: tuple) -> tuple[str, ...]:
    return tuple("number" if isinstance(v, int) else "symbol" for v in tup)


class FactBase:
    """Facts by relation, with the file and line of each tuple's first occurrence.

    `rows(rel)` is the relation as distinct int64 rows (file order) in `symbols`' ids;
    `relations` is the same facts as a mapping relation → set of tuples, decoded on first
    access, for code that works on tuples.
    """

    def __init__(self, symbols: Symbols | None = None, types: Mapping[str, tuple[str, ...]] | None = None):
        self.symbols = symbols if symbols is not None else Symbols()
        self.types: dict[str, tuple[str, ...]] = dict(types or {})  # relation → column types
        self.files: dict[str, list[str]] = {}  # relation → files read
        self.relations = Relations(self)
        self._chunks: dict[str, list[Chunk]] = {}
        self._pending: dict[str, list[tuple]] = {}  # (tuple, Pos | None) added one at a time, encoded when read
        self._rows: dict[str, np.ndarray] = {}
        self._ordered: dict[str, list[tuple]] = {}
        self._tuples: dict[str, set[tuple]] = {}
        self._origins: dict[str, dict[tuple, tuple[str, int]]] = {}

    # -- what there is -------------------------------------------------------------------

    def has(self, rel: str) -> bool:
        """Was the relation read or given (even empty)?"""
        return rel in self._chunks or rel in self._pending

    def names(self) -> list[str]:
        return list(dict.fromkeys([*self._chunks, *self._pending]))

    def rows(self, rel: str) -> np.ndarray | None:
        """The relation's distinct rows in file order (first occurrence), in `symbols`' ids;
        None for a relation whose column types are unknown (nothing was ever given)."""
        found = self._rows.get(rel)
        if found is None:
            types = self.types.get(rel)
            if types is None:
                return None
            chunks = [c.rows for c in self.chunks(rel)]
            found = np.concatenate(chunks) if len(chunks) > 1 else chunks[0] if chunks else \
                np.zeros((0, len(types)), dtype=I64)
            first = first_occurrences(found)
            self._rows[rel] = found = found if first is None else found[first]
        return found

    def count(self, rel: str) -> int:
        """How many distinct tuples the relation has (nothing decoded)."""
        rows = self.rows(rel)
        return len(rows) if rows is not None else 0

    def chunks(self, rel: str) -> list[Chunk]:
        self._flush(rel)
        return self._chunks.get(rel, [])

    def tuples(self, rel: str) -> set[tuple]:
        found = self._tuples.get(rel)
        if found is None:
            if not self.has(rel) or rel not in self.types:
                return set()
            rows = self.rows(rel)
            assert rows is not None  # its types are known
            found = self._tuples[rel] = set(self._decode(rel, rows))
        return found

    def ordered(self, rel: str) -> list[tuple]:
        """Tuples in file order (first occurrence), then any added without a position, sorted."""
        found = self._ordered.get(rel)
        if found is None:
            if all(c.file is not None for c in self.chunks(rel)):
                rows = self.rows(rel)  # None where its types are unknown
                found = self._decode(rel, rows) if rows is not None else []
            else:
                origins = self._origins_of(rel)
                found = list(origins) + sorted(t for t in self.tuples(rel) if t not in origins)
            self._ordered[rel] = found
        return list(found)

    def matching(self, rel: str, column: int, symbol: str) -> list[tuple]:
        """The tuples of `rel` whose `column` is `symbol`, in file order; only they are decoded."""
        rows = self.rows(rel)
        found = self.symbols.ids.get(symbol)  # `get`: asking interns nothing
        if rows is None or found is None:
            return []
        return self._decode(rel, rows[rows[:, column] == found])

    def matching_any(self, rel: str, column: int, symbols) -> list[tuple]:
        """The tuples of `rel` whose `column` is any of `symbols`, in file order; only they are decoded."""
        rows = self.rows(rel)
        ids = [i for i in (self.symbols.ids.get(s) for s in symbols) if i is not None]  # asking interns nothing
        if rows is None or not ids:
            return []
        return self._decode(rel, rows[np.isin(rows[:, column], np.asarray(ids, dtype=rows.dtype))])

    def where(self, rel: str, tup: tuple) -> Pos | None:
        found = self._origins_of(rel).get(tup)
        return Pos(*found) if found is not None else None

    # -- adding ----------------------------------------------------------------------------

    def append(self, rel: str, rows: np.ndarray, file: str | None = None, lines: np.ndarray | None = None,
               types: tuple[str, ...] | None = None) -> None:
        """Add encoded rows, in file order, from `file` (`lines`: each row's line, None: 1..n)."""
        if types is not None:
            self.types.setdefault(rel, types)
        self._flush(rel)
        chunk = Chunk(rows, file, lines)
        self._chunks.setdefault(rel, []).append(chunk)
        self._rows.pop(rel, None)
        self._ordered.pop(rel, None)
        if rel in self._tuples or rel in self._origins:
            decoded = self._decode(rel, rows)
            if rel in self._tuples:
                self._tuples[rel].update(decoded)
            if rel in self._origins and file is not None:
                origins = self._origins[rel]
                for tup, line in zip(decoded, chunk.line_numbers()):
                    origins.setdefault(tup, (file, line))

    def extend(self, rel: str, tuples: Iterable[tuple], file: str | None = None,
               types: tuple[str, ...] | None = None) -> None:
        """Add tuples at once (from `file`, lines 1..n, when given)."""
        tuples = list(tuples)
        types = types or self.types.get(rel) or (_types_of(tuples[0]) if tuples else None)
        if types is None:
            self._chunks.setdefault(rel, [])
            return
        self.append(rel, encode_rows(self.symbols, types, tuples), file, None, types)

    def add(self, rel: str, tup: tuple, pos: Pos | None = None) -> None:
        self.types.setdefault(rel, _types_of(tup))
        self._pending.setdefault(rel, []).append((tup, pos))
        self._rows.pop(rel, None)
        self._ordered.pop(rel, None)
        if rel in self._tuples:
            self._tuples[rel].add(tup)
        if rel in self._origins and pos is not None:
            self._origins[rel].setdefault(tup, (pos.file, pos.line))

    def keep(self, rel: str, wanted) -> None:
        """Keep only the tuples of `rel` for which `wanted(tup)` holds; each keeps its line."""
        kept = []
        for chunk in self.chunks(rel):
            mask = np.fromiter(map(wanted, self._decode(rel, chunk.rows)), dtype=bool, count=len(chunk.rows))
            if mask.all():
                kept.append(chunk)
                continue
            kept.append(Chunk(chunk.rows[mask], chunk.file,
                              np.asarray(chunk.line_numbers(), dtype=I64)[mask] if chunk.file is not None else None))
        if rel in self._chunks:
            self._chunks[rel] = kept
        for cache in (self._rows, self._ordered, self._tuples, self._origins):
            cache.pop(rel, None)

    def absorb(self, other: "FactBase") -> "FactBase":
        """Add another fact base's facts to this one (in place; this one's lines come first)."""
        for rel in other.names():
            if rel in other.types:
                self.types.setdefault(rel, other.types[rel])
            self._chunks.setdefault(rel, [])
            for chunk in other.chunks(rel):
                rows = chunk.rows
                if other.symbols is not self.symbols:
                    rows = encode_rows(self.symbols, other.types[rel], other._decode(rel, rows))
                self.append(rel, rows, chunk.file, chunk.lines)
            self.files.setdefault(rel, []).extend(other.files.get(rel, []))
        return self

    # -- inside ------------------------------------------------------------------------------

    def _decode(self, rel: str, rows: np.ndarray) -> list[tuple]:
        return decode_rows(self.symbols, self.types[rel], rows)

    def _flush(self, rel: str) -> None:
        """Encode the tuples added one at a time: one chunk per run of the same file."""
        pending = self._pending.pop(rel, None)
        if not pending:
            return
        chunks = self._chunks.setdefault(rel, [])
        start = 0
        for k in range(1, len(pending) + 1):
            if k == len(pending) or _file(pending[k][1]) != _file(pending[start][1]):
                run = pending[start:k]
                rows = encode_rows(self.symbols, self.types[rel], [t for t, _ in run])
                file = _file(run[0][1])
                lines = np.array([p.line for _, p in run], dtype=I64) if file is not None else None
                chunks.append(Chunk(rows, file, lines))
                start = k

    def _origins_of(self, rel: str) -> dict[tuple, tuple[str, int]]:
        found = self._origins.get(rel)
        if found is None:
            found = self._origins[rel] = {}
            for chunk in self.chunks(rel):
                if chunk.file is not None:
                    for tup, line in zip(self._decode(rel, chunk.rows), chunk.line_numbers()):
                        found.setdefault(tup, (chunk.file, line))
        return found


def _file(pos: Pos | None) -> str | None:
    return pos.file if pos is not None else None


class Relations(Mapping):
    """A fact base as relation → set of tuples, each decoded on first access. The engines
    that work on columns take `rows(rel)` instead, in the fact base's `symbols`."""

    def __init__(self, facts: FactBase):
        self.facts = facts

    @property
    def symbols(self) -> Symbols:
        return self.facts.symbols

    def rows(self, rel: str) -> np.ndarray | None:
        return self.facts.rows(rel)

    def __getitem__(self, rel: str) -> set[tuple]:
        if not self.facts.has(rel):
            raise KeyError(rel)
        return self.facts.tuples(rel)

    def __contains__(self, rel) -> bool:
        return self.facts.has(rel)

    def __iter__(self):
        return iter(self.facts.names())

    def __len__(self) -> int:
        return len(self.facts.names())

    def setdefault(self, rel: str, default: set | None = None) -> set[tuple]:
        if not self.facts.has(rel):
            self.facts.extend(rel, default or ())
        return self[rel]

    def replacing(self, **relations: set[tuple]) -> "Mapping[str, set[tuple]]":
        """The same facts with some relations replaced (e.g. `member=set()`), nothing decoded."""
        return _Replaced(self.facts, relations)


class _Replaced(Relations):
    def __init__(self, facts: FactBase, replaced: dict[str, set[tuple]]):
        super().__init__(facts)
        self.replaced = replaced
        self._encoded: dict[str, np.ndarray] = {}

    def rows(self, rel: str) -> np.ndarray | None:
        if rel not in self.replaced:
            return self.facts.rows(rel)
        if rel not in self._encoded:
            types = self.facts.types.get(rel)
            if types is None:
                return None
            self._encoded[rel] = encode_rows(self.symbols, types, self.replaced[rel])
        return self._encoded[rel]

    def __getitem__(self, rel: str) -> set[tuple]:
        return self.replaced[rel] if rel in self.replaced else super().__getitem__(rel)

    def __contains__(self, rel) -> bool:
        return rel in self.replaced or self.facts.has(rel)

    def __iter__(self):
        return iter(dict.fromkeys([*self.facts.names(), *self.replaced]))

    def __len__(self) -> int:
        return len(dict.fromkeys([*self.facts.names(), *self.replaced]))


def read_facts_file(path: Path, rel: str, types: tuple[str, ...], display: str, into: FactBase) -> None:
    """Read one fact file into `into`, checking widths and number columns."""
    [(rows, lines)] = read_files([(path, rel, types, display)], into.symbols)
    into.append(rel, rows, display, lines, types)
    into.files.setdefault(rel, []).append(display)


def load_fact_dir(directory: Path, schema: dict[str, tuple[str, ...]], display_root: str | None = None,
                  strict: bool = True, symbols: Symbols | None = None) -> FactBase:
    """Load every `<rel>.facts` of a directory whose relation the schema knows.

    With `strict`, a `.facts` file of a relation nobody declares is an error.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise FactError(f"no such program folder: {directory}")
    root = display_root if display_root is not None else display_path(directory)
    base = FactBase(symbols=symbols)
    files = []
    for path in sorted(directory.glob("*.facts")):
        rel = path.stem
        display = f"{root}/{path.name}"
        if rel not in schema:
            if strict:
                raise FactError(f"unknown relation {rel}: no rule file declares it and SPEC §2 has no such relation",
                                Pos(display, 1))
            continue
        files.append((path, rel, schema[rel], display))
    for (_, rel, types, display), (rows, lines) in zip(files, read_files(files, base.symbols)):
        base.append(rel, rows, display, lines, types)
        base.files.setdefault(rel, []).append(display)
    return base
