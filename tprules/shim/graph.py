"""The program as a compiler holds it: tensors, statements (`Op`, the program's `Statement`) and fused
ops over a networkx graph.

>>> g = TensorGraph()
>>> for t in ("x", "w", "h", "a"):
...     _ = g.add_tensor(t, "f32", (4, 4))
>>> mm = g.add_op(Op("mm", "matmul", ("x", "w"), "h"))
>>> act = g.add_op(Op("act", "gelu", ("h",), "a"))
>>> [o.name for o in g.successors("mm")]
['act']
>>> g.fuse("mm_act", ["act", "mm"]).statements
('mm', 'act')
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..program.records import Statement, Tensor

Op = Statement  # a statement, as the Shim API names it: the program's own record (program/records.py)


@dataclass(frozen=True)
class FusedOp:
    """A fused op: member statements that would run as one kernel, in program order."""

    name: str
    members: tuple[Op, ...]

    @property
    def statements(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.members)

    @property
    def writes(self) -> tuple[str, ...]:
        return tuple(m.writes for m in self.members)

    @property
    def inputs(self) -> tuple[str, ...]:
        """Tensors the members read and no member writes: the fused kernel's inputs."""
        inside = set(self.writes)
        return tuple(dict.fromkeys(t for m in self.members for t in m.reads if t not in inside))


AnyOp = Op | FusedOp


class TensorGraph:
    """Tensors and statements, and the data flow between statements (statement → statement
    that reads what it writes), also as a networkx `DiGraph` (`.nx`) for graph algorithms.

    `version` changes with every edit, so shims may cache what they derived from a graph.
    """

    def __init__(self):
        self._succ: dict[str, list[str]] = {}  # the data flow; `.nx` is built from it on demand
        self._pred: dict[str, list[str]] = {}
        self._nx: tuple | None = None
        self._tensors: dict[str, Tensor] = {}
        self._ops: dict[str, Op] = {}
        self._writer: dict[str, str] = {}
        self._readers: dict[str, list[str]] = {}
        self._order: tuple | None = None
        self.version = 0

    # -- building ------------------------------------------------------------------

    def add_tensor(self, name: str, dtype: str = "f32", shape: Iterable[int] = ()) -> Tensor:
        if name in self._tensors:
            raise ValueError(f"tensor {name} declared twice")
        tensor = Tensor(name, tuple(int(s) for s in shape), dtype)
        self._tensors[name] = tensor
        self.version += 1
        return tensor

    def add_op(self, op: Op) -> Op:
        """Add a statement; every tensor it binds must be declared, and its output written once."""
        if op.name in self._ops:
            raise ValueError(f"statement {op.name} declared twice")
        for t in (*op.reads, op.writes):
            if t not in self._tensors:
                raise ValueError(f"statement {op.name} binds undeclared tensor {t}")
        if op.writes in self._writer:
            raise ValueError(f"tensor {op.writes} is written by {self._writer[op.writes]} and by {op.name}")
        self.add_ops([op])
        return op

    def add_ops(self, ops: Iterable[Op]) -> None:
        """Add many statements at once (what `add_op` does, in bulk); nothing is added on error."""
        ops = list(ops)
        writer, readers, tensors = self._writer, self._readers, self._tensors
        names: set[str] = set()
        outputs: dict[str, str] = {}
        for op in ops:
            if op.name in self._ops or op.name in names:
                raise ValueError(f"statement {op.name} declared twice")
            for t in (*op.reads, op.writes):
                if t not in tensors:
                    raise ValueError(f"statement {op.name} binds undeclared tensor {t}")
            other = writer.get(op.writes) or outputs.get(op.writes)
            if other is not None:
                raise ValueError(f"tensor {op.writes} is written by {other} and by {op.name}")
            names.add(op.name)
            outputs[op.writes] = op.name
        earlier = {op.writes: list(readers.get(op.writes, ())) for op in ops}  # readers added before
        for op in ops:
            self._ops[op.name] = op
            writer[op.writes] = op.name
            self._succ[op.name], self._pred[op.name] = [], []
            for t in dict.fromkeys(op.reads):
                readers.setdefault(t, []).append(op.name)
        edges: dict[tuple[str, str], None] = {}
        for op in ops:  # every output is known now, whatever order the ops came in
            for t in dict.fromkeys(op.reads):
                if t in writer:
                    edges[(writer[t], op.name)] = None
            for r in earlier.get(op.writes, ()):
                edges[(op.name, r)] = None
        for a, b in edges:
            self._succ[a].append(b)
            self._pred[b].append(a)
        self.version += 1

    # -- reading -------------------------------------------------------------------

    @property
    def ops(self) -> list[Op]:
        """Every statement, in program order."""
        return list(self._ops.values())

    @property
    def tensors(self) -> list[Tensor]:
        return list(self._tensors.values())

    def op(self, name: str) -> Op:
        return self._ops[name]

    def tensor(self, name: str) -> Tensor:
        return self._tensors[name]

    def producer(self, tensor: str) -> Op | None:
        name = self._writer.get(tensor)
        return self._ops[name] if name is not None else None

    def consumers(self, tensor: str) -> list[Op]:
        return [self._ops[o] for o in self._readers.get(tensor, ())]

    def successors(self, name: str) -> list[Op]:
        """Statements that read what `name` writes."""
        return [self._ops[o] for o in self._succ[name]]

    def predecessors(self, name: str) -> list[Op]:
        """Statements that write what `name` reads."""
        return [self._ops[o] for o in self._pred[name]]

    def flows(self) -> dict[str, list[str]]:
        """The data flow by name: statement → statements that read what it writes."""
        return self._succ

    @property
    def nx(self):
        """The data flow as a networkx `DiGraph` over statement names (rebuilt after an edit)."""
        import networkx as nx

        if self._nx is None or self._nx[0] != self.version:
            graph = nx.DiGraph()
            graph.add_nodes_from(self._ops)
            graph.add_edges_from((a, b) for a, bs in self._succ.items() for b in bs)
            self._nx = (self.version, graph)
        return self._nx[1]

    def fuse(self, name: str, members: Iterable[str | Op]) -> FusedOp:
        """The fused op of these statements, members in program order."""
        wanted = {m if isinstance(m, str) else m.name for m in members}
        unknown = sorted(wanted - self._ops.keys())
        if unknown:
            raise ValueError(f"fused op {name}: no statement {', '.join(unknown)}")
        position = self.position
        return FusedOp(name, tuple(self._ops[o] for o in sorted(wanted, key=position.__getitem__)))

    def order(self) -> list[str]:
        """Statements in program order: a topological order of the data flow, ties in the
        order they were added (the order `tprules check` lists members in)."""
        cached = self._order
        if cached is None or cached[0] != self.version:
            order = _program_order(list(self._ops), self._succ, self._pred)
            cached = self._order = (self.version, order, {o: i for i, o in enumerate(order)})
        return cached[1]

    @property
    def position(self) -> dict[str, int]:
        """Statement → its index in `order()`."""
        self.order()
        assert self._order is not None  # order() made it
        return self._order[2]

    def __len__(self) -> int:
        return len(self._ops)

    # -- facts (SPEC §2) -----------------------------------------------------------

    @classmethod
    def from_facts(cls, facts) -> "TensorGraph":
        """The graph of a FactBase's `op`, `reads`, `writes`, `tensor`, `shape`, `attr` facts."""
        g = cls()
        shapes: dict[str, dict[int, int]] = {}
        for t, axis, size in facts.tuples("shape"):
            shapes.setdefault(t, {})[axis] = size
        tensors = g._tensors
        for t, dtype in facts.ordered("tensor"):
            if t in tensors:
                raise ValueError(f"tensor {t} declared twice")
            dims = shapes.get(t, {})
            tensors[t] = Tensor(t, tuple(dims[a] for a in sorted(dims)), dtype)
        operands: dict[str, dict[int, str]] = {}
        for o, i, t in facts.tuples("reads"):
            operands.setdefault(o, {})[i] = t
        output = dict(facts.tuples("writes"))
        attrs: dict[str, list[tuple[str, str]]] = {}
        for o, key, value in facts.ordered("attr"):
            attrs.setdefault(o, []).append((key, value))
        ops = []
        for o, cls_ in facts.ordered("op"):
            reads = operands.get(o, {})
            ops.append(Op(o, cls_, tuple(reads[i] for i in sorted(reads)), output[o], tuple(attrs.get(o, ()))))
        g.add_ops(ops)
        return g

    @classmethod
    def from_program(cls, prog) -> "TensorGraph":
        """The graph of a loaded program (program/model.py `Program`), holding the program's
        own `Statement` and `Tensor` records, added in the order of its op and tensor facts
        (as `from_facts` adds them): no fact is read again."""
        g = cls()
        g._tensors.update(prog.tensors.items())
        g.add_ops(prog.statement_at(k) for k in prog.at[prog.facts_order].tolist())
        return g

    @classmethod
    def load(cls, directory: Path | str) -> "TensorGraph":
        """The graph of a program folder's facts (SPEC §2; well-formedness is checked when a shim asks)."""
        from ..datalog.facts.base import load_fact_dir
        from ..program.schema import PROGRAM

        return cls.from_facts(load_fact_dir(Path(directory), {n: r.types for n, r in PROGRAM.items()}, strict=False))

    def to_facts(self) -> dict[str, list[tuple]]:
        facts: dict[str, list[tuple]] = {rel: [] for rel in ("op", "reads", "writes", "tensor", "shape", "attr")}
        for t in self._tensors.values():
            facts["tensor"].append((t.name, t.dtype))
            facts["shape"].extend((t.name, axis, size) for axis, size in enumerate(t.shape))
        for op in self._ops.values():
            facts["op"].append((op.name, op.cls))
            facts["reads"].extend((op.name, i, t) for i, t in enumerate(op.reads))
            facts["writes"].append((op.name, op.writes))
            facts["attr"].extend((op.name, k, v) for k, v in op.attrs)
        return facts


def _program_order(added: list[str], succ: dict[str, list[str]], pred: dict[str, list[str]]) -> list[str]:
    """Kahn's algorithm with ties broken by the order statements were added (as
    tprules.program.order does for fact files)."""
    import heapq

    rank = {o: i for i, o in enumerate(added)}
    waiting = {o: len(pred[o]) for o in added}
    ready = [rank[o] for o in added if not waiting[o]]
    heapq.heapify(ready)
    order = []
    while ready:
        o = added[heapq.heappop(ready)]
        order.append(o)
        for s in succ[o]:
            waiting[s] -= 1
            if not waiting[s]:
                heapq.heappush(ready, rank[s])
    if len(order) < len(added):
        raise ValueError("the data flow of this graph has a cycle")
    return order
