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

from collections.abc import Callable, Iterable
from typing import cast


def reached_before(succ: Callable[[int], Iterable[int]], pos, lo: int, hi: int) -> set[int] | None:
    """The groups that `succ` (a group's successors) reaches from `lo` before `hi`'s slot
    in `pos`, a topological order, not through the edge lo → hi; None when such a path
    reaches `hi` (merging the two would make a cycle)."""
    limit = pos[hi]
    return _bounded(succ, [s for s in succ(lo) if s != hi and pos[s] < limit], lambda y: pos[y] < limit, hi)


def _bounded(step: Callable[[int], Iterable[int]], start: list[int], inside: Callable[[int], bool],
             stop: int | None = None) -> set[int] | None:
    """The groups `step` (successors or predecessors) reaches from `start`, through groups
    that are `inside` only; None as soon as a step reaches `stop`."""
    stack, seen = start, set()
    while stack:
        x = stack.pop()
        if x in seen:
            continue
        seen.add(x)
        for y in step(x):
            if y == stop:
                return None
            if y not in seen and inside(y):
                stack.append(y)
    return seen


def path_between(succ: Callable[[int], Iterable[int]], pred: Callable[[int], Iterable[int]], pos,
                 lo: int, hi: int) -> bool:
    """Whether a path of two edges or more leads from `lo` to `hi` (`pos`: a topological
    order, lo's slot before hi's), so that merging them would make a cycle. It is searched
    from both ends at once, each side within the slots between the two, a step at a time
    on the side whose stack is shorter: where `lo` fans out to much of the program but
    little of it leads into `hi` (or the other way), the short side decides."""
    low, high = pos[lo], pos[hi]
    ahead = [s for s in succ(lo) if s != hi and pos[s] < high]  # reached from lo
    behind = [p for p in pred(hi) if p != lo and pos[p] > low]  # reaching hi
    seen_ahead, seen_behind = set(ahead), set(behind)
    if not ahead or not behind:
        return False
    if not seen_ahead.isdisjoint(seen_behind):
        return True
    while ahead and behind:
        if len(ahead) <= len(behind):
            for y in succ(ahead.pop()):
                if y == hi or y in seen_behind:
                    return True
                if pos[y] < high and y not in seen_ahead:
                    seen_ahead.add(y)
                    ahead.append(y)
        else:
            for y in pred(behind.pop()):
                if y == lo or y in seen_ahead:
                    return True
                if pos[y] > low and y not in seen_behind:
                    seen_behind.add(y)
                    behind.append(y)
    return False


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

    @classmethod
    def from_groups(cls, group_of: list[int], members: dict[int, list[int]], pos: dict[int, int], src: list[int],
                    dst: list[int], next_id: int) -> "GroupGraph":
        """Groups already formed (the planner's arrays, planner/state.py): statement k in
        group `group_of[k]`, each group's members and slot, `src[e]` → `dst[e]` the edges
        between groups; groups that merges make are numbered `next_id`, `next_id + 1`, ..."""
        gg = cls.__new__(cls)
        # statements numbered here where __init__ names them: the graph only looks them up
        gg.group_of, gg.members, gg.pos = cast(dict, group_of), cast(dict, members), pos
        gg.succ = {g: set() for g in members}
        gg.pred = {g: set() for g in members}
        succ, pred = gg.succ, gg.pred
        for a, b in zip(src, dst):
            succ[a].add(b)
            pred[b].add(a)
        gg._next = next_id
        return gg

    def __len__(self) -> int:
        return len(self.members)

    def groups(self) -> list[int]:
        """Every group, in topological order."""
        return sorted(self.members, key=self.pos.__getitem__)

    # -- acyclicity ------------------------------------------------------------------

    def _forward(self, lo: int, hi: int) -> set[int] | None:
        """Groups reachable from `lo` before `hi`'s slot, not through the edge lo → hi;
        None when such a path reaches `hi` (merging them would make a cycle)."""
        return reached_before(self.succ.__getitem__, self.pos, lo, hi)

    def _backward(self, lo: int, hi: int) -> set[int]:
        """Groups after `lo`'s slot from which `hi` is reached, not through lo."""
        pos, pred = self.pos, self.pred
        limit = pos[lo]
        found = _bounded(pred.__getitem__, [p for p in pred[hi] if p != lo and pos[p] > limit], lambda p: pos[p] > limit)
        return cast("set[int]", found)  # None only with a `stop`

    def ordered(self, a: int, b: int) -> tuple[int, int]:
        return (a, b) if self.pos[a] < self.pos[b] else (b, a)

    def can_merge(self, a: int, b: int) -> bool:
        """Whether merging keeps the graph of groups acyclic."""
        lo, hi = self.ordered(a, b)
        out, into = self.succ[lo], self.pred[hi]
        if len(out) <= 1 and out <= {hi} or len(into) <= 1 and into <= {lo}:  # no other way out of lo, or into hi
            return True
        return not path_between(self.succ.__getitem__, self.pred.__getitem__, self.pos, lo, hi)

    def merge(self, a: int, b: int) -> int:
        """Merge two groups (which `can_merge`) into a new group; returns its id."""
        new = self.try_merge(a, b)
        if new is None:
            raise ValueError(f"merging groups {a} and {b} would make a cycle")
        return new

    def try_merge(self, a: int, b: int) -> int | None:
        """Merge two groups into a new group and return its id; None (and no change) when
        the merge would make a cycle."""
        pos, succ, pred = self.pos, self.succ, self.pred
        lo, hi = (a, b) if pos[a] < pos[b] else (b, a)
        out, into = succ[lo], pred[hi]
        after = () if len(out) == 0 or len(out) == 1 and hi in out else self._forward(lo, hi)
        if after is None:
            return None
        before = () if len(into) == 0 or len(into) == 1 and lo in into else self._backward(lo, hi)
        new = self._next
        self._next += 1
        if before or after:
            # Reorder the affected slots: what reaches hi, then the merged group, then what
            # lo reaches. Everything else keeps its slot; one slot falls free.
            slots = sorted([pos[lo], pos[hi], *[pos[x] for x in before], *[pos[x] for x in after]])
            by_pos = pos.__getitem__
            for x, slot in zip(sorted(before, key=by_pos), slots):
                pos[x] = slot
            pos[new] = slots[len(before)]
            for x, slot in zip(sorted(after, key=by_pos), slots[len(slots) - len(after):]):
                pos[x] = slot
        else:
            pos[new] = pos[lo]
        members = self.members[new] = self.members.pop(lo) + self.members.pop(hi)
        group_of = self.group_of
        for o in members:
            group_of[o] = new
        out = succ.pop(lo)
        out |= succ.pop(hi)
        out.discard(lo)
        out.discard(hi)
        into = pred.pop(lo)
        into |= pred.pop(hi)
        into.discard(lo)
        into.discard(hi)
        succ[new], pred[new] = out, into
        for s in out:
            preds = pred[s]
            preds.discard(lo)
            preds.discard(hi)
            preds.add(new)
        for p in into:
            succs = succ[p]
            succs.discard(lo)
            succs.discard(hi)
            succs.add(new)
        del pos[lo], pos[hi]
        return new

    def is_acyclic(self) -> bool:
        """A full check (for tests): every edge goes forward in the slot order."""
        return all(self.pos[a] < self.pos[b] for a, bs in self.succ.items() for b in bs)
