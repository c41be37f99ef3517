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
(a statement k starts as group k; a merge makes a new id), and a round's proposals are
found and put in priority order with numpy over the data flow's edges; only choosing,
asking and merging walk them one by one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..engine.keys import unique_sorted
from ..program.columns import isin
from .cost import TIE
from .groups import GroupGraph
from .index import PlanIndex

SIBLINGS_ALL_PAIRS = 8  # readers of one tensor up to which every pair is proposed; beyond, neighbours only
I64 = np.int64

# (proposals' names, their members: statement positions) → whether each is allowed
Asker = Callable[[list[str], list[list[int]]], list[bool]]


@dataclass
class Stats:
    """What the planner did, for `--show=plan`."""

    rounds: int = 0
    asked: int = 0
    batches: int = 0
    merged: int = 0
    refused: int = 0
    costly: int = 0  # allowed by the shim, not made: estimated slower than the parts
    by_pass: dict[str, int] = field(default_factory=dict)


class Greedy:
    """One planning run: groups start as single statements and merge as the shim allows.

    `ask` answers a batch of proposals; `places` is each statement's place (`chip:K`,
    `spine`, `collective`, or "" for none); `cost` (a planner.cost.KernelCost) turns down
    merges estimated slower than their parts; `progress` counts the merges.
    """

    def __init__(self, index: PlanIndex, ask: Asker, places: list[str], across_places: bool = True, cost=None,
                 progress=None):
        n = len(index)
        self.index, self.asker, self.cost, self.progress = index, ask, cost, progress
        self.across_places = across_places
        self.names = index.names
        self.groups = GroupGraph.from_edges(n, index.src.tolist(), index.dst.tolist())
        self.wide = 2 * n + 1  # group ids are below this: a pair (a, b) is the number a * wide + b
        self.first: list[int] = list(range(n))  # by group id: its first statement
        self.place_names: list[str] = list(dict.fromkeys(places))
        code = {p: i for i, p in enumerate(self.place_names)}
        self.place: list[int] = [code[p] for p in places]  # by group id
        self.legal: dict[int, bool] = {}  # every answer, by the pair of groups (the lower id first)
        self.seconds: dict[int, float] = {}  # the cost model's estimate of a group, by id
        # Pairs never to propose again: refused (a group's members never change) or cyclic
        # (merging only adds paths between other groups).
        self.dead: set[int] = set()
        self.stats = Stats()
        self._names = 0

    # -- the passes ------------------------------------------------------------------

    def run(self) -> GroupGraph:
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

    def run_pass(self, propose, disjoint: bool) -> int:
        """Rounds of one kind of proposal until a round has none left to ask or apply; returns the merges."""
        merged = 0
        while True:
            chosen = self.choose(*propose(), disjoint)
            if not chosen:
                return merged
            self.stats.rounds += 1
            self.ask(chosen)
            used: set[int] = set()
            legal, dead, wide, pays, apply = self.legal, self.dead, self.wide, self.pays, self.apply
            for a, b, pair in chosen:
                if a in used or b in used:
                    continue
                if not legal[pair] or not pays(a, b) or not apply(a, b):
                    dead.add(a * wide + b)
                    continue
                used.add(a)
                used.add(b)
                merged += 1
                if self.progress is not None:
                    self.progress.advance()

    def choose(self, pairs: np.ndarray, acyclic: np.ndarray, disjoint: bool) -> list[tuple[int, int, int]]:
        """Proposals (pair numbers, best first; `acyclic`: known to keep the groups acyclic)
        worth asking or applying; with `disjoint`, each group once. Each comes with the
        number of its pair in either order (what answers are kept by)."""
        chosen, used = [], set()
        legal, dead, wide = self.legal, self.dead, self.wide
        can_merge = self.groups.can_merge
        for pair, easy in zip(pairs.tolist(), acyclic.tolist()):
            a, b = divmod(pair, wide)
            if disjoint and (a in used or b in used):
                continue
            either = a * wide + b if a < b else b * wide + a
            if legal.get(either) is False or not (easy or can_merge(a, b)):
                dead.add(pair)
                continue
            chosen.append((a, b, either))
            used.add(a)
            used.add(b)
        return chosen

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
        producer (said beside each proposal, so that only the others are searched)."""
        group = np.asarray(self.groups.group_of, dtype=I64)
        a, b = group[self.index.src], group[self.index.dst]
        between = a != b
        pairs = unique_sorted(a[between] * self.wide + b[between])[0]
        pa, pb = group[self.index.first_src], group[self.index.first_dst]
        apart = pa != pb
        epilogue = isin(pairs, pa[apart] * self.wide + pb[apart])  # proposed first (index.priority_pairs)
        a, b = np.divmod(pairs, self.wide)
        acyclic = (np.bincount(a, minlength=self.wide)[a] == 1) | (np.bincount(b, minlength=self.wide)[b] == 1)
        place = np.asarray(self.place, dtype=I64)
        keep = (place[a] == place[b]) == same_place
        keep &= self._alive(pairs)
        a, b, pairs, epilogue, acyclic = a[keep], b[keep], pairs[keep], epilogue[keep], acyclic[keep]
        first = np.asarray(self.first, dtype=I64)
        order = np.lexsort((first[a], first[b], ~epilogue))
        return pairs[order], acyclic[order]

    def _alive(self, pairs: np.ndarray) -> np.ndarray:
        if not self.dead:
            return np.ones(len(pairs), dtype=bool)
        return ~isin(pairs, np.fromiter(self.dead, dtype=I64, count=len(self.dead)))

    def horizontal(self) -> tuple[np.ndarray, np.ndarray]:
        """Groups that read the same tensor and share a place, in program order of the
        second group's first statement, then of the first's."""
        group_of, place, first, wide = self.groups.group_of, self.place, self.first, self.wide
        found: set[int] = set()
        for readers in self.index.shared:
            by_place: dict[int, list[int]] = {}
            for o in readers:
                gid = group_of[o]
                siblings = by_place.setdefault(place[gid], [])
                if gid not in siblings:
                    siblings.append(gid)
            for siblings in by_place.values():
                if len(siblings) < 2:
                    continue
                siblings.sort(key=first.__getitem__)
                if len(siblings) <= SIBLINGS_ALL_PAIRS:
                    found.update(x * wide + y for i, x in enumerate(siblings) for y in siblings[i + 1:])
                else:
                    found.update(x * wide + y for x, y in zip(siblings, siblings[1:]))
        pairs = np.fromiter(found, dtype=I64, count=len(found))
        pairs = pairs[self._alive(pairs)]
        x, y = np.divmod(pairs, wide)
        firsts = np.asarray(first, dtype=I64)
        return pairs[np.lexsort((firsts[x], firsts[y]))], np.zeros(len(pairs), dtype=bool)

    # -- asking and merging ----------------------------------------------------------

    def ask(self, chosen: list[tuple[int, int, int]]) -> None:
        """Ask the shim, in one batch, about every proposal it has not answered yet."""
        legal, members = self.legal, self.groups.members
        fresh: dict[int, list[int]] = {}
        for a, b, either in chosen:
            if either not in legal and either not in fresh:
                fresh[either] = members[a] + members[b]
        if not fresh:
            return
        names = [f"proposal{self._names + i}" for i in range(1, len(fresh) + 1)]
        self._names += len(fresh)
        answers = self.asker(names, list(fresh.values()))
        self.stats.batches += 1
        self.stats.asked += len(fresh)
        legal.update(zip(fresh, answers))
        self.stats.refused += len(fresh) - sum(answers)

    def pays(self, a: int, b: int) -> bool:
        """Whether the cost model lets an allowed merge be made (always, without one)."""
        cost = self.cost
        if cost is None:
            return True
        members, seconds = self.groups.members, self.seconds
        apart = seconds.get(a)
        if apart is None:
            apart = seconds[a] = cost.seconds_of(sorted(members[a]))
        other = seconds.get(b)
        if other is None:
            other = seconds[b] = cost.seconds_of(sorted(members[b]))
        both = cost.seconds_of(sorted(members[a] + members[b]))
        if both <= (apart + other) * (1 + TIE):
            self._merged_seconds = both
            return True
        self.stats.costly += 1
        return False

    def apply(self, a: int, b: int) -> bool:
        """Merge the proposal's groups unless that would make the graph of groups cyclic."""
        new = self.groups.try_merge(a, b)
        if new is None:
            return False
        if self.cost is not None:
            self.seconds[new] = self._merged_seconds
        first, place = self.first, self.place
        first.append(min(first[a], first[b]))
        place.append(place[a] if place[a] == place[b] else self._merged_place(place[a], place[b]))
        self.stats.merged += 1
        return True

    def _merged_place(self, a: int, b: int) -> int:
        name = merged_place(self.place_names[a], self.place_names[b])
        if name not in self.place_names:
            self.place_names.append(name)
        return self.place_names.index(name)

    def group_place(self, gid: int) -> str:
        return self.place_names[self.place[gid]]


def merged_place(a: str, b: str) -> str:
    """The place of a merged group. Under the project's rules members always share a place;
    rules that allow more get the chip's place (a chip runs the fused op)."""
    if a == b:
        return a
    for place in (a, b):
        if place.startswith("chip:"):
            return place
    return a
