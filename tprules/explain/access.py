"""How the explanation pass reads a model: count, membership, lookups by bound columns, rounds.

Two readers, one per kind of model:

- `TupleAccess` over a `Model` of Python sets (the compiled and pyDatalog engines): hash
  indexes (`Model.index`), reusing those evaluation built; a column with none is scanned
  for its first lookups and indexed after.
- `ColumnarAccess` over a `ColumnarModel` (the fast engine's int64 columns): each lookup is
  a vectorised comparison of the bound columns, and only the matching rows are decoded,
  so no relation is decoded whole and no hash index is built to answer one question.

Both return tuples as Python values; callers sort them, so the answers do not depend on
the reader.
"""

from __future__ import annotations

import operator

SCANS_BEFORE_INDEX = 2  # lookups on a column with no index that scan before one builds it


def _key(values: tuple):
    """An index key as Model.index builds it: the bare value for one column, a tuple for several."""
    return values[0] if len(values) == 1 else values


def reader(model):
    """The reader that suits a model."""
    if hasattr(model, "arrays") and hasattr(model, "round_arrays"):
        return ColumnarAccess(model)
    return TupleAccess(model)


class TupleAccess:
    def __init__(self, model):
        self.model = model
        self._scans: dict[tuple[str, int], int] = {}

    def count(self, rel: str) -> int:
        return len(self.model.tuples(rel))

    def cost(self, rel: str, cols: tuple[int, ...], key: tuple, late: bool) -> tuple:
        """Join order without exact counts (they would need an index that may not be built yet):
        the most bound columns, then not `late`, then the smaller relation."""
        return (-len(cols), late, self.count(rel))

    def contains(self, rel: str, values: tuple) -> bool:
        return values in self.model.tuples(rel)

    def all(self, rel: str):
        return self.model.tuples(rel)

    def rows(self, rel: str, cols: tuple[int, ...], key: tuple) -> list[tuple]:
        """Tuples whose columns `cols` (some, not all) hold `key`."""
        model = self.model
        if model.has_index(rel, cols):
            return model.index(rel, cols).get(_key(key), ())
        pick = next((i for i, c in enumerate(cols) if model.has_index(rel, (c,))), None)
        if pick is None and self._scans.get((rel, cols[0]), 0) < SCANS_BEFORE_INDEX:
            self._scans[(rel, cols[0])] = self._scans.get((rel, cols[0]), 0) + 1
            get, want = operator.itemgetter(*cols), _key(key)
            return [t for t in model.tuples(rel) if get(t) == want]
        pick = pick or 0
        found = model.index(rel, (cols[pick],)).get(key[pick], ())
        if len(cols) > 1:
            found = [t for t in found if all(t[c] == v for c, v in zip(cols, key))]
        return found

    def round(self, rel: str, values: tuple) -> int:
        return self.model.rounds.get(rel, {}).get(values, 0)

    def symbols(self) -> list[str]:
        return sorted({v for tuples in self.model.relations.values() for t in tuples for v in t if isinstance(v, str)})

    def column_symbols(self, rel: str, col: int) -> set[str]:
        """The symbols in one column of a relation (empty for an unknown relation or column)."""
        return {t[col] for t in self.model.tuples(rel) if len(t) > col and isinstance(t[col], str)}


class ColumnarAccess:
    def __init__(self, model):
        self.model = model
        self.ids = model.symbols.ids
        self._columns: dict[tuple[str, int], object] = {}
        self._matches: dict[tuple, object] = {}  # recent lookups: a join order counts, then fetches

    def _column(self, rel: str, col: int):
        found = self._columns.get((rel, col))
        if found is None:
            import numpy as np

            found = self._columns[(rel, col)] = np.ascontiguousarray(self.model.arrays[rel][:, col])
        return found

    def _code(self, value):
        """A value as stored in the columns; None for a symbol the program never mentions."""
        return self.ids.get(value) if isinstance(value, str) else value

    def _match(self, rel: str, cols: tuple[int, ...], key: tuple):
        """Row numbers whose columns `cols` hold `key`."""
        found = self._matches.get((rel, cols, key))
        if found is None:
            if len(self._matches) > 4096:
                self._matches.clear()
            found = self._matches[(rel, cols, key)] = self._compare(rel, cols, key)
        return found

    def _compare(self, rel: str, cols: tuple[int, ...], key: tuple):
        import numpy as np

        mask = None
        for col, value in zip(cols, key):
            code = self._code(value)
            if code is None:
                return np.zeros(0, dtype=np.int64)
            hit = self._column(rel, col) == code
            mask = hit if mask is None else mask & hit
        return np.flatnonzero(mask) if mask is not None else np.zeros(0, dtype=np.intp)  # no column: no row

    def count(self, rel: str) -> int:
        return len(self.model.arrays.get(rel, ()))

    def cost(self, rel: str, cols: tuple[int, ...], key: tuple, late: bool) -> tuple:
        """Join order by the exact number of matching rows (one vectorised count)."""
        if rel not in self.model.arrays:
            return (0, late)
        return (len(self._match(rel, cols, key)) if cols else self.count(rel), late)

    def contains(self, rel: str, values: tuple) -> bool:
        if rel not in self.model.arrays:
            return False
        if not values:
            return len(self.model.arrays[rel]) > 0
        return len(self._match(rel, tuple(range(len(values))), values)) > 0

    def all(self, rel: str):
        return self.model.tuples(rel)

    def rows(self, rel: str, cols: tuple[int, ...], key: tuple) -> list[tuple]:
        if rel not in self.model.arrays:
            return []
        found = self._match(rel, cols, key)
        return self.model.decode_rows(rel, self.model.arrays[rel][found]) if len(found) else []

    def round(self, rel: str, values: tuple) -> int:
        rounds = self.model.round_arrays.get(rel)
        if rounds is None:
            return 0
        found = self._match(rel, tuple(range(len(values))), values)
        return int(rounds[found[0]]) if len(found) else 0

    def symbols(self) -> list[str]:
        return sorted(self.ids)

    def column_symbols(self, rel: str, col: int) -> set[str]:
        """The symbols in one column of a relation (empty for an unknown relation or column)."""
        from ..datalog.facts.columns import distinct

        rows = self.model.arrays.get(rel)
        decl = self.model.checked.decls.get(rel)
        if rows is None or decl is None or col >= len(decl.types) or decl.types[col] != "symbol" or not len(rows):
            return set()
        names = self.model.symbols.names
        return {names[i] for i in distinct(rows[:, col]).tolist()}
