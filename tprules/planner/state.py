"""The planner's groups as integer arrays: each statement's group, each group's first statement,
place and slot, merged a whole round at a time.

Statements are the integers 0..n-1 of a `PlanIndex` (program order, a topological order of
the data flow); statement k starts as group k and a merge makes a new id (n, n + 1, ...), so
every id is below 2n + 1. The arrays are indexed by group id:

- `group_of[k]`: statement k's group; a group's members are found by sorting it (`members`);
- `first`, `place`, `seconds` (the cost model's estimate; NaN before it is asked): per group;
- `pos`: a slot per group in a topological order of the graph of groups, so that whether a
  path runs from one group to another is a search bounded by the second's slot (`can_merge`).

Most merges are along an edge whose producer has no other consumer, or whose consumer no
other producer (an *easy* merge). Contracting such an edge cannot make a cycle, changes no
path between other groups, and keeps every other easy edge easy; the merged group can take
the consumer's slot (the producer had no other way out) or the producer's (the consumer had
no other way in). So a round's easy merges are applied together (`merge_easy`), with numpy,
whatever their order. A round that makes a merge of any other kind is applied one merge at
a time on a `GroupGraph` (groups.py: Pearce and Kelly's dynamic order), made from these
arrays for it and read back after (`graph`, `read_back`).
"""

from __future__ import annotations

import numpy as np

from ..datalog.engine.keys import unique_sorted
from ..datalog.facts.columns import isin
from .groups import GroupGraph, path_between

I64 = np.int64
ONLY_CONSUMER, ONLY_PRODUCER = 1, 2  # why merging along an edge keeps the groups acyclic (0: not known)


class GroupArrays:
    def __init__(self, n: int, src: np.ndarray, dst: np.ndarray, places: list[int]):
        """`n` statements, `src[e]` → `dst[e]` the data flow, `places` each statement's place code."""
        self.n, self.src, self.dst = n, src, dst
        self.wide = wide = 2 * n + 1  # group ids are below this: a pair (a, b) is the number a * wide + b
        self.group_of = np.arange(n, dtype=I64)
        self.next = n
        self.first = np.full(wide, -1, dtype=I64)
        self.first[:n] = np.arange(n)
        self.place = np.zeros(wide, dtype=I64)
        self.place[:n] = places
        self.pos = np.zeros(wide, dtype=I64)
        self.pos[:n] = np.arange(n)
        self.seconds = np.full(wide, np.nan)
        self._changed()

    def _changed(self) -> None:
        # made on first use after each change
        self._edges: np.ndarray | None = None
        self._members: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._succ: tuple[list[int], list[int], list[int], list[int], list[int], list[int]] | None = None
        self._starts: tuple[np.ndarray, np.ndarray] | None = None

    # -- what the groups are now ---------------------------------------------------

    def __len__(self) -> int:
        return len(self.live())

    def edges(self) -> np.ndarray:
        """Every edge between two groups, as its pair number, sorted (so by producer)."""
        if self._edges is None:
            g = self.group_of
            a, b = g[self.src], g[self.dst]
            between = a != b
            self._edges = unique_sorted(a[between] * self.wide + b[between])[0]
        return self._edges

    def members(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(statements by group, each group's start in it, each group's size): a group's
        members are `order[start[g]:start[g] + size[g]]`, in program order."""
        if self._members is None:
            order = np.argsort(self.group_of, kind="stable")
            size = np.bincount(self.group_of, minlength=self.wide)
            start = np.zeros(self.wide + 1, dtype=I64)
            np.cumsum(size, out=start[1:])
            self._members = order, start, size
        return self._members

    def rows(self, *parts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The members of groups parts[0][i], parts[1][i], ... together, for every i:
        (i, statement) rows, by i, each group's members in program order, parts[0]'s first."""
        order, start, size = self.members()
        g = np.stack(parts, axis=1).ravel()
        counts = size[g]
        part = np.repeat(np.arange(len(g), dtype=I64), counts)
        offset = np.arange(len(part), dtype=I64) - np.repeat(np.cumsum(counts) - counts, counts)
        return part // len(parts), order[start[g][part] + offset]

    def live(self) -> np.ndarray:
        """Every group's id, ascending."""
        return np.flatnonzero(self.members()[2])

    # -- acyclicity ----------------------------------------------------------------

    def through_another(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """For each pair: whether an edge path of two steps joins a[i] and b[i] through a
        third group (merging them would then close a cycle). Most proposals that would are
        found so, with numpy; `can_merge` searches the rest."""
        edges = self.edges()
        if self._starts is None:
            src, dst = np.divmod(edges, self.wide)
            self._starts = dst, np.searchsorted(src, np.arange(self.wide + 1))
        dst, start = self._starts

        def two_steps(x: np.ndarray, y: np.ndarray) -> np.ndarray:
            count = start[x + 1] - start[x]
            row = np.repeat(np.arange(len(x), dtype=I64), count)
            mid = dst[start[x][row] + np.arange(len(row), dtype=I64) - np.repeat(np.cumsum(count) - count, count)]
            other = mid != y[row]
            row, mid = row[other], mid[other]
            hit = isin(mid * self.wide + y[row], edges)
            return np.bincount(row[hit], minlength=len(x)) > 0

        return two_steps(a, b) | two_steps(b, a)

    def can_merge(self, a: int, b: int) -> bool:
        """Whether merging groups a and b keeps the graph of groups acyclic (as `GroupGraph.can_merge`)."""
        if self._succ is None:  # as lists: the search below reads them an element at a time
            heads, tails = np.divmod(self.edges(), self.wide)
            by_tail = np.argsort(tails, kind="stable")
            self._succ = (tails.tolist(), np.searchsorted(heads, np.arange(self.wide + 1)).tolist(),
                          np.bincount(tails, minlength=self.wide).tolist(), self.pos.tolist(),
                          heads[by_tail].tolist(), np.searchsorted(tails[by_tail], np.arange(self.wide + 1)).tolist())
        dst, start, into, pos, src, into_start = self._succ
        lo, hi = (a, b) if pos[a] < pos[b] else (b, a)
        out = dst[start[lo]:start[lo + 1]]
        direct = hi in out
        if len(out) == 0 or len(out) == 1 and direct or into[hi] == 0 or into[hi] == 1 and direct:
            return True
        return not path_between(lambda x: dst[start[x]:start[x + 1]], lambda x: src[into_start[x]:into_start[x + 1]],
                                pos, lo, hi)

    # -- merging -------------------------------------------------------------------

    def merge_easy(self, a: np.ndarray, b: np.ndarray, why: np.ndarray, places: np.ndarray) -> np.ndarray:
        """Merge producer group a[i] into consumer group b[i] for every i (disjoint, each
        easy for the reason `why[i]`), into new groups numbered in that order, of places
        `places`; returns the new ids."""
        new = np.arange(self.next, self.next + len(a), dtype=I64)
        self.next += len(a)
        relabel = np.arange(self.wide, dtype=I64)
        relabel[a] = new
        relabel[b] = new
        self.group_of = relabel[self.group_of]
        self.first[new] = np.minimum(self.first[a], self.first[b])
        self.place[new] = places
        self.pos[new] = np.where(why == ONLY_CONSUMER, self.pos[b], self.pos[a])
        self._changed()
        return new

    def graph(self) -> GroupGraph:
        """The groups as a `GroupGraph`, in the same slots; new groups are numbered on from `next`."""
        order, start, size = self.members()
        live = self.live().tolist()
        src, dst = np.divmod(self.edges(), self.wide)
        gg = GroupGraph.from_groups(self.group_of.tolist(), {g: order[start[g]:start[g] + size[g]].tolist() for g in live},
                                    dict(zip(live, self.pos[live].tolist())), src.tolist(), dst.tolist(), self.next)
        return gg

    def read_back(self, gg: GroupGraph) -> None:
        """Take a `GroupGraph`'s groups and slots after it merged (first, place and seconds
        of the new groups are set by the caller)."""
        self.group_of = np.array(gg.group_of, dtype=I64)
        self.next = gg._next
        ids = np.fromiter(gg.pos.keys(), dtype=I64, count=len(gg.pos))
        self.pos[ids] = np.fromiter(gg.pos.values(), dtype=I64, count=len(gg.pos))
        self._changed()
