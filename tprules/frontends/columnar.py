"""A program's facts as columns, written by pyarrow's CSV writer (no Python loop per line).

`FactColumns` holds, for each relation, its columns as numpy arrays of strings (numbers
already written in decimal), the layout `ProgramBuilder.write` gives: one file per
non-empty relation, TAB between columns, no header, no quoting. `candidates` adds the
producer → consumer and sibling candidates of write.py's `add_candidates`, in its order.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

ARITY = {"op": 2, "reads": 3, "writes": 2, "tensor": 2, "shape": 3, "attr": 3, "chips": 1, "placed": 2,
         "spine": 1, "fold": 2, "section": 2, "relocated": 2, "member": 2}


class FactColumns:
    def __init__(self):
        self.columns: dict[str, list[np.ndarray]] = {}

    @classmethod
    def from_rows(cls, relations: dict[str, list[tuple]]) -> "FactColumns":
        out = cls()
        for rel, rows in relations.items():
            out.set(rel, _columns(rows, ARITY.get(rel, len(rows[0]) if rows else 0)))
        return out

    def set(self, rel: str, columns: list[np.ndarray]) -> None:
        self.columns[rel] = columns

    def rows(self, rel: str) -> int:
        cols = self.columns.get(rel)
        return len(cols[0]) if cols else 0

    def column(self, rel: str, i: int) -> np.ndarray:
        cols = self.columns.get(rel)
        return cols[i] if cols else np.array([], dtype=object)

    def write(self, directory: Path, progress=None) -> Path:
        """`<rel>.facts` for every non-empty relation (older .facts files removed)."""
        import pyarrow as pa
        import pyarrow.csv as pcsv

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        for old in directory.glob("*.facts"):
            old.unlink()
        options = pcsv.WriteOptions(include_header=False, delimiter="\t", quoting_style="none")
        for rel, cols in self.columns.items():
            if cols and len(cols[0]):
                table = pa.table({f"c{i}": pa.array(c, type=pa.string()) for i, c in enumerate(cols)})
                pcsv.write_csv(table, str(directory / f"{rel}.facts"), options)
            if progress is not None:
                progress(len(cols[0]) if cols else 0)
        return directory


def _columns(rows: list[tuple], arity: int) -> list[np.ndarray]:
    rows = list(dict.fromkeys(rows))
    out = []
    for i in range(arity):
        col = np.empty(len(rows), dtype=object)
        col[:] = [str(r[i]) for r in rows]
        out.append(col)
    return out


def candidates(facts: FactColumns) -> int:
    """Producer → consumer pairs, then sibling pairs, as `member` columns; returns how many."""
    from itertools import combinations

    readers: dict[str, dict[str, None]] = {}
    for o, t in zip(facts.column("reads", 0).tolist(), facts.column("reads", 2).tolist()):
        rs = readers.get(t)
        if rs is None:
            readers[t] = {o: None}
        else:
            rs[o] = None
    seen: set[tuple[str, str]] = set()
    fusions: list[str] = []
    members: list[str] = []

    def add(a: str, c: str) -> None:
        key = (a, c) if a < c else (c, a)
        if a != c and key not in seen:
            seen.add(key)
            f = f"{a}__{c}"
            fusions.extend((f, f))
            members.extend((a, c))

    writes = zip(facts.column("writes", 0).tolist(), facts.column("writes", 1).tolist())
    written = set()
    for o, t in writes:
        written.add(t)
        for c in readers.get(t, ()):
            add(o, c)
    for t, rs in readers.items():
        if t in written and len(rs) > 1:
            for a, c in combinations(rs, 2):
                add(a, c)
    fcol, mcol = np.empty(len(fusions), dtype=object), np.empty(len(members), dtype=object)
    fcol[:], mcol[:] = fusions, members
    facts.set("member", [fcol, mcol])
    return len(seen)
