"""Greedy fusion that asks the shim before every merge, in rounds of batched questions.

A *proposal* merges two groups: a producer group into its consumer group (vertical), or
two groups that read the same tensor and share a place (horizontal). Each round picks
proposals in priority order, each group in at most one of them, asks the shim about all
of them in one batch, and applies those the shim allows while the graph of groups stays
acyclic. Passes run until a round proposes nothing:

1. vertical, producer and consumer in the same place; a matmul's elementwise epilogue (also
   through views of its result) and attention's chain (a bmm, the work on its result, the
   bmm that reads it) first (index.priority_pairs);
2. horizontal, siblings in the same place;
3. vertical across places, asked all at once (under the project's rules they are all
   refused; the rules decide that, not the planner, so a rule edit can change it).

With a cost model (planner/cost.py), a merge the shim allows is made only when its
kernel is estimated no slower than the two groups' kernels apart.

Every answer is remembered, so no fused op is asked about twice. Groups only merge, so a
member set asked about again is the same two groups again: answers are kept by the pair
of groups (in either order), which needs no set of members built per proposal.

Statements are the integers of a `PlanIndex` (planner/index.py), groups are integer ids
(a statement k starts as group k; a merge makes a new id) held in arrays (planner/state.py),
and a round is worked with numpy over all its proposals at once: found and put in priority
order over the data flow's edges; chosen (each group once, in that order: the proposals
first in order on both their groups are taken together, and those touching their groups
dropped, until few are left; only proposals not known to keep the groups acyclic are searched
one by one); asked as one batch of member rows; and merged together when every merge made is
along an edge that cannot close a cycle (state.py says why the order then does not matter).
A round with any other merge is applied one merge at a time, as the order requires.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import chain
from typing import cast

import numpy as np

from ..datalog.facts.columns import distinct, isin, unique
from .cost import TIE
from .index import PlanIndex
from .state import ONLY_CONSUMER, ONLY_PRODUCER, GroupArrays

SIBLINGS_ALL_PAIRS = 8  # readers of one tensor up to which every pair is proposed; beyond, neighbours only
MATCHING_ROUNDS = 32  # rounds of taking, with numpy, the proposals first on both their groups; then one by one
I64 = np.int64

# (proposals' names, each member row's proposal (an index into the names), its statement) → whether each is allowed
Asker = Callable[[list[str], np.ndarray, np.ndarray], list[bool]]


def member_lists(owner: np.ndarray, statements: np.ndarray, count: int) -> list[list[int]]:
    """Each proposal's statements in program order, from (proposal, statement) rows."""
    order = np.lexsort((statements, owner))
    flat = statements[order].tolist()
    ends = np.cumsum(np.bincount(owner, minlength=count)).tolist()
    return [flat[a:b] for a, b in zip([0, *ends[:-1]], ends)]


@dataclass
class Stats:
    """What the planner did, for `--show=plan`."""

    rounds: int = 0
    asked: int = 0
    batches: int = 0
    merged: int = 0
    refused: int = 0
    costly: int = 0  # allowed by the shim, not made: estimated slower than the parts
    kernels: int = 0  # collective kernels formed before the passes (planner/kernels.py)
    by_pass: dict[str, int] = field(default_factory=dict)


class Greedy:
    """One planning run: groups start as single statements and merge as the shim allows.

    `ask` answers a batch of proposals; `places` is each statement's place (`chip:K`,
    `spine`, `collective`, or "" for none); `cost` (a planner.cost.KernelCost) turns down
    merges estimated slower than their parts; `progress` counts the merges.
    """

    def __init__(self, index: PlanIndex, ask: Asker, places: list[str], across_places: bool = True, cost=None,
                 progress=None):
        self.index, self.asker, self.cost, self.progress = index, ask, cost, progress
        self.across_places = across_places
        self.names = index.names
        self.place_names: list[str] = list(dict.fromkeys(places))
        code = {p: i for i, p in enumerate(self.place_names)}
        self.groups = GroupArrays(len(index), index.src, index.dst, [code[p] for p in places])
        self.wide = self.groups.wide
        self.legal: dict[int, bool] = {}  # every answer, by the pair of groups (the lower id first)
        # Pairs never to propose again: refused (a group's members never change) or cyclic
        # (merging only adds paths between other groups).
        self._dead: list[np.ndarray] = []
        self._shared: tuple[np.ndarray, np.ndarray] | None = None
        self.stats = Stats()
        self._names = 0

    # -- the passes ------------------------------------------------------------------

    def preform(self, groups: list[list[int]], place: str) -> None:
        """Make each of `groups` (statement positions in program order, disjoint, each known
        to be acyclic as one group) one group of place `place` before the passes: the
        collective kernels (planner/kernels.py). Merged in program order, no step can close a
        cycle that the whole group would not."""
        if not groups:
            return
        if place not in self.place_names:
            self.place_names.append(place)
        code = self.place_names.index(place)
        g = self.groups
        graph = g.graph()
        group_of = cast("list[int]", graph.group_of)  # by statement number (GroupGraph.from_groups)
        for members in groups:
            at = members[0]
            for k in members[1:]:
                new = graph.try_merge(group_of[at], group_of[k])
                assert new is not None, "a collective kernel checked acyclic closed a cycle"
                g.first[new] = members[0]
                g.place[new] = code
            self.stats.kernels += 1
        g.read_back(graph)

    def run(self) -> GroupArrays:
        if self.progress is not None:
            self.progress.phase("plan: merges", max(len(self.names) - 1, 1))
        passes = [("vertical", self.vertical, True), ("horizontal", self.horizontal, True)]
        if self.across_places:
            passes.append(("cross-place", self.cross_place, False))
        changed = True
        while changed:
            changed = False
            for name, propose, disjoint in passes:
                merged = self.run_pass(propose, disjoint)
                self.stats.by_pass[name] = self.stats.by_pass.get(name, 0) + merged
                changed |= merged > 0
        return self.groups

    def run_pass(self, propose: Callable[[], tuple[np.ndarray, np.ndarray]], disjoint: bool) -> int:
        """Rounds of one kind of proposal until a round has none left to ask or apply; returns the merges."""
        merged = 0
        while True:
            chosen = self.choose(*propose(), disjoint)
            if not len(chosen[0]):
                return merged
            self.stats.rounds += 1
            self.ask(*chosen)
            merged += self.settle(*chosen, disjoint)

    def choose(self, pairs: np.ndarray, why: np.ndarray, disjoint: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Proposals (pair numbers, best first; `why`: nonzero when known to keep the groups
        acyclic, state.py) worth asking or applying; with `disjoint`, each group once, the
        first in order taken. Returns their groups a and b, the number of their pair in either
        order (what answers are kept by) and `why`, in order."""
        wide = self.wide
        a, b = np.divmod(pairs, wide)
        either = np.where(a < b, pairs, b * wide + a)
        get = self.legal.get
        refused = np.fromiter([get(x) is False for x in either.tolist()], dtype=bool, count=len(pairs))
        if refused.any():
            self._kill(pairs[refused])
            keep = ~refused
            pairs, a, b, either, why = pairs[keep], a[keep], b[keep], either[keep], why[keep]
        taken = self._matching(pairs, a, b, why) if disjoint else self._acyclic(pairs, a, b, why)
        return a[taken], b[taken], either[taken], why[taken]

    def _acyclic(self, pairs: np.ndarray, a: np.ndarray, b: np.ndarray, why: np.ndarray) -> np.ndarray:
        """The proposals whose merge keeps the groups acyclic (the others are dead)."""
        ok = np.ones(len(pairs), dtype=bool)
        hard = np.flatnonzero(why == 0)
        if len(hard):
            ok[hard] = self._acyclic_hard(a[hard], b[hard])
            self._kill(pairs[~ok])
        return np.flatnonzero(ok)

    def _acyclic_hard(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Whether merging a[i] and b[i] keeps the groups acyclic, for pairs not known to."""
        ok = ~self.groups.through_another(a, b)
        rest = np.flatnonzero(ok)
        can = self.groups.can_merge
        ok[rest] = [can(x, y) for x, y in zip(a[rest].tolist(), b[rest].tolist())]
        return ok

    def _matching(self, pairs: np.ndarray, a: np.ndarray, b: np.ndarray, why: np.ndarray) -> np.ndarray:
        """Each group in at most one proposal, in order: a proposal is taken unless an
        earlier taken one has one of its groups, or its merge would close a cycle (then it
        is dead). Whatever is first in order on both its groups among those undecided is
        taken (when acyclic), together with all others so, and whatever touches their groups
        dropped; after `MATCHING_ROUNDS` of that, the rest one by one (those that numpy shows
        would close a cycle, `through_another`, found so before the loop, the others searched)."""
        m, can = len(pairs), self.groups.can_merge
        taken = np.zeros(m, dtype=bool)
        earliest = np.full(self.wide, m, dtype=I64)
        used = np.zeros(self.wide, dtype=bool)
        left = np.arange(m, dtype=I64)
        for _ in range(MATCHING_ROUNDS):
            if not len(left):
                return np.flatnonzero(taken)
            la, lb = a[left], b[left]
            earliest[la] = m
            earliest[lb] = m
            np.minimum.at(earliest, la, left)
            np.minimum.at(earliest, lb, left)
            first = (earliest[la] == left) & (earliest[lb] == left)
            win = left[first]
            hard = win[why[win] == 0]
            if len(hard):
                cyclic = hard[~self._acyclic_hard(a[hard], b[hard])]
                if len(cyclic):
                    self._kill(pairs[cyclic])
                    win = win[~isin(win, cyclic)]
            taken[win] = True
            used[a[win]] = True
            used[b[win]] = True
            rest = left[~first]
            left = rest[~(used[a[rest]] | used[b[rest]])]
        seen = set(np.flatnonzero(used).tolist())
        # no merge is made before the round is settled: what numpy shows cyclic now is so in the loop
        hard = left[why[left] == 0]
        cyclic = set(hard[self.groups.through_another(a[hard], b[hard])].tolist())
        for i, x, y, w in zip(left.tolist(), a[left].tolist(), b[left].tolist(), why[left].tolist()):
            if x in seen or y in seen:
                continue
            if not w and (i in cyclic or not can(x, y)):
                self._kill(pairs[i:i + 1])
                continue
            taken[i] = True
            seen.add(x)
            seen.add(y)
        return np.flatnonzero(taken)

    def _kill(self, pairs: np.ndarray) -> None:
        if len(pairs):
            self._dead.append(pairs)

    def _alive(self, pairs: np.ndarray) -> np.ndarray:
        if not self._dead:
            return np.ones(len(pairs), dtype=bool)
        if len(self._dead) > 1:
            self._dead = [np.concatenate(self._dead)]
        return ~isin(pairs, self._dead[0])

    # -- proposals -------------------------------------------------------------------

    def vertical(self) -> tuple[np.ndarray, np.ndarray]:
        return self._edges(same_place=True)

    def cross_place(self) -> tuple[np.ndarray, np.ndarray]:
        return self._edges(same_place=False)

    def _edges(self, same_place: bool) -> tuple[np.ndarray, np.ndarray]:
        """A proposal for each live producer → consumer edge between groups (in or across
        places): a matmul's elementwise epilogue first, then in program order of the
        consumer's first statement, then of the producer's. Merging along an edge keeps the
        groups acyclic when the producer has no other consumer or the consumer no other
        producer (said beside each proposal, state.py's `why`, so that only the others are searched)."""
        g = self.groups
        pairs = g.edges()
        pa, pb = g.group_of[self.index.first_src], g.group_of[self.index.first_dst]
        apart = pa != pb
        epilogue = isin(pairs, pa[apart] * self.wide + pb[apart])  # proposed first (index.priority_pairs)
        a, b = np.divmod(pairs, self.wide)
        only_out = np.bincount(a, minlength=self.wide)[a] == 1
        only_in = np.bincount(b, minlength=self.wide)[b] == 1
        why = np.where(only_out, ONLY_CONSUMER, np.where(only_in, ONLY_PRODUCER, 0))
        keep = (g.place[a] == g.place[b]) == same_place
        keep &= self._alive(pairs)
        a, b, pairs, epilogue, why = a[keep], b[keep], pairs[keep], epilogue[keep], why[keep]
        order = np.lexsort((g.first[a], g.first[b], ~epilogue))
        return pairs[order], why[order]

    def horizontal(self) -> tuple[np.ndarray, np.ndarray]:
        """Groups that read the same tensor and share a place, in program order of the
        second group's first statement, then of the first's: for each tensor and place, every
        pair of its reader groups when they are at most `SIBLINGS_ALL_PAIRS`, else each with
        the next in program order."""
        g, wide = self.groups, self.wide
        if self._shared is None:  # (tensor, reader) rows of the tensors that two or more statements read
            sizes = [len(readers) for readers in self.index.shared]
            self._shared = (np.repeat(np.arange(len(sizes), dtype=I64), sizes),
                            np.fromiter(chain.from_iterable(self.index.shared), dtype=I64, count=sum(sizes)))
        tensor, reader = self._shared
        gid = g.group_of[reader]
        place, first = g.place[gid], g.first[gid]
        rows = np.lexsort((first, place, tensor))
        tensor, place, gid = tensor[rows], place[rows], gid[rows]
        keep = np.ones(len(rows), dtype=bool)
        keep[1:] = (tensor[1:] != tensor[:-1]) | (place[1:] != place[:-1]) | (gid[1:] != gid[:-1])
        tensor, place, gid = tensor[keep], place[keep], gid[keep]  # each group once per tensor and place
        start = np.flatnonzero(np.concatenate(([True], (tensor[1:] != tensor[:-1]) | (place[1:] != place[:-1]))))
        size = np.diff(np.append(start, len(gid)))
        found = []
        for k in range(2, SIBLINGS_ALL_PAIRS + 1):
            at = start[size == k]
            i, j = np.triu_indices(k, 1)
            found.append(gid[at[:, None] + i] * wide + gid[at[:, None] + j])
        big = np.repeat(size > SIBLINGS_ALL_PAIRS, size)
        nxt = np.flatnonzero(big[:-1] & big[1:] & np.isin(np.arange(1, len(gid)), start, invert=True))
        found.append(gid[nxt] * wide + gid[nxt + 1])
        pairs = distinct(np.concatenate([f.ravel() for f in found]))
        pairs = pairs[self._alive(pairs)]
        x, y = np.divmod(pairs, wide)
        return pairs[np.lexsort((g.first[x], g.first[y]))], np.zeros(len(pairs), dtype=I64)

    # -- asking and merging ----------------------------------------------------------

    def ask(self, a: np.ndarray, b: np.ndarray, either: np.ndarray, why: np.ndarray) -> None:
        """Ask the shim, in one batch, about every proposal it has not answered yet."""
        legal = self.legal
        fresh = np.flatnonzero(np.fromiter([x not in legal for x in either.tolist()], dtype=bool, count=len(either)))
        if not len(fresh):
            return
        fresh = fresh[np.sort(unique(either[fresh], return_index=True)[1])]  # each pair once
        names = [f"proposal{self._names + i}" for i in range(1, len(fresh) + 1)]
        self._names += len(fresh)
        answers = self.asker(names, *self.groups.rows(a[fresh], b[fresh]))
        self.stats.batches += 1
        self.stats.asked += len(fresh)
        legal.update(zip(either[fresh].tolist(), map(bool, answers)))
        self.stats.refused += len(fresh) - sum(answers)

    def settle(self, a: np.ndarray, b: np.ndarray, either: np.ndarray, why: np.ndarray, disjoint: bool) -> int:
        """Make the round's merges, in order: each that the shim allows, that pays (with a
        cost model) and keeps the groups acyclic, unless an earlier merge took one of its
        groups. Returns the merges made."""
        legal = self.legal
        ok = np.fromiter([legal[x] for x in either.tolist()], dtype=bool, count=len(either))
        pays, both = self._pays(a, b, ok)
        reached = np.ones(len(a), dtype=bool) if disjoint else self._reached(a, b, ok & pays)
        good = ok & pays & reached
        if (good & (why == 0)).any():
            return self._one_by_one(a, b, ok, pays, both)
        self.stats.costly += int((ok & ~pays & reached).sum())
        self._kill((a * self.wide + b)[reached & ~good])
        made = np.flatnonzero(good)
        if not len(made):
            return 0
        x, y = a[made], b[made]
        new = self.groups.merge_easy(x, y, why[made], self._places(x, y))
        if self.cost is not None:
            self.groups.seconds[new] = both[made]
        self.stats.merged += len(made)
        if self.progress is not None:
            self.progress.advance(len(made))
        return len(made)

    def _reached(self, a: np.ndarray, b: np.ndarray, merges: np.ndarray) -> np.ndarray:
        """Which proposals (in order, groups not disjoint) no earlier merge has taken a group of."""
        reached = np.zeros(len(a), dtype=bool)
        if not merges.any():
            reached[:] = True
            return reached
        used: set[int] = set()
        for i, x, y, merge in zip(range(len(a)), a.tolist(), b.tolist(), merges.tolist()):
            if x in used or y in used:
                continue
            reached[i] = True
            if merge:
                used.add(x)
                used.add(y)
        return reached

    def _one_by_one(self, a: np.ndarray, b: np.ndarray, ok: np.ndarray, pays: np.ndarray, both: np.ndarray) -> int:
        """The round's merges made one at a time on a `GroupGraph`, each checked for cycles
        after those before it."""
        g = self.groups
        graph = g.graph()
        used: set[int] = set()
        dead: list[int] = []
        made: list[int] = []  # the proposals merged, in order
        new: list[int] = []  # the group each made
        allowed = (ok & pays).tolist()
        for i, x, y in zip(range(len(a)), a.tolist(), b.tolist()):
            if x in used or y in used:
                continue
            if not allowed[i]:
                dead.append(i)
                continue
            merged = graph.try_merge(x, y)
            if merged is None:
                dead.append(i)
                continue
            made.append(i)
            new.append(merged)
            used.add(x)
            used.add(y)
            if self.progress is not None:
                self.progress.advance()
        g.read_back(graph)
        # the merged groups' first statement, place and estimate, all at once: each merge
        # took two groups of the round's start, which no merge before it had changed
        at, ids = np.array(made, dtype=I64), np.array(new, dtype=I64)
        g.first[ids] = np.minimum(g.first[a[at]], g.first[b[at]])
        g.place[ids] = self._places(a[at], b[at])
        g.seconds[ids] = both[at]
        self.stats.costly += int((ok & ~pays)[dead].sum())
        self._kill((a * self.wide + b)[dead])
        self.stats.merged += len(made)
        return len(made)

    def _pays(self, a: np.ndarray, b: np.ndarray, ok: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Whether the cost model lets each allowed merge be made (always, without one), and
        the merged group's estimate (NaN where not asked)."""
        pays = np.ones(len(a), dtype=bool)
        both = np.full(len(a), np.nan)
        cost = self.cost
        if cost is None or not ok.any():
            return pays, both
        g, at = self.groups, np.flatnonzero(ok)
        x, y = a[at], b[at]
        seconds = g.seconds
        apart = distinct(np.concatenate([x, y]))
        apart = apart[np.isnan(seconds[apart])]
        if len(apart):
            seconds[apart] = cost.seconds_of_groups(*g.rows(apart))
        owner, members = g.rows(x, y)
        order = np.lexsort((members, owner))
        merged = cost.seconds_of_groups(owner[order], members[order])
        both[at] = merged
        pays[at] = merged <= (seconds[x] + seconds[y]) * (1 + TIE)
        return pays, both

    def _places(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """The place code of each merged group a[i] + b[i]."""
        place = self.groups.place
        out = place[a].copy()
        for i in np.flatnonzero(out != place[b]).tolist():
            name = merged_place(self.place_names[out[i]], self.place_names[place[b[i]]])
            if name not in self.place_names:
                self.place_names.append(name)
            out[i] = self.place_names.index(name)
        return out

    def group_place(self, gid: int) -> str:
        return self.place_names[self.groups.place[gid]]


def merged_place(a: str, b: str) -> str:
    """The place of a merged group. Under the project's rules members always share a place;
    rules that allow more get the chip's place (a chip runs the fused op)."""
    if a == b:
        return a
    for place in (a, b):
        if place.startswith("chip:"):
            return place
    return a
