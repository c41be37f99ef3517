"""Row keys and joins over int64 columns (the building blocks of the columnar engine)."""

from __future__ import annotations

import numpy as np

I64 = np.int64
_LIMIT = 1 << 62
_I32 = 1 << 31


def unique_sorted(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct keys in order, the position of one occurrence of each, and each key's
    group number. Sort-based: numpy's hash-based `unique` is several times slower on int64
    keys, and an unstable sort (which numpy vectorises) several times faster than a stable one."""
    order = np.argsort(keys)
    ordered = keys[order]
    starts = np.ones(len(keys), dtype=bool)
    starts[1:] = ordered[1:] != ordered[:-1]
    group = np.cumsum(starts) - 1
    inverse = np.empty(len(keys), dtype=I64)
    inverse[order] = group
    return ordered[starts], order[starts], inverse


def _compress(left: np.ndarray, right: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    uniques, _, inverse = unique_sorted(np.concatenate([left, right]))
    return inverse[: len(left)], inverse[len(left):], len(uniques)


def joint_keys(left: list, right: list) -> tuple[np.ndarray, np.ndarray]:
    """One int64 key per row of each side, equal exactly when the rows are equal column by column."""
    nl = len(left[0]) if left else 0
    nr = len(right[0]) if right else 0
    if not left:
        return np.zeros(nl, dtype=I64), np.zeros(nr, dtype=I64)
    lk: np.ndarray | None = None
    rk: np.ndarray
    size = 1
    for j, column in enumerate(left):
        a = np.asarray(column, dtype=I64)
        b = np.asarray(right[j], dtype=I64) if right else np.zeros(0, dtype=I64)
        both = [x for x in (a, b) if len(x)]
        lo = min(int(x.min()) for x in both) if both else 0
        hi = max(int(x.max()) for x in both) if both else 0
        span = hi - lo + 1
        if span >= _LIMIT:  # values all over the 64 bits: their ranks instead
            a, b, span = _compress(a, b)
            lo = 0
        if lk is None:
            lk, rk, size = a - lo, b - lo, span
            continue
        if size * span >= _LIMIT:
            lk, rk, size = _compress(lk, rk)
        lk = lk * span + (a - lo)
        rk = rk * span + (b - lo)
        size *= span
    assert lk is not None  # left has a column
    return lk, rk


def anti_join_mask(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """True where a left key has no equal right key."""
    if len(right) == 0:
        return np.ones(len(left), dtype=bool)
    ordered = np.sort(right)
    position = np.minimum(np.searchsorted(ordered, left), len(ordered) - 1)
    return ordered[position] != left


def dedupe_rows(columns: list) -> np.ndarray:
    """Positions of one occurrence of each distinct row (in key order)."""
    keys = joint_keys(columns, [])[0]
    return unique_sorted(keys)[1]


def distinct_rows(rows: np.ndarray) -> np.ndarray:
    """The distinct rows in key order: `rows[dedupe_rows(list(rows.T))]`, found by sorting
    the rows' keys and decoding them back into columns (numpy sorts values several times
    faster than it sorts positions). Rows whose keys would not fit in 62 bits go the slower way."""
    ranges, size = [], 1
    for column in rows.T:
        lo = int(column.min())
        span = int(column.max()) - lo + 1
        if size * span >= _LIMIT:
            return rows[dedupe_rows(list(rows.T))]
        ranges.append((lo, span))
        size *= span
    keys: np.ndarray | None = None
    for (lo, span), column in zip(ranges, rows.T):
        part = column.astype(I64) - lo
        keys = part if keys is None else keys * span + part
    assert keys is not None  # rows have a column
    keys = np.sort(keys)
    head = np.empty(len(keys), dtype=bool)
    head[:1] = True
    np.not_equal(keys[1:], keys[:-1], out=head[1:])
    keys = keys[head]
    out = np.empty((len(keys), rows.shape[1]), dtype=rows.dtype)
    for i in range(rows.shape[1] - 1, -1, -1):
        lo, span = ranges[i]
        keys, out[:, i] = np.divmod(keys, span)
        out[:, i] += lo
    return out


def group_ids(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each row its group number, and the sorted distinct keys."""
    uniques, _, inverse = unique_sorted(keys)
    return inverse, uniques


class KeyIndex:
    """Rows keyed on some columns and sorted, for repeated lookups from other tables.

    The key encoding depends only on these rows (a value outside a column's range cannot
    match), so one index serves every join against the same relation.
    """

    def __init__(self, columns: list[np.ndarray], views: bool = False):
        """With `views` (the columns are views of arrays that outlive the index), the rows'
        positions in key order are sorted for on the first join only: an existence test
        or an anti-join needs just the sorted keys."""
        self.n = len(columns[0]) if columns else 0
        self._ranges: list[tuple[int, int] | np.ndarray] = []  # per column: (lo, span) or the sorted distinct values
        size = 1
        for column in columns:
            lo = int(column.min()) if self.n else 0
            span = (int(column.max()) - lo + 1) if self.n else 1
            if size * span >= _LIMIT:  # fall back to dense ranks per column
                self._ranges = [unique_sorted(np.asarray(c, dtype=I64))[0] for c in columns]
                size = int(np.prod([len(v) for v in self._ranges], dtype=object))
                break
            self._ranges.append((lo, span))
            size *= span
        dense = bool(self._ranges) and not isinstance(self._ranges[0], tuple)
        keys = self._own_keys(columns)
        # Keys below 2**31 are kept (and looked up) as int32: half the memory of an index
        # that a later stratum or a planner's question reuses.
        self._key = np.int32 if size < _I32 else I64
        self._columns: list | None = columns
        self._order: np.ndarray | None = None
        if views:  # the keys themselves are sorted (nothing else needs their order now)
            keys.sort()
            self.sorted = keys.astype(self._key, copy=False)
        else:
            self._order = self._sorted_positions(keys)
            self.sorted = keys[self._order].astype(self._key, copy=False)
        # Small key spaces are addressed directly: a key's rows are order[starts[k]:starts[k] + counts[k]].
        # One more entry, last, holds no rows: the key -1 (no match) addresses it.
        self.direct = size <= max(8 * self.n, 1 << 16)
        if self.direct:
            counts = np.bincount(keys, minlength=size + 1) if self.n else np.zeros(size + 1, dtype=I64)
            small = np.int32 if self.n < _I32 else I64
            self.counts, self.starts = counts.astype(small), (np.cumsum(counts) - counts).astype(small)
        self.unique = self.n < 2 or bool(np.all(self.sorted[1:] != self.sorted[:-1]))
        # Otherwise, when the first column's values are few and each holds few rows (a
        # candidate's members, say), address the first column directly and scan its bucket.
        self.bucketed = False
        if not self.direct and not dense and len(self._ranges) > 1 and self.n:
            first_span = self._ranges[0][1]
            self._rest = size // first_span
            if first_span <= max(8 * self.n, 1 << 16):
                counts = np.bincount(self.sorted // self._rest, minlength=first_span).astype(I64)
                self._width = int(counts.max())
                if self._width <= 16:
                    self.bucketed = True
                    small = np.int32 if self.n < _I32 else I64
                    self._bucket_counts, self._bucket_starts = counts.astype(small), (np.cumsum(counts) - counts).astype(small)

    def _own_keys(self, columns: list) -> np.ndarray:
        """The int64 key of each of this index's own rows."""
        keys = np.zeros(self.n, dtype=I64)
        for rng, column in zip(self._ranges, columns):  # in place: one array of keys at a time
            if isinstance(rng, tuple):
                keys *= rng[1]
                keys += column
                keys -= rng[0]
            else:
                keys *= len(rng)
                keys += np.searchsorted(rng, np.asarray(column, dtype=I64))
        return keys

    @property
    def order(self) -> np.ndarray:
        """The positions of the rows in key order (made on the first join, with `views`)."""
        if self._order is None:
            assert self._columns is not None  # dropped only once the order is made
            self._order = self._sorted_positions(self._own_keys(self._columns))
        return self._order

    def _sorted_positions(self, keys: np.ndarray) -> np.ndarray:
        self._columns = None
        order = np.argsort(keys)
        return order.astype(np.int32) if self.n < _I32 else order  # positions: half the memory

    def encode(self, columns: list) -> np.ndarray:
        """Keys of other rows in this index's encoding; -1 where no row here can match."""
        n = len(columns[0])
        keys, miss = None, None
        for rng, column in zip(self._ranges, columns):
            if isinstance(rng, tuple):
                lo, span = rng
                part = np.subtract(column, lo, dtype=I64)  # a new array (the column is left as it is)
                out = part.view(np.uint64) >= span  # below lo (negative) or past the span
                part[out] = 0
            else:
                column = np.asarray(column, dtype=I64)
                span = max(len(rng), 1)
                part = np.minimum(np.searchsorted(rng, column), span - 1)
                out = (rng[part] != column) if len(rng) else np.ones(n, dtype=bool)
            if miss is None:
                miss = out
            else:
                miss |= out
            if keys is None:
                keys = part
            else:  # in place: one array of keys at a time
                keys *= span
                keys += part
        if keys is None:
            return np.zeros(n, dtype=self._key)
        keys[miss] = -1
        return keys.astype(self._key, copy=False)

    def join(self, columns: list) -> tuple[np.ndarray, np.ndarray]:
        """Index pairs (left row, row here) whose key columns are equal."""
        left = self.encode(columns)
        if self.direct:  # a miss (-1) addresses the last entry, which holds no rows
            lo, counts = self.starts[left], self.counts[left]
        elif self.bucketed:
            lo, counts = self._scan_buckets(left, left >= 0)
        else:
            found = left >= 0
            lo = np.searchsorted(self.sorted, left, "left")
            if self.unique:
                position = np.minimum(lo, max(self.n - 1, 0))
                counts = (found & (self.sorted[position] == left)).astype(I64) if self.n else np.zeros(len(left), I64)
            else:
                counts = np.where(found, np.searchsorted(self.sorted, left, "right") - lo, 0)
        if self.unique:  # at most one row per key: no repetition needed
            hit = np.flatnonzero(counts)
            return hit.astype(I64, copy=False), self.order[lo[hit]]
        total = int(counts.sum())
        # Positions as int32 where they fit: a join that multiplies rows holds a few arrays
        # as long as its result at once.
        small = np.int32 if max(total, len(left), self.n) < _I32 else I64
        li = np.repeat(np.arange(len(left), dtype=small), counts)
        if total == 0:
            return li, np.zeros(0, dtype=I64)
        # the j-th pair of a run that starts at pair `start` of the result is row lo + (j - start) here
        position = np.repeat((lo - (np.cumsum(counts, dtype=I64) - counts)).astype(small, copy=False), counts)
        position += np.arange(total, dtype=small)
        return li, self.order[position]

    def contains(self, columns: list) -> np.ndarray:
        """True where a row with equal key columns is here."""
        left = self.encode(columns)
        if self.n == 0:
            return np.zeros(len(left), dtype=bool)
        if self.direct:
            return self.counts[left] > 0  # a miss (-1) addresses the last entry, which holds no rows
        if self.bucketed:
            return self._scan_buckets(left, left >= 0, first_only=True)[1]
        position = np.minimum(np.searchsorted(self.sorted, left), self.n - 1)
        return (self.sorted[position] == left) & (left >= 0)

    def _scan_buckets(self, left: np.ndarray, found: np.ndarray,
                      first_only: bool = False) -> tuple[np.ndarray | None, np.ndarray]:
        """For each left key: the position of its first equal key here, and how many there
        are (`first_only`: None, and whether there is one). Positions and counts are int32
        where the index allows: a bucket scan of a few hundred thousand rows holds a handful
        of such arrays at once."""
        small = np.int32 if self.n < _I32 else I64
        first = np.where(found, left // self._rest, 0)
        base = self._bucket_starts[first].astype(small, copy=False)
        width: np.ndarray = np.where(found, self._bucket_counts[first], 0).astype(small, copy=False)
        del first
        lo = None if first_only else np.zeros(len(left), dtype=small)
        counts = np.zeros(len(left), dtype=bool if first_only else small)
        last = self.n - 1
        for k in range(self._width):
            equal = k < width
            equal &= self.sorted[np.minimum(base + k, last)] == left
            if lo is None:  # first_only
                counts |= equal
                continue
            fresh = equal & (counts == 0)
            lo[fresh] = base[fresh] + k
            counts += equal
        return lo, counts
