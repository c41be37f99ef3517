"""The program as a compiler holds it: tensors, statements (`Op`, the program's `Statement`) and fused
ops, with the data flow between statements (also as a networkx graph).

A graph of a loaded program (`from_program`, `from_facts`, `load`) is a view of that one
`Program` (program/model.py): its statements, tensors, writers, readers and order are the
program's, each record made when asked. A graph a compiler builds (`add_tensor`, `add_op`,
`add_ops`) holds the records it was given, and nothing else does; editing a view of a
program first takes the program's records as its own (the edited graph is no longer that
program).

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

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..program.records import Statement, Tensor
from .stores import Built, OfProgram, facts_records, program_of_facts

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

    `TensorGraph()` is empty, for a compiler to fill; `TensorGraph(program)` is the view of
    a loaded `Program`. `version` changes with every edit, so shims may cache what they
    derived from a graph.
    """

    def __init__(self, program=None):
        self._records: Built | OfProgram = Built() if program is None else OfProgram(program)
        self._nx: tuple | None = None
        self.version = 0 if program is None else 1

    @property
    def program(self):
        """The loaded `Program` this graph is a view of; None for a graph a compiler built
        (or edited after loading)."""
        records = self._records
        return records.program if isinstance(records, OfProgram) else None

    # -- building ------------------------------------------------------------------

    def _own(self) -> Built:
        """The records to edit: a view of a program first takes the program's as its own."""
        records = self._records
        if isinstance(records, OfProgram):
            records = self._records = Built.of(records)
        return records

    def add_tensor(self, name: str, dtype: str = "f32", shape: Iterable[int] = ()) -> Tensor:
        if self._records.has_tensor(name):
            raise ValueError(f"tensor {name} declared twice")
        tensor = self._own().add_tensor(Tensor(name, tuple(int(s) for s in shape), dtype))
        self.version += 1
        return tensor

    def add_op(self, op: Op) -> Op:
        """Add a statement; every tensor it binds must be declared, and its output written once."""
        records = self._records
        if records.has_op(op.name):
            raise ValueError(f"statement {op.name} declared twice")
        for t in (*op.reads, op.writes):
            if not records.has_tensor(t):
                raise ValueError(f"statement {op.name} binds undeclared tensor {t}")
        other = records.writer(op.writes)
        if other is not None:
            raise ValueError(f"tensor {op.writes} is written by {other} and by {op.name}")
        self.add_ops([op])
        return op

    def add_ops(self, ops: Iterable[Op]) -> None:
        """Add many statements at once (what `add_op` does, in bulk); nothing is added on error."""
        ops = list(ops)
        records = self._records
        names: set[str] = set()
        outputs: dict[str, str] = {}
        for op in ops:
            if records.has_op(op.name) or op.name in names:
                raise ValueError(f"statement {op.name} declared twice")
            for t in (*op.reads, op.writes):
                if not records.has_tensor(t):
                    raise ValueError(f"statement {op.name} binds undeclared tensor {t}")
            other = records.writer(op.writes) or outputs.get(op.writes)
            if other is not None:
                raise ValueError(f"tensor {op.writes} is written by {other} and by {op.name}")
            names.add(op.name)
            outputs[op.writes] = op.name
        if ops:
            self._own().add_ops(ops)
        self.version += 1

    # -- reading -------------------------------------------------------------------

    @property
    def ops(self) -> list[Op]:
        """Every statement, in the order added (a program's: its op facts' order)."""
        return self._records.ops()

    @property
    def tensors(self) -> list[Tensor]:
        return self._records.tensors()

    def op(self, name: str) -> Op:
        return self._records.op(name)

    def tensor(self, name: str) -> Tensor:
        return self._records.tensor(name)

    def producer(self, tensor: str) -> Op | None:
        name = self._records.writer(tensor)
        return self._records.op(name) if name is not None else None

    def consumers(self, tensor: str) -> list[Op]:
        return [self._records.op(o) for o in self._records.readers(tensor)]

    def successors(self, name: str) -> list[Op]:
        """Statements that read what `name` writes."""
        return [self._records.op(o) for o in self._records.succ(name)]

    def predecessors(self, name: str) -> list[Op]:
        """Statements that write what `name` reads."""
        return [self._records.op(o) for o in self._records.pred(name)]

    def flows(self) -> dict[str, list[str]]:
        """The data flow by name: statement → statements that read what it writes."""
        return self._records.flows()

    @property
    def nx(self):
        """The data flow as a networkx `DiGraph` over statement names (rebuilt after an edit)."""
        import networkx as nx

        if self._nx is None or self._nx[0] != self.version:
            graph = nx.DiGraph()
            graph.add_nodes_from(o.name for o in self.ops)
            graph.add_edges_from((a, b) for a, bs in self.flows().items() for b in bs)
            self._nx = (self.version, graph)
        return self._nx[1]

    def fuse(self, name: str, members: Iterable[str | Op]) -> FusedOp:
        """The fused op of these statements, members in program order."""
        wanted = {m if isinstance(m, str) else m.name for m in members}
        records = self._records
        unknown = sorted(o for o in wanted if not records.has_op(o))
        if unknown:
            raise ValueError(f"fused op {name}: no statement {', '.join(unknown)}")
        position = self.position
        return FusedOp(name, tuple(records.op(o) for o in sorted(wanted, key=position.__getitem__)))

    def order(self) -> list[str]:
        """Statements in program order: a topological order of the data flow, ties in the
        order they were added (the order `tprules check` lists members in)."""
        return self._records.order()

    @property
    def position(self) -> Mapping[str, int]:
        """Statement → its index in `order()`."""
        return self._records.position()

    def __len__(self) -> int:
        return self._records.count()

    # -- facts (SPEC §2) -----------------------------------------------------------

    @classmethod
    def from_facts(cls, facts) -> "TensorGraph":
        """The graph of a FactBase's `op`, `reads`, `writes`, `tensor`, `shape`, `attr` facts:
        the view of the program over their columns (facts a program could not be loaded
        from, such as a data flow with a cycle, are added one by one, as a compiler would)."""
        program = program_of_facts(facts)
        if program is not None:
            return cls(program)
        g = cls()
        tensors, ops = facts_records(facts)
        for tensor in tensors:
            g._own().add_tensor(tensor)
        g.add_ops(ops)
        return g

    @classmethod
    def from_program(cls, prog) -> "TensorGraph":
        """The graph of a loaded program (program/model.py `Program`): a view of it, holding
        its own `Statement` and `Tensor` records, statements in the order of its op facts."""
        return cls(prog)

    @classmethod
    def load(cls, directory: Path | str) -> "TensorGraph":
        """The graph of a program folder's facts (SPEC §2; well-formedness is checked when a shim asks)."""
        from ..datalog.facts.base import load_fact_dir
        from ..program.schema import PROGRAM

        return cls.from_facts(load_fact_dir(Path(directory), {n: r.types for n, r in PROGRAM.items()}, strict=False))

    def to_facts(self) -> dict[str, list[tuple]]:
        facts: dict[str, list[tuple]] = {rel: [] for rel in ("op", "reads", "writes", "tensor", "shape", "attr")}
        for t in self.tensors:
            facts["tensor"].append((t.name, t.dtype))
            facts["shape"].extend((t.name, axis, size) for axis, size in enumerate(t.shape))
        for op in self.ops:
            facts["op"].append((op.name, op.cls))
            facts["reads"].extend((op.name, i, t) for i, t in enumerate(op.reads))
            facts["writes"].append((op.name, op.writes))
            facts["attr"].extend((op.name, k, v) for k, v in op.attrs)
        return facts
