"""An imported program's candidate fusions (`member` facts): every producer → consumer pair
of statements, and every pair of statements that read the same computed tensor (siblings),
each named `A__B`, found with numpy over interned columns."""

from __future__ import annotations

import numpy as np

from .facts import Facts, interned


def candidates(facts: Facts) -> int:
    """Set `member` to the producer → consumer pairs, then the sibling pairs; returns how many.

    For each statement in writes order, each reader of its tensor in order of first read;
    then for each tensor in order of first read, if a statement writes it, each pair of
    its readers; a pair already seen (either way round) is skipped."""
    import pyarrow as pa
    import pyarrow.compute as pc

    op, (r_stmt, r_tensor), (w_stmt, w_tensor) = facts.column("op", 0), facts.columns("reads")[::2], \
        facts.columns("writes")
    sid, snames = interned(pa.chunked_array([op, r_stmt, w_stmt]))
    n_op, n_reads = len(op), len(r_stmt)
    r_o, w_o = sid[n_op:n_op + n_reads], sid[n_op + n_reads:]
    tid, _ = interned(pa.chunked_array([r_tensor, w_tensor]))
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
