"""The fast engine's model: relations as int64 rows, decoded into Python tuples only when
someone asks (proofs, verdicts), so it answers like `model.Model`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

import numpy as np

from ..analysis.checked import CheckedRules
from ..facts.columns import Symbols
from .column_values import decode_column
from .model import Model


class _Relations(Mapping):
    """Relations as Python sets of tuples, decoded from the arrays on first access."""

    def __init__(self, model: "ColumnarModel"):
        self.model = model
        self.decoded: dict[str, set] = {}

    def __getitem__(self, rel: str) -> set:
        found = self.decoded.get(rel)
        if found is None:
            if rel not in self.model.arrays:
                raise KeyError(rel)
            found = self.decoded[rel] = self.model.decode(rel)
        return found

    def __iter__(self):
        return iter(self.model.arrays)

    def __len__(self) -> int:
        return len(self.model.arrays)

    def setdefault(self, rel: str, default=None):
        return self[rel] if rel in self.model.arrays else self.decoded.setdefault(rel, default or set())


class _Rounds(Mapping):
    def __init__(self, model: "ColumnarModel"):
        self.model = model
        self.decoded: dict[str, dict] = {}

    def __getitem__(self, rel: str) -> dict:
        if rel not in self.decoded:
            rounds = self.model.round_arrays[rel]
            tuples = self.model.decode_rows(rel, self.model.arrays[rel])
            self.decoded[rel] = dict(zip(tuples, rounds.tolist()))
        return self.decoded[rel]

    def __iter__(self):
        return iter(self.model.round_arrays)

    def __len__(self) -> int:
        return len(self.model.round_arrays)


class ColumnarModel(Model):
    """An evaluated program: int64 rows per relation, decoded to tuples on demand."""

    def __init__(self, checked: CheckedRules, symbols: Symbols, arrays: dict[str, np.ndarray],
                 parent: "ColumnarModel | None" = None):
        self.checked, self.symbols, self.arrays = checked, symbols, arrays
        self.round_arrays: dict[str, np.ndarray] = {}
        relations = _Relations(self)
        self.decoded = relations.decoded  # the relations decoded so far (the engine drops what it changes)
        # Read-only mappings where Model has dicts: only the tuple engine writes a Model's own.
        super().__init__(cast(dict, relations), parent=None)
        self.rounds = cast(dict, _Rounds(self))
        self._parent_model = parent

    def decode_rows(self, rel: str, rows: np.ndarray) -> list[tuple]:
        types = self.checked.decls[rel].types
        if not types:
            return [()] * len(rows)
        names = self.symbols.names
        columns = []
        for i, kind in enumerate(types):
            if kind in ("unsigned", "float"):  # stored as their 64 bits
                columns.append(decode_column(rows[:, i], kind, names))
                continue
            values = rows[:, i].tolist()
            columns.append([names[v] for v in values] if kind == "symbol" else values)
        return list(zip(*columns))

    def decode(self, rel: str) -> set:
        parent = self._parent_model
        if parent is not None and parent.arrays.get(rel) is self.arrays.get(rel):
            return parent.relations[rel]
        return set(self.decode_rows(rel, self.arrays[rel]))

    def index(self, rel: str, cols: tuple[int, ...]) -> dict:
        parent = self._parent_model
        if parent is not None and parent.arrays.get(rel) is self.arrays.get(rel):
            return parent.index(rel, cols)
        return super().index(rel, cols)

    def count(self, rel: str) -> int:
        return len(self.arrays.get(rel, ()))
