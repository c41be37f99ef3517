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

Whether a merge would close a cycle is answered first with numpy (`through_another`: a path
of two edges, or one through a *landmark*, below) and searched only where that finds
nothing (`can_merge`). A search that finds a cycle walks the whole path it finds, and a
horizontal proposal joins siblings that may lie many layers apart (a tensor every layer
reads): on Qwen3-235B-A22B at TP 8 such searches walked 1.6 million groups, most of the
planner's own time. Landmarks answer those at once: `LANDMARKS` statements spread over the
program (landmark_reach), each statement's reach of them over the data flow computed once
(statements never stop reaching each other when groups merge), so that a member of one
group reaching a landmark that reaches a member of the other, the landmark in neither,
is a path through a third group. Only a yes is taken from it: the plans are the same.
"""

from __future__ import annotations

import numpy as np

from ..datalog.engine.keys import unique_sorted
from ..datalog.facts.columns import isin
from .groups import GroupGraph, path_between

I64 = np.int64
U64 = np.uint64
ONLY_CONSUMER, ONLY_PRODUCER = 1, 2  # why merging along an edge keeps the groups acyclic (0: not known)
LANDMARKS = 64  # statements whose reach shows a path through a third group at once (a bit each of a uint64)


def landmark_reach(n: int, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Up to `LANDMARKS` landmark statements and each statement's reach of them over the data
    flow `src[e]` → `dst[e]` (statements 0..n-1 in a topological order): (own, down, up), bit
    masks per statement, landmark i the bit 1 << i: `own` the statement's own bit (landmarks
    only), `down` the landmarks it reaches, `up` those that reach it (both with its own).
    No landmarks (every mask 0) when an edge goes backwards in the order.

    The landmarks: in each of `LANDMARKS` equal stretches of program order, the statement
    with the most producers, then the most consumers (a collective or a residual add, which
    much of the program passes through, where a transformer has them). Each mask is one
    pass over the edges, in Python: 0.02 s for the 97,000 reads of Qwen3-235B-A22B at TP 8.

    >>> own, down, up = landmark_reach(3, np.array([0, 1]), np.array([1, 2]))
    >>> own.tolist(), down.tolist(), up.tolist()
    ([1, 2, 4], [7, 6, 4], [1, 3, 7])
    """
    if n == 0 or bool((src >= dst).any()):
        nothing = np.zeros(n, dtype=U64)
        return nothing, nothing, nothing
    inputs, outputs = np.bincount(dst, minlength=n), np.bincount(src, minlength=n)
    score = inputs * (int(outputs.max(initial=0)) + 1) + outputs
    bounds = np.linspace(0, n, min(LANDMARKS, n) + 1).astype(I64).tolist()
    marks = [a + int(score[a:b].argmax()) for a, b in zip(bounds, bounds[1:]) if b > a]
    own = np.zeros(n, dtype=U64)
    own[marks] = np.left_shift(U64(1), np.arange(len(marks), dtype=U64))
    down, up = own.tolist(), own.tolist()
    order = np.argsort(src, kind="stable")[::-1]  # a statement's consumers done before it
    for s, d in zip(src[order].tolist(), dst[order].tolist()):
        down[s] |= down[d]
    order = np.argsort(dst, kind="stable")  # a statement's producers done before it
    for s, d in zip(src[order].tolist(), dst[order].tolist()):
        up[d] |= up[s]
    return own, np.array(down, dtype=U64), np.array(up, dtype=U64)


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
        self._reach: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # landmark_reach's, made on first use
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
        """For each pair: whether a path joins a[i] and b[i] through a third group (merging
        them would then close a cycle), as far as numpy shows it: an edge path of two steps,
        or a landmark's (`through_landmark`). Most proposals that would close a cycle are
        found so; `can_merge` searches the rest. A True is always a cycle; a False is not known."""
        found = self._two_steps(a, b)
        rest = np.flatnonzero(~found)
        found[rest] = self.through_landmark(a[rest], b[rest])
        return found

    def through_landmark(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """For each pair: whether a member of one group reaches a landmark statement that
        reaches a member of the other, the landmark in neither group (landmark_reach): a
        path through a third group, as paths between statements stay paths between their
        groups while the groups merge."""
        if not len(a):
            return np.zeros(0, dtype=bool)
        if self._reach is None:
            self._reach = landmark_reach(self.n, self.src, self.dst)
        own, down, up = self._reach
        size = self.members()[2]

        def masks(groups: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            """Each group's masks: the bits of its members together."""
            _, members = self.rows(groups)
            counts = size[groups]
            starts = np.cumsum(counts) - counts
            return tuple(np.bitwise_or.reduceat(m[members], starts) for m in (own, down, up))  # type: ignore[return-value]

        own_a, down_a, up_a = masks(a)
        own_b, down_b, up_b = masks(b)
        return ((down_a & up_b) | (down_b & up_a)) & ~(own_a | own_b) != 0

    def _two_steps(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """For each pair: whether an edge path of two steps joins a[i] and b[i] through a third group."""
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
            hit = isin(mid * self.wide + y[row], edges, pool_sorted=True)
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
