"""Where a `TensorGraph` (shim/graph.py) keeps its statements and tensors: one of two stores
with the same questions (`has_op`, `op`, `ops`, `writer`, `readers`, `succ`, `order`, ...).

- `OfProgram`: the view of a loaded `Program` (program/model.py). Every answer is read off
  the program's arrays and each record is the program's own, made when asked: a graph of
  a program folder holds no second copy of its facts.
- `Built`: the records a compiler added (`add_tensor`, `add_ops`), the only copy of them;
  also what a view becomes when it is edited (`Built.of`).

`program_of_facts` makes the program a graph of facts is a view of.

>>> from tprules.workspace import Workspace
>>> view = OfProgram(Workspace("facts/megatron-mlp-tp2").tensor_program)
>>> view.succ("mm1_0"), view.pred("mm2_0"), view.readers("x")
(['gelu_0'], ['gelu_0'], ['mm1_0', 'mm1_1', 'residual'])
>>> built = Built.of(view)
>>> built.order() == view.order() and built.flows() == view.flows()
True
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ..program.records import Statement, Tensor

GRAPH = "<graph>"  # where a graph of facts says its program comes from


class OfProgram:
    """A graph's statements and tensors, read through a loaded `Program`. Statements are
    listed in the order of their op facts (the order a graph of the facts adds them in);
    `order` is the program's."""

    def __init__(self, program):
        self.program = program
        self._rank: np.ndarray | None = None  # statement k → its op fact's index

    def _index(self, by_symbol: np.ndarray, name: str) -> int:
        """A name's index (statement or tensor) in the program, -1 for none (no error, and
        nothing interned: a symbol added to the table later is no statement either)."""
        i = self.program._ids.get(name)
        return int(by_symbol[i]) if i is not None and i < len(by_symbol) else -1

    @property
    def rank(self) -> np.ndarray:
        if self._rank is None:
            prog = self.program
            rank = np.empty(len(prog), dtype=np.int64)
            rank[prog.at[prog.facts_order]] = np.arange(len(prog))
            self._rank = rank
        return self._rank

    def has_op(self, name: str) -> bool:
        return self._index(self.program.at, name) >= 0

    def has_tensor(self, name: str) -> bool:
        return self._index(self.program.tix, name) >= 0

    def op(self, name: str) -> Statement:
        k = self._index(self.program.at, name)
        if k < 0:
            raise KeyError(name)
        return self.program.statement_at(k)

    def tensor(self, name: str) -> Tensor:
        t = self._index(self.program.tix, name)
        if t < 0:
            raise KeyError(name)
        return self.program.tensor_at(t)

    def ops(self) -> list[Statement]:
        prog = self.program
        return [prog.statement_at(k) for k in prog.at[prog.facts_order].tolist()]

    def tensors(self) -> list[Tensor]:
        return [self.program.tensor_at(t) for t in range(len(self.program.tensor_names))]

    def writer(self, tensor: str) -> str | None:
        return self.program.writer.get(tensor)

    def _readers_at(self, t: int) -> list[str]:
        """The distinct readers of tensor index t, in the order of their op facts."""
        if t < 0:
            return []
        found = self.program.signatures.readers[t]
        rank, names = self.rank, self.program.names
        return [names[k] for k in sorted(found, key=rank.__getitem__)]

    def readers(self, tensor: str) -> list[str]:
        return self._readers_at(self._index(self.program.tix, tensor))

    def succ(self, name: str) -> list[str]:
        return self._readers_at(int(self.program.out[self.program.position[name]]))

    def pred(self, name: str) -> list[str]:
        writer = self.program.writer
        return list(dict.fromkeys(w for t in self.op(name).reads if (w := writer.get(t)) is not None))

    def flows(self) -> dict[str, list[str]]:
        prog = self.program
        names, out = prog.names, prog.out
        return {names[k]: self._readers_at(int(out[k])) for k in prog.at[prog.facts_order].tolist()}

    def order(self) -> list[str]:
        return list(self.program.names)

    def position(self) -> Mapping[str, int]:
        return self.program.position

    def count(self) -> int:
        return len(self.program)


class Built:
    """A graph's own statements and tensors, as a compiler added them, with the data flow
    (writer, readers, successors and predecessors by name) kept as they come."""

    def __init__(self):
        self._tensors: dict[str, Tensor] = {}
        self._ops: dict[str, Statement] = {}
        self._writer: dict[str, str] = {}
        self._readers: dict[str, list[str]] = {}
        self._succ: dict[str, list[str]] = {}
        self._pred: dict[str, list[str]] = {}
        self._edits = 0
        self._order: tuple | None = None  # (edits, order, position)

    @classmethod
    def of(cls, view: OfProgram) -> "Built":
        """A view's records, to edit (the edited graph is no longer the program)."""
        built = cls()
        for tensor in view.tensors():
            built.add_tensor(tensor)
        built.add_ops(view.ops())
        return built

    def add_tensor(self, tensor: Tensor) -> Tensor:
        self._tensors[tensor.name] = tensor
        self._edits += 1
        return tensor

    def add_ops(self, ops: list[Statement]) -> None:
        """Statements already checked (TensorGraph.add_ops), in the order given."""
        writer, readers = self._writer, self._readers
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
        self._edits += 1

    def has_op(self, name: str) -> bool:
        return name in self._ops

    def has_tensor(self, name: str) -> bool:
        return name in self._tensors

    def op(self, name: str) -> Statement:
        return self._ops[name]

    def tensor(self, name: str) -> Tensor:
        return self._tensors[name]

    def ops(self) -> list[Statement]:
        return list(self._ops.values())

    def tensors(self) -> list[Tensor]:
        return list(self._tensors.values())

    def writer(self, tensor: str) -> str | None:
        return self._writer.get(tensor)

    def readers(self, tensor: str) -> list[str]:
        return list(self._readers.get(tensor, ()))

    def succ(self, name: str) -> list[str]:
        return self._succ[name]

    def pred(self, name: str) -> list[str]:
        return self._pred[name]

    def flows(self) -> dict[str, list[str]]:
        return self._succ

    def _ordered(self) -> tuple:
        cached = self._order
        if cached is None or cached[0] != self._edits:
            order = _program_order(list(self._ops), self._succ, self._pred)
            cached = self._order = (self._edits, order, {o: i for i, o in enumerate(order)})
        return cached

    def order(self) -> list[str]:
        return self._ordered()[1]

    def position(self) -> Mapping[str, int]:
        return self._ordered()[2]

    def count(self) -> int:
        return len(self._ops)


def _program_order(added: list[str], succ: dict[str, list[str]], pred: dict[str, list[str]]) -> list[str]:
    """A topological order with ties broken by the order statements were added (program
    order: tprules.program.order's `kahn`, as for fact files)."""
    from ..program.order import kahn

    rank = {o: i for i, o in enumerate(added)}
    order = kahn({rank[o]: [rank[s] for s in succ[o]] for o in added}, [len(pred[o]) for o in added])
    if len(order) < len(added):
        raise ValueError("the data flow of this graph has a cycle")
    return [added[k] for k in order]


# -- a graph of facts ----------------------------------------------------------------------


def program_of_facts(facts, directory: Path | str = GRAPH):
    """The `Program` over a FactBase's `op`, `reads`, `writes`, `tensor`, `shape`, `attr`
    facts, or None when the facts are not one program's as a graph holds it (a name declared
    twice, an undeclared tensor, a tensor written twice, a statement without one output, a
    cycle): a graph then adds them one by one (`facts_records`), and says what is wrong."""
    from ..datalog.facts.columns import Columns
    from ..errors import IllFormed
    from ..program.load import LoadedProgram
    from ..program.model import Program
    from ..program.order import topological_ids
    from ..program.schema import SPEC

    columns = Columns(facts, {rel: r.types for rel, r in SPEC.items()})
    size = len(columns.symbols.names)
    tensors, ops, writes, reads = columns["tensor"], columns["op"], columns["writes"], columns["reads"]
    if not (_distinct(tensors[:, 0]) and _distinct(ops[:, 0]) and _distinct(writes[:, 0])
            and _distinct(writes[:, 1]) and len(writes) == len(ops)):
        return None
    is_op = np.zeros(size, dtype=bool)
    is_op[ops[:, 0]] = True
    is_tensor = np.zeros(size, dtype=bool)
    is_tensor[tensors[:, 0]] = True
    shape = columns["shape"]
    shape = shape[is_tensor[shape[:, 0]]]
    if not (is_op[writes[:, 0]].all() and is_tensor[writes[:, 1]].all() and is_op[reads[:, 0]].all()
            and is_tensor[reads[:, 2]].all() and is_op[columns["attr"][:, 0]].all()
            and is_op[columns["fold"][:, 0]].all() and _distinct_rows(reads[:, :2]) and _distinct_rows(shape[:, :2])):
        return None
    try:
        ids = topological_ids(facts, columns)
    except IllFormed:  # a cycle: a graph's `order` says so when asked
        return None
    return Program(LoadedProgram(Path(directory), str(directory), facts, "", ids, columns))


def _distinct(values: np.ndarray) -> bool:
    return len(np.unique(values)) == len(values)


def _distinct_rows(rows: np.ndarray) -> bool:
    return len(np.unique(rows, axis=0)) == len(rows)


def facts_records(facts) -> tuple[list[Tensor], list[Statement]]:
    """The tensors and statements of a FactBase's facts, one by one, in file order (a tensor
    declared twice raises; the statements are checked as `TensorGraph.add_ops` checks them)."""
    shapes: dict[str, dict[int, int]] = {}
    for t, axis, size in facts.tuples("shape"):
        shapes.setdefault(t, {})[axis] = size
    tensors: dict[str, Tensor] = {}
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
        ops.append(Statement(o, cls_, tuple(reads[i] for i in sorted(reads)), output[o], tuple(attrs.get(o, ()))))
    return list(tensors.values()), ops
