"""Greedy fusion that asks the shim before every merge, in rounds of batched questions.

A *proposal* merges two groups: a producer group into its consumer group (vertical), or
two groups that read the same tensor and share a place (horizontal). Each round picks
proposals in priority order, each group in at most one of them, asks the shim about all
of them in one batch (`fits_all`), and applies those the shim allows while the graph of
groups stays acyclic. Passes run until a round proposes nothing:

1. vertical, producer and consumer in the same place; a matmul's elementwise epilogue (also
   through views of its result) and attention's chain (a bmm, the work on its result, the
   bmm that reads it) first;
2. horizontal, siblings in the same place;
3. vertical across places, asked all at once (under the project's rules they are all
   refused; the rules decide that, not the planner, so a rule edit can change it).

With a cost model (planner/cost.py), a merge the shim allows is made only when its
kernel is estimated no slower than the two groups' kernels apart.

Every answer is remembered by member set, so no fused op is asked about twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from .. import ops
from ..ops import Ops
from ..shim.graph import FusedOp, TensorGraph
from ..shim.protocol import fits_all
from .groups import GroupGraph

SIBLINGS_ALL_PAIRS = 8  # readers of one tensor up to which every pair is proposed; beyond, neighbours only


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


class Proposal(NamedTuple):
    """Merge groups `a` and `b`; lower `priority` first."""

    priority: tuple
    a: int
    b: int


class Greedy:
    """One planning run over a graph: groups start as single statements and merge as the shim allows."""

    def __init__(self, g: TensorGraph, shim, places: dict[str, str], kinds: dict[str, str],
                 across_places: bool = True, cost=None, progress=None):
        self.g, self.shim, self.places = g, shim, places
        self.progress = progress  # a tprules.progress.Progress: one step per merge
        self.cost = cost  # a KernelCost, or None: every allowed merge is made
        self.across_places = across_places
        self.order = g.order()
        self.position = g.position
        self.flows = g.flows()
        self.groups = GroupGraph(self.order, self.flows)
        kind = {o: kinds.get(g.op(o).cls) for o in self.order}
        # matmul → its elementwise consumers, through views: the epilogues the planner fuses first
        cls = {o: g.op(o).cls for o in self.order}
        self.epilogues = {o: epilogue_of(o, self.flows, kind, cls) for o in self.order if kind[o] == Ops.MATMUL}
        self.chain_edges = attention_chain_edges(self.order, self.flows, kind, cls)
        self.legal: dict[frozenset, bool] = {}  # every answer, by member set
        # Pairs never to propose again: refused (answers are by member set, and a group's
        # members never change) or cyclic (merging only adds paths between other groups).
        self.dead: set[tuple[int, int]] = set()
        self.first: dict[int, int] = {i: i for i in range(len(self.order))}  # group → its first statement's position
        self.place: dict[int, str] = {i: places.get(o, "") for i, o in enumerate(self.order)}
        self.stats = Stats()
        self._names = 0
        self._keys: dict[tuple[int, int], frozenset] = {}  # group ids never change members: cache by pair
        self._vertical_priority: dict[tuple[int, int], tuple] = {}
        # statements reading each tensor that more than one statement reads (horizontal candidates)
        self.shared_reads = [[op.name for op in readers] for readers in
                             (g.consumers(t.name) for t in g.tensors) if len(readers) > 1]

    # -- the passes ------------------------------------------------------------------

    def run(self) -> GroupGraph:
        if self.progress is not None:
            self.progress.phase("plan: merges", max(len(self.order) - 1, 1))
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
            chosen = self.choose(propose(), disjoint)
            if not chosen:
                return merged
            self.stats.rounds += 1
            self.ask(chosen)
            used: set[int] = set()
            for p in chosen:
                if p.a in used or p.b in used:
                    continue
                if not self.legal[self.key(p)] or not self.pays(p) or not self.apply(p):
                    self.dead.add((p.a, p.b))
                    continue
                used.update((p.a, p.b))
                merged += 1
                if self.progress is not None:
                    self.progress.advance()

    def choose(self, proposals: list[Proposal], disjoint: bool) -> list[Proposal]:
        """Proposals worth asking or applying, best first; with `disjoint`, each group once."""
        chosen, used = [], set()
        for p in sorted(proposals):
            if disjoint and (p.a in used or p.b in used):
                continue
            if self.legal.get(self.key(p)) is False or not self.groups.can_merge(p.a, p.b):
                self.dead.add((p.a, p.b))
                continue
            chosen.append(p)
            used.update((p.a, p.b))
        return chosen

    # -- proposals -------------------------------------------------------------------

    def vertical(self) -> list[Proposal]:
        return self._edges(same_place=True)

    def cross_place(self) -> list[Proposal]:
        return self._edges(same_place=False)

    def _edges(self, same_place: bool) -> list[Proposal]:
        """A proposal for each live producer → consumer edge between groups (in or across places)."""
        place, dead, out = self.place, self.dead, []
        for a, consumers in self.groups.succ.items():
            here = place[a]
            for b in consumers:
                if (place[b] == here) == same_place and (a, b) not in dead:
                    out.append(self._vertical(a, b))
        return out

    def _vertical(self, a: int, b: int) -> Proposal:
        """Producer group `a` into consumer group `b`; a matmul's elementwise epilogue first,
        then in topological order of the consumer."""
        priority = self._vertical_priority.get((a, b))
        if priority is None:
            priority = (0 if self._epilogue(a, b) or self._chain(a, b) else 1, self.first[b], self.first[a])
            self._vertical_priority[(a, b)] = priority
        return Proposal(priority, a, b)

    def _epilogue(self, a: int, b: int) -> bool:
        """Whether group b holds an elementwise consumer of a matmul of group a (or a view on the way to one)."""
        group_of, epilogues = self.groups.group_of, self.epilogues
        return any(group_of[c] == b for o in self.groups.members[a] for c in epilogues.get(o, ()))

    def _chain(self, a: int, b: int) -> bool:
        """Whether group b holds the next statement of attention's chain after one of group a."""
        group_of, edges = self.groups.group_of, self.chain_edges
        return any(group_of[c] == b for o in self.groups.members[a] for c in edges.get(o, ()))

    def horizontal(self) -> list[Proposal]:
        """Groups that read the same tensor and share a place, neither feeding the other."""
        group_of = self.groups.group_of
        out = []
        for readers in self.shared_reads:
            by_place: dict[str, list[int]] = {}
            for o in readers:
                gid = group_of[o]
                siblings = by_place.setdefault(self.place[gid], [])
                if gid not in siblings:
                    siblings.append(gid)
            for siblings in by_place.values():
                siblings.sort(key=self.first.__getitem__)
                if len(siblings) <= SIBLINGS_ALL_PAIRS:
                    pairs = [(x, y) for i, x in enumerate(siblings) for y in siblings[i + 1:]]
                else:
                    pairs = list(zip(siblings, siblings[1:]))
                out.extend(Proposal((2, self.first[y], self.first[x]), x, y) for x, y in pairs
                           if (x, y) not in self.dead)
        return out

    # -- asking and merging ----------------------------------------------------------

    def key(self, p: Proposal) -> frozenset:
        """The member set of a proposal: what the shim's answer is remembered by."""
        pair = (p.a, p.b)
        key = self._keys.get(pair)
        if key is None:
            key = self._keys[pair] = frozenset(self.groups.members[p.a]).union(self.groups.members[p.b])
        return key

    def ask(self, proposals: list[Proposal]) -> None:
        """Ask the shim, in one batch, about every proposal it has not answered yet."""
        fresh: dict[frozenset, FusedOp] = {}
        for p in proposals:
            key = self.key(p)
            if key not in self.legal and key not in fresh:
                self._names += 1
                members = tuple(self.g.op(o) for o in sorted(key, key=self.position.__getitem__))
                fresh[key] = FusedOp(f"proposal{self._names}", members)
        if not fresh:
            return
        answers = fits_all(self.shim, list(fresh.values()), self.g)
        self.stats.batches += 1
        self.stats.asked += len(fresh)
        for key, op in fresh.items():
            ok = answers[op.name].ok
            self.legal[key] = ok
            self.stats.refused += not ok

    def pays(self, p: Proposal) -> bool:
        """Whether the cost model lets an allowed merge be made (always, without one)."""
        if self.cost is None or self.cost.pays(self.groups.members[p.a], self.groups.members[p.b]):
            return True
        self.stats.costly += 1
        return False

    def apply(self, p: Proposal) -> bool:
        """Merge the proposal's groups unless that would make the graph of groups cyclic."""
        new = self.groups.try_merge(p.a, p.b)
        if new is None:
            return False
        self.first[new] = min(self.first.pop(p.a), self.first.pop(p.b))
        place_a, place_b = self.place.pop(p.a), self.place.pop(p.b)
        self.place[new] = merged_place(place_a, place_b)
        self.stats.merged += 1
        return True


def merged_place(a: str, b: str) -> str:
    """The place of a merged group. Under the project's rules members always share a place;
    rules that allow more get the chip's place (a chip runs the fused op)."""
    if a == b:
        return a
    for place in (a, b):
        if place.startswith("chip:"):
            return place
    return a


def epilogue_of(o: str, flows: dict[str, list[str]], kind: dict[str, str | None], cls: dict[str, str]) -> list[str]:
    """The elementwise consumers of matmul `o`, and those of the views (reshapes, permutes,
    ...) of its result with the views on the way: an imported model reshapes a projection's
    result before its activation."""

    def reach(c: str) -> list[str]:
        if kind[c] == "elementwise":
            return [c]
        if cls[c] not in ops.VIEWS:
            return []
        after = [x for d in flows.get(c, ()) for x in reach(d)]
        return [c, *after] if after else []

    return list(dict.fromkeys(x for c in flows.get(o, ()) for x in reach(c)))


PASSES = ("elementwise", "layout", "row")  # kinds between attention's two products


def attention_chain_edges(order: list[str], flows: dict[str, list[str]], kind: dict[str, str | None],
                          cls: dict[str, str]) -> dict[str, list[str]]:
    """Attention's chain: each statement on a data path from a bmm to a bmm through
    elementwise, layout and row statements only (QKᵀ → scale → mask → softmax → ·V), with the
    next statements of such paths. A group holding the whole chain runs it per head and tile
    (codegen/attention.py), so the planner merges along it before it merges elsewhere."""
    bmm = {o for o in order if cls[o] == Ops.BMM}
    after = set()  # reached from a bmm through the passable kinds
    for o in order:
        if o in bmm or o in after:
            after.update(c for c in flows.get(o, ()) if kind[c] in PASSES)
    before = set()  # reaching a bmm through them
    for o in reversed(order):
        if kind[o] in PASSES and any(c in bmm or c in before for c in flows.get(o, ())):
            before.add(o)
    inner = after & before
    return {o: [c for c in flows.get(o, ()) if c in inner or (c in bmm and o in inner)]
            for o in order if o in bmm or o in inner}
