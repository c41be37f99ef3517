"""Collective kernels (SPEC §3): each pattern the shim declares, proposed whole, asked of the
rules, and formed where the cost model says the overlap pays.

A fold's pairwise merges are never a pattern (all-gather + one matmul is refused
`collective_fold`), so the greedy passes cannot find one: before they run, each fold of a
declared pattern's kind is proposed with exactly the members its pattern holds
(rules/collective.dl), all in one batch. A kernel the rules allow is formed when

    max(transfer, compute) + one launch  <=  transfer + compute

(`Overlap`: the transfer is the collective's over the machine's link, the compute one
chip's share of the other members, as the cost model estimates them apart). Its group's
place is `collective`. Nothing here runs for a shim that declares no pattern.

>>> PATTERN["all_gather"], PATTERN["reduce_scatter"], PATTERN["all_reduce"]
('all_gather_matmul', 'matmul_reduce_scatter', 'all_reduce_norm')
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from ..ops import Ops
from .cost import TIE

PATTERN = {"all_gather": "all_gather_matmul", "reduce_scatter": "matmul_reduce_scatter",
           "all_reduce": "all_reduce_norm"}  # the collective's kind → the pattern its fold may head
COLLECTIVE = "collective"  # a collective kernel's place (SPEC §3)


@dataclass(frozen=True)
class Proposal:
    """A fold and the members its pattern holds (program order), as the program offers them."""

    fold: str
    pattern: str
    members: tuple[str, ...]


@dataclass(frozen=True)
class Overlap:
    """A collective kernel's time against its unfused pair's (seconds, one chip's share)."""

    pattern: str
    transfer: float  # the collective over the machine's link
    compute: float  # the other members, one chip's share, as the cost model estimates them apart
    launch: float  # the kernel's one launch

    @property
    def kernel(self) -> float:
        return max(self.transfer, self.compute) + self.launch

    @property
    def unfused(self) -> float:
        return self.transfer + self.compute

    @property
    def hidden(self) -> float:
        """Time the overlap hides: the shorter of transfer and compute."""
        return min(self.transfer, self.compute)

    @property
    def pays(self) -> bool:
        return self.kernel <= self.unfused * (1 + TIE)


class Relations:
    """What `proposals` reads of a program: the tuples of a relation whose column is any of
    some symbols (`matching_any`: a FactBase's, decoding only those) and whole small
    relations (`tuples`). `of_lists` makes one over relations given as lists (plan_graph's)."""

    def __init__(self, matching_any: Callable[[str, int, Iterable[str]], list[tuple]],
                 tuples: Callable[[str], Iterable[tuple]]):
        self.matching_any, self.tuples = matching_any, tuples

    @classmethod
    def of_facts(cls, facts) -> "Relations":
        return cls(facts.matching_any, facts.tuples)

    @classmethod
    def of_lists(cls, relations: dict[str, list[tuple]]) -> "Relations":
        def matching_any(rel: str, column: int, symbols: Iterable[str]) -> list[tuple]:
            wanted = set(symbols)
            return [t for t in relations.get(rel, ()) if t[column] in wanted]

        return cls(matching_any, lambda rel: relations.get(rel, ()))


def proposals(relations: Relations, places: dict[str, str], position: dict[str, int],
              patterns: Iterable[str]) -> list[Proposal]:
    """Each fold of a kind whose pattern is among `patterns`, with the members that pattern
    would hold (rules/collective.dl says whether they are exactly it), when it holds the
    statements its pattern needs beside the fold (a matmul, or a norm): `places` is each
    statement's place. Only the tuples around the folds are read."""
    wanted = set(patterns)
    kinds = dict(relations.tuples("collective"))
    folds = sorted(((o, PATTERN[kinds.get(c, "all_reduce")]) for o, c in relations.tuples("fold")
                    if PATTERN[kinds.get(c, "all_reduce")] in wanted), key=lambda f: position[f[0]])
    if not folds:
        return []
    writes = dict(relations.matching_any("writes", 0, [o for o, _ in folds]))
    operands: dict[str, dict[int, str]] = defaultdict(dict)
    for o, i, t in relations.matching_any("reads", 0, [o for o, _ in folds]):
        operands[o][int(i)] = t
    readers = _readers(relations, writes.values(), position)
    writer = {t: o for o, t in relations.matching_any("writes", 1, [t for ts in operands.values() for t in ts.values()])}
    cls = dict(relations.matching_any("op", 0, {*writer.values(), *(r for rs in readers.values() for r, _ in rs)}))
    adds = [r for rs in readers.values() for r, _ in rs if cls.get(r) == Ops.ADD and places.get(r) == "spine"]
    added = dict(relations.matching_any("writes", 0, adds)) if adds else {}
    after = _readers(relations, added.values(), position) if adds else {}
    cls.update(relations.matching_any("op", 0, {r for rs in after.values() for r, _ in rs}))

    def norm_reading(t: str, of: dict) -> str | None:
        return next((r for r, _ in of.get(t, ()) if cls.get(r) == Ops.RMSNORM and places.get(r) == "spine"), None)

    out = []
    for o, pattern in folds:
        y = writes.get(o)
        if y is None:
            continue
        members: list[str] = [o]
        if pattern == "all_gather_matmul":  # one matmul per chip reading the gathered tensor as operand 0
            per_chip: dict[str, str] = {}
            for r, i in readers.get(y, ()):
                if i == 0 and cls.get(r) == Ops.MATMUL and places.get(r, "").startswith("chip:"):
                    per_chip.setdefault(places[r], r)
            members += per_chip.values()
        elif pattern == "matmul_reduce_scatter":  # the matmul writing each partial, and the slices
            mms = [w for w in (writer.get(t) for _, t in sorted(operands[o].items()))
                   if w is not None and cls.get(w) == Ops.MATMUL]
            members += [*mms, *(r for r, i in readers.get(y, ()) if i == 0 and cls.get(r) == Ops.SLICE)] if mms else []
        else:  # the spine rmsnorm reading the sum, or reading the one spine add that reads it
            norm = norm_reading(y, readers)
            if norm is not None:
                members.append(norm)
            else:
                for a, _ in readers.get(y, ()):
                    norm = norm_reading(added[a], after) if a in added else None
                    if norm is not None:
                        members += [a, norm]
                        break
        if len(members) > 1:
            out.append(Proposal(o, pattern, tuple(sorted(dict.fromkeys(members), key=position.__getitem__))))
    return out


def _readers(relations: Relations, tensors: Iterable[str], position: dict[str, int]) -> dict[str, list[tuple[str, int]]]:
    """tensor → (statement, operand) of each read of it, in program order."""
    found: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for o, i, t in relations.matching_any("reads", 2, list(tensors)):
        found[t].append((o, int(i)))
    for rs in found.values():
        rs.sort(key=lambda r: (position[r[0]], r[1]))
    return found


def overlap(view, cost, pattern: str, members: Iterable[str]) -> Overlap:
    """The overlap of a collective kernel of `pattern` over `members` (`view`: the program,
    program/model.py; `cost`: a planner.cost.KernelCost on the machine asked)."""
    from .cost import transfers

    machine = cost.machine
    members = list(members)
    fold = next(o for o in members if view.statement(o).fold)
    moved = transfers(view, _Members(members), machine)
    per_chip: dict[str, float] = defaultdict(float)
    spine = 0.0
    for o in members:
        if o == fold:
            continue
        seconds = cost.seconds([o])
        place = view.places.get(o, "spine")
        if place.startswith("chip:"):
            per_chip[place] += seconds
        else:
            spine += seconds
    compute = spine + max(per_chip.values(), default=0.0)
    return Overlap(pattern, sum(m[-1] for m in moved), compute, machine.launch_s)


@dataclass(frozen=True)
class _Members:
    members: list[str]


def pattern_of(view, members: Iterable[str]) -> str | None:
    """The pattern of a planned `collective` group holding more than its fold (None for a
    fold alone): the pattern its fold's kind heads."""
    members = list(members)
    if len(members) < 2:
        return None
    folds = [o for o in members if view.statement(o).fold]
    if len(folds) != 1:
        return None
    return PATTERN.get(view.folds.get(folds[0], "all_reduce"))


def acyclic_as_one(members: list[int], succ: list[list[int]]) -> bool:
    """Whether statements `members` (positions, a topological order) can be one group: no
    path leaves them and comes back (searched only up to the last member's position)."""
    inside = set(members)
    last = max(members)
    seen: set[int] = set()
    stack = [d for m in members for d in succ[m] if d not in inside and d < last]
    while stack:
        x = stack.pop()
        if x in seen:
            continue
        seen.add(x)
        for d in succ[x]:
            if d in inside:
                return False
            if d < last and d not in seen:
                stack.append(d)
    return True


def form(index, ask, places: list[str], relations: Relations, patterns: Iterable[str], cost=None,
         view=None) -> list[list[int]]:
    """The collective kernels to form: each proposal the rules allow (`ask`, as the greedy
    passes ask), whose members can be one group, and whose overlap pays (every one without a
    cost model); as lists of statement positions, in program order."""
    names = index.names
    position = {o: k for k, o in enumerate(names)}
    found = proposals(relations, dict(zip(names, places)), position, patterns)
    if not found:
        return []
    owner = np.repeat(np.arange(len(found)), [len(p.members) for p in found])
    statements = np.array([position[o] for p in found for o in p.members], dtype=np.int64)
    allowed = ask([f"kernel{i}" for i in range(1, len(found) + 1)], owner, statements)
    if not any(allowed):
        return []
    succ: list[list[int]] = [[] for _ in names]
    for a, b in zip(index.src.tolist(), index.dst.tolist()):
        succ[a].append(b)
    out = []
    for p, ok in zip(found, allowed):
        if not ok:
            continue
        members = [position[o] for o in p.members]
        if not acyclic_as_one(members, succ):
            continue
        if cost is not None and view is not None and not overlap(view, cost, p.pattern, p.members).pays:
            continue
        out.append(members)
    return out
