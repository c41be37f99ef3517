"""A program's facts as int64 columns: symbols interned to ids, one array of rows per relation.

Encoded once when a program loads, then shared by the well-formedness guards and the fast
engine (which takes the same symbol table), so a model-sized program is encoded once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import islice
from operator import itemgetter

import numpy as np

I64 = np.int64


class _Ids(dict):
    """symbol → id; a symbol seen for the first time gets the next id. Looking up a known
    symbol stays in C (`map(ids.__getitem__, ...)`); only a new one calls back here."""

    def __missing__(self, symbol: str) -> int:
        found = self[symbol] = len(self)
        return found


class Symbols:
    """Interning of symbols to ids, shared by a program's columns and the engine's models."""

    def __init__(self):
        self.ids: dict[str, int] = _Ids()
        self.names: list[str] = []
        self._ranks: np.ndarray | None = None

    def encode(self, values: Iterable[str], count: int = -1) -> np.ndarray:
        out = np.fromiter(map(self.ids.__getitem__, values), dtype=I64, count=count)
        self._sync()
        return out

    def one(self, value: str) -> int:
        found = self.ids[value]
        self._sync()
        return found

    def known(self, values: Iterable[str]) -> np.ndarray:
        """Ids of those values that have one (others cannot occur in any column)."""
        return np.array(sorted(self.ids[v] for v in values if v in self.ids), dtype=I64)

    def _sync(self) -> None:
        if len(self.names) < len(self.ids):
            self.names.extend(islice(self.ids, len(self.names), None))
            self._ranks = None

    def ranks(self) -> np.ndarray:
        """Each id's position in alphabetical order (symbols compare alphabetically)."""
        if self._ranks is None or len(self._ranks) < len(self.names):
            order = sorted(range(len(self.names)), key=self.names.__getitem__)
            ranks = np.empty(len(order), dtype=I64)
            ranks[np.asarray(order, dtype=I64)] = np.arange(len(order), dtype=I64)
            self._ranks = ranks
        return self._ranks


def encode_rows(symbols: Symbols, types: tuple[str, ...], tuples) -> np.ndarray:
    """Tuples as an (n, arity) int64 array; a zero-arity relation is (0 or 1, 0)."""
    tuples = tuples if isinstance(tuples, (list, tuple)) else list(tuples)
    if not types:
        return np.zeros((1 if tuples else 0, 0), dtype=I64)
    if not tuples:
        return np.zeros((0, len(types)), dtype=I64)
    columns = []
    for i, kind in enumerate(types):
        column = map(itemgetter(i), tuples)
        if kind == "symbol":
            columns.append(symbols.encode(column, len(tuples)))
        else:
            columns.append(np.fromiter(column, dtype=I64, count=len(tuples)))
    return np.stack(columns, axis=1)


class Columns(Mapping):
    """Relation → rows (distinct), from the fact base's encoding made while reading when it
    has one, else encoded from its tuples on first access; kept until the relation changes."""

    def __init__(self, facts, types: Mapping[str, tuple[str, ...]]):
        self.facts, self.types = facts, types
        if facts.symbols is None:
            facts.symbols = Symbols()
        self.symbols = facts.symbols
        self._arrays: dict[str, np.ndarray] = {}
        self._sources: dict[str, tuple] = {}

    def __getitem__(self, rel: str) -> np.ndarray:
        types = self.types[rel]
        tuples = self.facts.relations.get(rel, ())
        source = (id(tuples), len(tuples))
        found = self._arrays.get(rel)
        if found is None or self._sources[rel] != source:
            chunks = self.facts.rows(rel)
            if chunks is not None and chunks:
                found = chunks[0] if len(chunks) == 1 else np.concatenate(chunks)
                if len(found) != len(tuples):  # a line given twice: keep each row once
                    found = found[_first_rows(found)]
            else:
                found = encode_rows(self.symbols, types, tuples)
            self._arrays[rel], self._sources[rel] = found, source
        return found

    def holds(self, rel: str, tuples) -> bool:
        """Are these tuples the very relation these columns encode?"""
        return rel in self.types and self.facts.relations.get(rel) is tuples

    def __iter__(self):
        return iter(self.types)

    def __len__(self) -> int:
        return len(self.types)


def _first_rows(rows: np.ndarray) -> np.ndarray:
    """Positions of the first occurrence of each distinct row."""
    _, first = np.unique(rows, axis=0, return_index=True)
    return np.sort(first)
