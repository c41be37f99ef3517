"""Facts as int64 columns: symbols interned to ids, one array of rows per relation.

A program's facts are encoded as they are read (datalog/facts/reader.py), then shared by the
well-formedness guards, the fast engine (which takes the same symbol table) and the
verdicts, so a model-sized program is encoded once and decoded only where text is shown.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import filterfalse, islice
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

    def intern(self, values: list[str], distinct: bool = False) -> np.ndarray:
        """Ids of many values at once (a column's dictionary, `distinct` values): the new
        ones are added in one update, without a call back into Python per symbol."""
        self._sync()
        ids = self.ids
        start = len(ids)
        new = list(filterfalse(ids.__contains__, values))
        if not distinct:
            new = list(dict.fromkeys(new))
        if new:
            ids.update(zip(new, range(start, start + len(new))))
            self.names.extend(new)
            self._ranks = None
        if len(new) == len(values):  # all new and distinct (a first dictionary): ids in order
            return np.arange(start, start + len(new), dtype=I64)
        return np.fromiter(map(ids.__getitem__, values), dtype=I64, count=len(values))

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


def decode_rows(symbols: Symbols, types: tuple[str, ...], rows: np.ndarray) -> list[tuple]:
    """Rows back into Python tuples (symbols as strings, numbers as ints)."""
    if not types:
        return [()] * len(rows)
    names = symbols.names
    columns = []
    for i, kind in enumerate(types):
        values = rows[:, i].tolist()
        columns.append([names[v] for v in values] if kind == "symbol" else values)
    return list(zip(*columns))


def distinct(keys: np.ndarray) -> np.ndarray:
    """The distinct keys in order, as `np.unique` gives them, by sorting (numpy's hash-based
    `unique` is several times slower on int64 keys)."""
    ordered = np.sort(keys)
    if len(ordered) < 2:
        return ordered
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))]


def unique(values, return_index: bool = False, return_inverse: bool = False, return_counts: bool = False):
    """`np.unique` of a 1-D integer array, by one stable sort: the distinct values in order,
    and as asked the first position of each, each value's place among them, and how many
    of each. (Numpy's own `unique` imports `numpy.ma` on its first call, 8 ms of a
    command's start-up, and is hash-based, thus slower, on int64.)"""
    values = np.asarray(values).reshape(-1)
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    head = np.empty(len(ordered), dtype=bool)
    head[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=head[1:])
    found = [ordered[head]]
    if return_index:
        found.append(order[head])
    if return_inverse:
        inverse = np.empty(len(values), dtype=np.intp)
        inverse[order] = np.cumsum(head) - 1
        found.append(inverse)
    if return_counts:
        found.append(np.diff(np.append(np.flatnonzero(head), len(values))))
    return found[0] if len(found) == 1 else tuple(found)


def isin(values: np.ndarray, pool, pool_sorted: bool = False) -> np.ndarray:
    """`np.isin(values, pool)` by sorting the pool and searching it (np.isin goes through
    numpy's hash-based `unique`, several times slower on int64). With `pool_sorted` the pool
    (an int64 array, ascending) is searched as it is: a caller that asks of one sorted pool
    many times does not pay a sort each time."""
    pool = np.asarray(pool, dtype=I64).reshape(-1) if pool_sorted else np.sort(np.asarray(pool, dtype=I64).reshape(-1))
    values = np.asarray(values)
    if len(pool) == 0:
        return np.zeros(values.shape, dtype=bool)
    return pool[np.minimum(np.searchsorted(pool, values), len(pool) - 1)] == values


def first_occurrences(rows: np.ndarray) -> np.ndarray | None:
    """Positions of the first occurrence of each distinct row, in order; None when no row
    repeats (the common case, found with one sort of a combined key)."""
    n = len(rows)
    if n < 2:
        return None
    if rows.shape[1] == 0:
        return np.zeros(1, dtype=I64)
    key, size = np.zeros(n, dtype=I64), 1
    for i in range(rows.shape[1]):
        column = rows[:, i]
        low = int(column.min())
        span = int(column.max()) - low + 1
        if size * span >= 1 << 62:  # no room for a combined key: compare whole rows
            _, first = np.unique(rows, axis=0, return_index=True)
            return None if len(first) == n else np.sort(first)
        key, size = key * span + (column - low), size * span
    ordered = np.sort(key)
    if not np.any(ordered[1:] == ordered[:-1]):
        return None
    order = np.argsort(key, kind="stable")  # repeats: keep each row's first line
    ordered = key[order]
    return np.sort(order[np.concatenate(([True], ordered[1:] != ordered[:-1]))])


class Columns(Mapping):
    """A fact base's relations as int64 rows (distinct, file order); a relation of `types`
    that has no facts is an empty array of its width."""

    def __init__(self, facts, types: Mapping[str, tuple[str, ...]]):
        self.facts, self.types = facts, types
        self.symbols = facts.symbols

    def __getitem__(self, rel: str) -> np.ndarray:
        found = self.facts.rows(rel)
        return found if found is not None else np.zeros((0, len(self.types[rel])), dtype=I64)

    def __iter__(self):
        return iter(self.types)

    def __len__(self) -> int:
        return len(self.types)
