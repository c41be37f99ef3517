"""Groups of statements and the data flow between them, kept acyclic while they merge.

The planner merges two groups only when the graph of groups stays acyclic: no path may
lead from one to the other through a third group. (The rules' `cycle` reason looks at one
fusion against statements; two fusions can still feed each other, which only the graph
of groups shows.)

Each group holds a slot in a topological order of the groups. Whether a path runs from
`a` to `b` is then a search bounded by `b`'s slot, and a merge reorders only the groups
between the two slots (Pearce and Kelly's dynamic topological order), so neither costs
time proportional to the program.

>>> gg = GroupGraph(["a", "b", "c"], {"a": ["b", "c"], "b": ["c"]})
>>> gg.can_merge(gg.group_of["a"], gg.group_of["c"])  # a → b → c: merging a and c would cycle
False
>>> m = gg.merge(gg.group_of["a"], gg.group_of["b"])
>>> gg.members[m], gg.can_merge(m, gg.group_of["c"])
(['a', 'b'], True)
"""

from __future__ import annotations

from collections.abc import Iterable


class GroupGraph:
    def __init__(self, order: list[str], flows: dict[str, Iterable[str]]):
        """`order`: the statements in a topological order; `flows`: statement → statements reading what it writes."""
        self.group_of: dict[str, int] = {o: i for i, o in enumerate(order)}
        self.members: dict[int, list[str]] = {i: [o] for i, o in enumerate(order)}
        self.pos: dict[int, int] = {i: i for i in range(len(order))}
        self.succ: dict[int, set[int]] = {i: set() for i in range(len(order))}
        self.pred: dict[int, set[int]] = {i: set() for i in range(len(order))}
        for o, readers in flows.items():
            a = self.group_of[o]
            for r in readers:
                b = self.group_of[r]
                if a != b:
                    self.succ[a].add(b)
                    self.pred[b].add(a)
        self._next = len(order)

    def __len__(self) -> int:
        return len(self.members)

    def groups(self) -> list[int]:
        """Every group, in topological order."""
        return sorted(self.members, key=self.pos.__getitem__)

    # -- acyclicity ------------------------------------------------------------------

    def _forward(self, lo: int, hi: int) -> set[int] | None:
        """Groups reachable from `lo` before `hi`'s slot, not through the edge lo → hi;
        None when such a path reaches `hi` (merging them would make a cycle)."""
        limit = self.pos[hi]
        seen: set[int] = set()
        stack = [s for s in self.succ[lo] if s != hi]
        while stack:
            x = stack.pop()
            if x == hi:
                return None
            if x in seen or self.pos[x] > limit:
                continue
            seen.add(x)
            stack.extend(self.succ[x])
        return seen

    def _backward(self, lo: int, hi: int) -> set[int]:
        """Groups after `lo`'s slot from which `hi` is reached, not through lo."""
        limit = self.pos[lo]
        seen: set[int] = set()
        stack = [p for p in self.pred[hi] if p != lo]
        while stack:
            x = stack.pop()
            if x in seen or self.pos[x] < limit:
                continue
            seen.add(x)
            stack.extend(self.pred[x])
        return seen

    def ordered(self, a: int, b: int) -> tuple[int, int]:
        return (a, b) if self.pos[a] < self.pos[b] else (b, a)

    def can_merge(self, a: int, b: int) -> bool:
        """Whether merging keeps the graph of groups acyclic."""
        lo, hi = self.ordered(a, b)
        return self._forward(lo, hi) is not None

    def merge(self, a: int, b: int) -> int:
        """Merge two groups (which `can_merge`) into a new group; returns its id."""
        new = self.try_merge(a, b)
        if new is None:
            raise ValueError(f"merging groups {a} and {b} would make a cycle")
        return new

    def try_merge(self, a: int, b: int) -> int | None:
        """Merge two groups into a new group and return its id; None (and no change) when
        the merge would make a cycle."""
        lo, hi = self.ordered(a, b)
        after = self._forward(lo, hi)
        if after is None:
            return None
        before = self._backward(lo, hi)
        # Reorder the affected slots: what reaches hi, then the merged group, then what lo
        # reaches. Everything else keeps its slot; one slot falls free.
        slots = sorted([self.pos[lo], self.pos[hi]] + [self.pos[x] for x in before | after])
        by_pos = self.pos.__getitem__
        new = self._next
        self._next += 1
        for x, slot in zip(sorted(before, key=by_pos), slots):
            self.pos[x] = slot
        self.pos[new] = slots[len(before)]
        for x, slot in zip(sorted(after, key=by_pos), slots[len(slots) - len(after):]):
            self.pos[x] = slot
        self.members[new] = self.members.pop(lo) + self.members.pop(hi)
        for o in self.members[new]:
            self.group_of[o] = new
        succ = (self.succ.pop(lo) | self.succ.pop(hi)) - {lo, hi}
        pred = (self.pred.pop(lo) | self.pred.pop(hi)) - {lo, hi}
        self.succ[new], self.pred[new] = succ, pred
        for s in succ:
            self.pred[s] -= {lo, hi}
            self.pred[s].add(new)
        for p in pred:
            self.succ[p] -= {lo, hi}
            self.succ[p].add(new)
        del self.pos[lo], self.pos[hi]
        return new

    def is_acyclic(self) -> bool:
        """A full check (for tests): every edge goes forward in the slot order."""
        return all(self.pos[a] < self.pos[b] for a, bs in self.succ.items() for b in bs)
