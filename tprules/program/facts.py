"""A program's facts before they are files: the one container that the builder, the Sharder
and the stamper fill, and `write` turns into a program folder (SPEC §2).

A relation is held one way at a time:

- as rows (tuples), added one at a time: `facts["op"].append((o, cls))`; ProgramBuilder
  and the Sharder build programs so;
- as columns (pyarrow string arrays, numbers written in decimal), set whole:
  `facts.set("member", [fusions, statements])`; the stamper and the passes over a stamped
  program (decode's, per_layer's) make columns with no Python loop per row.

Either way reads as the other, made on demand and held so from then on: `column(rel, i)`
of a relation held as rows makes it columns (its distinct rows, as `write` writes them);
`facts[rel]` of a relation held as columns makes it rows of str. So a relation is never
held twice, and a pass over columns converts a builder's rows once. `write` writes rows
with Python and columns with pyarrow's CSV writer, in the same layout: one file per
non-empty relation, TAB between columns, no header, each row once.

>>> f = Facts()
>>> f["op"].append(("mm0", "matmul"))
>>> f.count("op"), f.column("op", 1).to_pylist()
(1, ['matmul'])
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .schema import PROGRAM, SPEC


def strings(values) -> Any:
    """A pyarrow string array of `values` (a list or an object array of str)."""
    import pyarrow as pa

    return pa.array(values, type=pa.string())


def interned(column) -> tuple[np.ndarray, Any]:  # (codes, a pyarrow Array)
    """(codes, dictionary): codes number the distinct strings in order of first appearance."""
    import pyarrow as pa

    encoded = column.dictionary_encode()
    if isinstance(encoded, pa.ChunkedArray):
        encoded = encoded.combine_chunks()
    return encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64), encoded.dictionary


class Facts:
    """Relation → its rows or its columns; every SPEC §2 program relation is there (empty)
    from the start, in SPEC's order, and any other (a program's own `shim`) once named."""

    def __init__(self) -> None:
        self._rows: dict[str, list[tuple]] = {rel: [] for rel in PROGRAM}
        self._columns: dict[str, list] = {}

    def __iter__(self) -> Iterator[str]:
        return iter([*self._rows, *self._columns])

    def __contains__(self, rel: object) -> bool:
        return rel in self._rows or rel in self._columns

    def __getitem__(self, rel: str) -> list[tuple]:
        """The relation's rows, to read or to add to (held as columns: made rows of str)."""
        cols = self._columns.pop(rel, None)
        if cols is not None:
            self._rows[rel] = list(zip(*(c.to_pylist() for c in cols)))
        return self._rows.setdefault(rel, [])

    def __setitem__(self, rel: str, rows: list[tuple]) -> None:
        self._columns.pop(rel, None)
        self._rows[rel] = rows

    def set(self, rel: str, columns: list) -> None:
        """Hold `rel` as these columns (pyarrow string arrays of one length, rows distinct)."""
        self._rows.pop(rel, None)
        self._columns[rel] = columns

    def count(self, rel: str) -> int:
        """How many distinct rows `rel` has (as many as `write` writes)."""
        cols = self._columns.get(rel)
        if cols is not None:
            return len(cols[0]) if cols else 0
        return len(set(self._rows.get(rel, ())))

    def arity(self, rel: str) -> int:
        spec = SPEC.get(rel)
        if spec is not None:
            return spec.arity
        rows = self._rows.get(rel)
        return len(rows[0]) if rows else len(self._columns.get(rel, ()))

    def columns(self, rel: str) -> list:
        """Every column of `rel` (held as rows: made from its distinct rows, and held so)."""
        cols = self._columns.get(rel)
        if cols is None:
            arity = self.arity(rel)
            rows = list(dict.fromkeys(self._rows.pop(rel, ())))
            cols = self._columns[rel] = [strings([str(r[c]) for r in rows]) for c in range(arity)]
        return cols

    def column(self, rel: str, i: int):
        return self.columns(rel)[i]

    def write(self, directory: Path) -> Path:
        """`<rel>.facts` for every non-empty relation (older .facts files removed); rows
        made distinct, in order of first appearance."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        for old in directory.glob("*.facts"):
            old.unlink()
        for rel, rows in self._rows.items():
            if rows:
                lines = ["\t".join(str(c) for c in t) for t in dict.fromkeys(rows)]
                (directory / f"{rel}.facts").write_text("\n".join(lines) + "\n")
        if any(cols and len(cols[0]) for cols in self._columns.values()):
            self._write_columns(directory)
        return directory

    def _write_columns(self, directory: Path) -> None:
        """The relations held as columns, by pyarrow's CSV writer (no Python loop per line)."""
        import pyarrow as pa
        import pyarrow.csv as pcsv

        options = pcsv.WriteOptions(include_header=False, delimiter="\t", quoting_style="none")
        for rel, cols in self._columns.items():
            if cols and len(cols[0]):
                pcsv.write_csv(pa.table({f"c{i}": c for i, c in enumerate(cols)}), str(directory / f"{rel}.facts"),
                               options)
