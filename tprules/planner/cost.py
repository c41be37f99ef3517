"""The planner's cost model: a fusion is made only when it is estimated no slower than its parts.

Legality is the shim's alone (the rules); the cost model only chooses among the fusions
the shim allows. A group's cost is the estimated time of the one kernel it becomes:
the group is lowered as `run` would lower it (codegen/lower.py) and its kernel IR costed
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
        from ..codegen.lower import lower
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


def cost_lines(prog, plan, machine: Machine | str) -> list[str]:
    """`plan --show cost`: each group's estimate on `machine` and what it is made of, so that a
    fusion's cost can be read: matmul FLOPs, bytes moved, the matmul operands that are views of
    a buffer (layouts that cost nothing) and the bytes of those computed into a buffer first."""
    from ..codegen.cost import Estimate, estimate
    from ..codegen.lower import lower
    from .kernels import pattern_of

    m = MACHINES[machine] if isinstance(machine, str) else machine
    lines, total, linked = [], 0.0, 0.0
    apart = None  # the members' estimates, made on the first collective kernel
    for g in plan.groups:
        pattern = pattern_of(prog, g.members) if g.place == "collective" else None
        if pattern is not None:  # a collective kernel: its overlap, from its members costed apart
            line, seconds = _kernel_line(prog, g, pattern, apart := apart or KernelCost(prog, m))
            total += seconds
            lines.append(line)
            continue
        kernel = lower(g, prog)
        e = estimate(kernel, m)
        moves = transfers(prog, g, m)
        if [kind for kind, *_ in moves] == ["reduce_scatter"] and len(g.members) == 1:  # chip k adds block k only
            e = Estimate(e.flops / prog.chips, e.bytes / prog.chips, e.ops / prog.chips, e.transcendental / prog.chips,
                         e.launches, e.views, e.copied / prog.chips)
        seconds = m.seconds(e)
        total += seconds
        parts = [f"{e.flops / 1e6:.1f} MFLOP" if e.flops else "", f"{_size(e.bytes)} moved",
                 f"{e.views} operand{'s' * (e.views != 1)} read as views" if e.views else "",
                 f"{_size(e.copied)} of layouts copied into buffers" if e.copied else ""]
        line = f"[cost] {g.group:<6} {seconds * 1e3:8.3f} ms  {kernel.kind}: {', '.join(p for p in parts if p)}"
        for kind, whole, chips, moved, link_s in moves:
            linked += link_s
            line += (f"; + {link_s * 1e3:.3f} ms {kind.replace('_', '-')} of {_size(whole)} over {chips} chips, "
                     f"{_size(moved)} into each ({m.link.name}, {m.link.algorithm})")
        lines.append(line)
    between = f", {linked * 1e3:.3f} ms of it between chips" if linked else ""
    lines.append(f"[cost] {len(plan.groups)} groups on {m.name}: {(total + linked) * 1e3:.3f} ms estimated{between} "
                 "(one chip's share each; a view costs the bytes its reader loads, a copied layout its buffer stored "
                 "and read back)")
    return lines


def input_lines(prog) -> list[str]:
    """`plan --show cost` on more than one chip: the program inputs (weights) each chip reads,
    its own and the spine's: where a plan splits weights, what each chip holds of them (expert
    parallelism: E/N whole experts each; tensor parallelism: 1/N of every expert)."""
    if prog.chips < 2:
        return []
    own = [0.0] * prog.chips
    spine = 0.0
    for name in prog.inputs:
        t = prog.tensors[name]
        nbytes = float(t.size * t.storage.itemsize)
        if t.home is None:
            spine += nbytes
        else:
            own[t.home] += nbytes
    chips = ", ".join(f"chip {k} {_size(n)}" for k, n in enumerate(own))
    return [f"[inputs] each chip's own: {chips} (together {_size(sum(own))}); the spine's {_size(spine)} on every chip"]


def _kernel_line(prog, group, pattern: str, cost: KernelCost) -> tuple[str, float]:
    """`plan --show cost`'s line of a collective kernel: its overlap (planner/kernels.py)."""
    from .kernels import overlap

    o = overlap(prog, cost, pattern, group.members)
    ms = 1e3
    return (f"[cost] {group.group:<6} {o.kernel * ms:8.3f} ms  collective kernel {pattern}: transfer "
            f"{o.transfer * ms:.3f} ms, compute {o.compute * ms:.3f} ms, {o.hidden * ms:.3f} ms hidden by overlap "
            f"(max of the two + one launch {o.launch * ms:.3f} ms, against {o.unfused * ms:.3f} ms unfused)", o.kernel)


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
