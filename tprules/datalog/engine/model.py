"""A model: every relation's tuples after an evaluation, the answer every engine gives
(the fast engine's `ColumnarModel` is one over int64 columns, decoded on demand).
Hash indexes on a relation's columns are built when a reader first asks for them."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from operator import itemgetter
from typing import Any


def build_index(tuples: Iterable[tuple], cols: tuple[int, ...]) -> dict:
    index: dict = {}
    if not cols:
        return index
    setdefault = index.setdefault
    for k, t in zip(map(itemgetter(*cols), tuples), tuples):
        setdefault(k, []).append(t)
    return index


class Model:
    """Every relation's tuples after an evaluation, with hash indexes built on demand.

    A model evaluated on top of another (`parent`) shares the parent's unchanged relations
    and their indexes.
    """

    def __init__(self, relations: dict[str, set], parent: "Model | None" = None):
        self.relations = relations
        self.parent = parent
        self.rounds: dict[str, dict[tuple, int]] = {}  # round of first derivation, recursive strata only
        self._indexes: dict[tuple, dict] = {}

    def tuples(self, rel: str) -> set:
        return self.relations.get(rel, set())

    def contains(self, rel: str, tup: tuple) -> bool:
        return tup in self.relations.get(rel, ())

    def index(self, rel: str, cols: tuple[int, ...]) -> dict:
        key = (rel, cols)
        found = self._indexes.get(key)
        if found is None:
            parent = self.parent
            if parent is not None and parent.relations.get(rel) is self.relations.get(rel):
                found = parent.index(rel, cols)
            else:
                found = build_index(self.relations.setdefault(rel, set()), cols)
            self._indexes[key] = found
        return found

    def unique_index(self, rel: str, cols: tuple[int, ...]) -> dict:
        """Key → the one tuple with that key (only asked for when every key has one)."""
        key = (rel, cols, "unique")
        found = self._indexes.get(key)
        if found is None:
            tuples = self.relations.setdefault(rel, set())
            found = dict(zip(map(itemgetter(*cols), tuples), tuples))
            self._indexes[key] = found
        return found

    def distinct_keys(self, rel: str, cols: tuple[int, ...]) -> int:
        """How many distinct values the columns take (for join ordering)."""
        key = (rel, cols, "keys")
        found = self._indexes.get(key)
        if found is None:
            index = self._indexes.get((rel, cols))
            count = len(index) if index is not None else len(set(map(itemgetter(*cols), self.relations.get(rel, ()))))
            found = self._indexes[key] = {"count": count}
        return found["count"]

    def forget_derived(self, rel: str) -> None:
        """Drop unique indexes and key counts of a relation that grows (they no longer hold)."""
        self._indexes = {k: v for k, v in self._indexes.items() if not (k[0] == rel and len(k) == 3)}

    def forget(self, rel: str) -> None:
        """Drop the indexes of a relation about to be recomputed."""
        self._indexes = {k: v for k, v in self._indexes.items() if k[0] != rel}

    def forget_derived_all(self, rels) -> None:
        """Drop unique indexes and key counts of relations about to grow."""
        rels = set(rels)
        self._indexes = {k: v for k, v in self._indexes.items() if not (k[0] in rels and len(k) == 3)}

    def built_indexes(self, rel: str) -> list[tuple[dict, Callable[[tuple], Any]]]:
        """(index, key function) of every hash index of `rel` built so far."""
        return [(index, itemgetter(*cols)) for (ix_rel, cols, *kind), index in self._indexes.items()
                if ix_rel == rel and cols and not kind]

    def has_index(self, rel: str, cols: tuple[int, ...]) -> bool:
        """Whether `index(rel, cols)` is built already (lets a reader avoid building one it can do without)."""
        if (rel, cols) in self._indexes:
            return True
        parent = self.parent
        return parent is not None and parent.relations.get(rel) is self.relations.get(rel) and parent.has_index(rel, cols)

    def add(self, rel: str, new: set) -> None:
        """Add tuples to a relation being derived, keeping its indexes current."""
        self.relations[rel] |= new
        self.forget_derived(rel)
        for (ix_rel, cols, *kind), index in self._indexes.items():
            if ix_rel == rel and cols and not kind:
                key = itemgetter(*cols)
                for t in new:
                    index.setdefault(key(t), []).append(t)
