"""The planner's cost model: a fusion is made only when it is estimated no slower than its parts.

Legality is the shim's alone (the rules); the cost model only chooses among the fusions
the shim allows. A group's cost is the estimated time of the one kernel it becomes:
the group is lowered as `run` would lower it (codegen/lowering/lower.py) and its kernel IR costed
for a kind of machine (codegen/cost.py: FLOPs, bytes moved, pointwise work counting
recomputation, launches). Merging groups A and B pays when

    seconds(A ∪ B) <= seconds(A) + seconds(B)

so a fusion that saves launches and memory traffic is made, and one whose kernel would
compute a fused value again more often than that saves (or, with our own matmul loops,
recompute a prologue inside the matmul) is not. Estimates are cached by the group's
shape: the same fusion on every chip and in every layer is lowered once.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..codegen.cost import MACHINES, Machine, estimate
from ..datalog.engine.keys import unique_sorted
from ..ops import Ops

TIE = 1e-9  # estimates this close are equal (the sums round differently); a tie merges, as without a model


class KernelCost:
    """Estimated seconds of a group of statements as one kernel on `machine`.

    `view` is the program (program/model.py `Program`): statements are its positions, and what a
    group's kernel depends on is read off its signatures; the statements of a group are
    made into objects only to lower the first group of each shape.
    """

    def __init__(self, view, machine: Machine | str):
        self.view = view
        self.machine = MACHINES[machine] if isinstance(machine, str) else machine
        self._by_shape: dict[tuple, float] = {}
        self._alone: dict[int, float] = {}  # a statement alone, by its `Signatures.alone`
        self._by_key: dict[bytes, float] = {}  # a group of two or more, by its planner/shapes.py key
        self._alone_ids: np.ndarray | None = None
        self.lowered = 0  # groups lowered (distinct shapes)

    def seconds(self, members: Iterable[str]) -> float:
        """The estimate of the statements named."""
        position = self.view.position
        return self.seconds_of(sorted({position[o] for o in members}))

    def pays(self, a: Iterable[str], b: Iterable[str]) -> bool:
        """Whether fusing groups `a` and `b` (statement names) is estimated no slower than running them apart."""
        return self.seconds([*a, *b]) <= (self.seconds(a) + self.seconds(b)) * (1 + TIE)

    def seconds_of(self, members: list[int]) -> float:
        """The estimate of a group of statements (their positions, in order)."""
        if len(members) == 1:
            alone = self.view.signatures.alone[members[0]]
            cost = self._alone.get(alone)
            if cost is None:
                cost = self._alone[alone] = self._estimate(members)
            return cost
        key = self._shape_key(members)
        cost = self._by_shape.get(key)
        if cost is None:
            cost = self._by_shape[key] = self._estimate(members)
        return cost

    def seconds_of_groups(self, owner: np.ndarray, members: np.ndarray) -> np.ndarray:
        """`seconds_of` of many groups at once: rows (group 0, 1, ..., statement position)
        sorted by group, then by statement. A statement alone is looked up by its
        `Signatures.alone`, a larger group by its planner/shapes.py key, both found with
        numpy; a group is lowered (and its `_shape_key` made) only for a key not seen before."""
        from .shapes import shape_keys

        count = int(owner[-1]) + 1 if len(owner) else 0
        start = np.searchsorted(owner, np.arange(count + 1))
        size = np.diff(start)
        out = np.empty(count)
        one = size == 1
        if one.any():
            out[one] = self._seconds_alone(members[start[:-1][one]])
        many = np.flatnonzero(~one)
        if len(many):
            rows = ~one[owner]
            keys = shape_keys(self.view, (np.cumsum(~one) - 1)[owner[rows]], members[rows])
            flat, bounds = members.tolist(), start.tolist()
            by_key = self._by_key
            for i, key in zip(many.tolist(), keys):
                found = by_key.get(key)
                if found is None:
                    found = by_key[key] = self.seconds_of(flat[bounds[i]:bounds[i + 1]])
                out[i] = found
        return out

    def _seconds_alone(self, statements: np.ndarray) -> np.ndarray:
        if self._alone_ids is None:
            self._alone_ids = np.array(self.view.signatures.alone, dtype=np.int64)
        alone = self._alone_ids[statements]
        kinds, first, back = unique_sorted(alone)
        found = [self.seconds_of([k]) for k in statements[first].tolist()]
        return np.array(found, dtype=float)[back]

    def _estimate(self, members: list[int]) -> float:
        from ..codegen.lowering.lower import lower
        from .plan import Group

        names = self.view.names
        kernel = lower(Group("cost", tuple(names[k] for k in members), "chip:0"), self.view)
        self.lowered += 1
        return self.machine.seconds(estimate(kernel, self.machine))

    def _shape_key(self, members: list[int]) -> tuple:
        """What the group's kernel depends on, without names: each member's signature (class,
        attributes, quantized reads, fold, output shape and dtype), where each operand comes
        from (a member, by position, or outside: by order of first read, with its shape and
        dtype) and whether its output is read outside the group."""
        sig = self.view.signatures
        writes, reads, readers, statement, tensor = sig.writes, sig.reads, sig.readers, sig.statement, sig.tensor
        index = {writes[k]: i for i, k in enumerate(members)}
        inside = set(members)
        outside: dict[int, int] = {}
        key = []
        for k in members:
            # a member's output by its index i >= 0; an input j (with its shape's id s) as -1 - j - s * 2**32
            operands = tuple([index[t] if t in index else -1 - outside.setdefault(t, len(outside)) - (tensor[t] << 32)
                              for t in reads[k]])
            out = readers[writes[k]]
            key.append((statement[k], operands, not out or not inside.issuperset(out)))
        return tuple(key)


def transfers(prog, group, machine: Machine) -> list[tuple[str, float, int, float, float]]:
    """(kind, whole bytes, chips, bytes into one chip, seconds) of each fold of a collective
    group: what its all-reduce, all-gather or reduce-scatter moves between chips over the machine's link.
    Planning reads it only for a collective kernel's overlap (planner/kernels.py)."""
    out = []
    kinds = dict(prog.facts.tuples("collective"))
    collective = dict(prog.facts.tuples("fold")) if any(prog.statement(o).fold for o in group.members) else {}
    for o in group.members:
        s = prog.statement(o)
        if not s.fold:
            continue
        kind = "all_gather" if s.cls == Ops.CAT else "all_reduce"  # SPEC §2: a gather's fold is a cat
        if kinds.get(collective.get(o, "")) == "reduce_scatter":  # a sum read by one slice per chip (SPEC §1)
            kind = "reduce_scatter"
        t = prog.tensors[s.writes]
        whole = float(t.size * t.storage.itemsize)
        moved, seconds = machine.link.collective(kind, whole, len(s.reads))
        out.append((kind, whole, len(s.reads), moved, seconds))
    return out


def _size(n: float) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"
