"""A program's facts as columns, written by pyarrow's CSV writer (no Python loop per line).

`FactColumns` holds, for each relation, its columns as pyarrow string arrays (numbers
already written in decimal), in the layout `ProgramBuilder.write` gives: one file per
non-empty relation, TAB between columns, no header, no quoting. `candidates` adds the
producer → consumer and sibling candidates of write.py's `add_candidates`, in its order,
with numpy over interned columns.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

ARITY = {"op": 2, "reads": 3, "writes": 2, "tensor": 2, "shape": 3, "attr": 3, "chips": 1, "placed": 2,
         "spine": 1, "fold": 2, "section": 2, "relocated": 2, "member": 2}


def strings(values) -> Any:
    """A pyarrow string array of `values` (a list or an object array of str)."""
    import pyarrow as pa

    return pa.array(values, type=pa.string())


class FactColumns:
    def __init__(self):
        self.columns: dict[str, list] = {}

    def set(self, rel: str, columns: list) -> None:
        self.columns[rel] = columns

    def rows(self, rel: str) -> int:
        cols = self.columns.get(rel)
        return len(cols[0]) if cols else 0

    def column(self, rel: str, i: int):
        cols = self.columns.get(rel)
        return cols[i] if cols else strings([])

    def write(self, directory: Path) -> Path:
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
                pcsv.write_csv(pa.table({f"c{i}": c for i, c in enumerate(cols)}), str(directory / f"{rel}.facts"),
                               options)
        return directory


def _intern(column) -> tuple[np.ndarray, Any]:  # (codes, a pyarrow Array)
    """(codes, dictionary): codes number the distinct strings in order of first appearance."""
    import pyarrow as pa

    encoded = column.dictionary_encode()
    if isinstance(encoded, pa.ChunkedArray):
        encoded = encoded.combine_chunks()
    return encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64), encoded.dictionary


def candidates(facts: FactColumns) -> int:
    """Producer → consumer pairs, then sibling pairs, as `member` columns; returns how many.

    The same candidates, in the same order, as write.add_candidates: for each statement
    in writes order, each reader of its tensor in order of first read; then for each
    tensor in order of first read, if a statement writes it, each pair of its readers;
    a pair already seen (either way round) is skipped."""
    import pyarrow as pa
    import pyarrow.compute as pc

    stmts = pa.chunked_array([facts.column("op", 0), facts.column("reads", 0), facts.column("writes", 0)])
    sid, snames = _intern(stmts)
    n_op, n_reads = facts.rows("op"), facts.rows("reads")
    r_o, w_o = sid[n_op:n_op + n_reads], sid[n_op + n_reads:]
    tensors = pa.chunked_array([facts.column("reads", 2), facts.column("writes", 1)])
    tid, _ = _intern(tensors)
    r_t, w_t = tid[:n_reads], tid[n_reads:]
    n_s = int(sid.max()) + 1 if len(sid) else 1
    # readers: distinct (tensor, statement) in order of first read, grouped by tensor
    key = r_t * n_s + r_o
    _, first = np.unique(key, return_index=True)
    first.sort()
    rd_t, rd_o = r_t[first], r_o[first]
    order = np.argsort(rd_t, kind="stable")
    rd_t, rd_o = rd_t[order], rd_o[order]
    n_t = int(tid.max()) + 1 if len(tid) else 1
    count = np.bincount(rd_t, minlength=n_t)
    start = np.concatenate(([0], np.cumsum(count)[:-1]))
    # producer → consumer: each write, then its tensor's readers
    reps = count[w_t]
    pc_a = np.repeat(w_o, reps)
    offsets = np.arange(reps.sum()) - np.repeat(np.cumsum(reps) - reps, reps)
    pc_c = rd_o[np.repeat(start[w_t], reps) + offsets]
    # siblings: tensors in order of first read, written by a statement, with two readers or more
    written = np.zeros(n_t, dtype=bool)
    written[w_t] = True
    seen_t = r_t[first]
    _, t_first = np.unique(seen_t, return_index=True)
    t_order = seen_t[np.sort(t_first)]
    t_order = t_order[written[t_order] & (count[t_order] > 1)]
    sa, sc = [], []
    pairs_of: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for t in t_order.tolist():
        n = int(count[t])
        if n not in pairs_of:
            pairs_of[n] = np.triu_indices(n, 1)
        i, j = pairs_of[n]
        s = start[t]
        sa.append(rd_o[s + i])
        sc.append(rd_o[s + j])
    a = np.concatenate([pc_a, *sa]) if sa else pc_a
    c = np.concatenate([pc_c, *sc]) if sc else pc_c
    keep = a != c
    a, c = a[keep], c[keep]
    pair = np.minimum(a, c) * n_s + np.maximum(a, c)
    _, firsts = np.unique(pair, return_index=True)
    firsts.sort()
    a, c = a[firsts], c[firsts]
    names_a, names_c = snames.take(pa.array(a)), snames.take(pa.array(c))
    fusion = pc.binary_join_element_wise(names_a, names_c, "__")
    both = np.empty(2 * len(a), dtype=np.int64)
    idx = np.arange(len(a))
    both[0::2], both[1::2] = idx, idx
    members = np.empty(2 * len(a), dtype=np.int64)
    members[0::2], members[1::2] = a, c
    facts.set("member", [fusion.take(pa.array(both)), snames.take(pa.array(members))])
    return len(a)
