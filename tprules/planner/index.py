"""What the planner needs of a program, as integer arrays over statements in program order.

Statement k is the k-th in program order (a topological order of the data flow, ties in
the order of op.facts: what `tprules check` lists members in). The planner reads only
the data flow, whether each statement is a matmul or elementwise (to propose a matmul's
epilogue first), and the tensors two or more statements read (horizontal fusion). A
`PlanIndex` is built straight from a loaded program's encoded columns
(`from_program`: no Python object per statement), or from any `TensorGraph`
(`from_graph`, for a compiler's own shim).

>>> from tprules.shim import TensorGraph
>>> ix = PlanIndex.from_graph(TensorGraph.load("facts/megatron-mlp-tp2"), {"matmul": "matmul"})
>>> ix.names[:3], len(ix), int(ix.matmul.sum())
(['mm1_0', 'gelu_0', 'mm2_0'], 9, 4)
>>> [(ix.names[a], ix.names[b]) for a, b in zip(ix.src.tolist(), ix.dst.tolist())][:2]
[('mm1_0', 'gelu_0'), ('gelu_0', 'mm2_0')]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ops import Ops
from ..program.columns import distinct, isin

I64 = np.int64


@dataclass(frozen=True)
class PlanIndex:
    names: list[str]  # statement k's name
    src: np.ndarray  # data flow: statement src[e] writes what dst[e] reads (distinct pairs)
    dst: np.ndarray
    matmul: np.ndarray  # bool per statement: of kind matmul
    elementwise: np.ndarray  # bool per statement: of kind elementwise
    shared: list[list[int]]  # the readers of each tensor that two or more statements read
    ids: np.ndarray | None = None  # each statement's symbol id in its program's facts (from_program)

    def __len__(self) -> int:
        return len(self.names)

    @property
    def position(self) -> dict[str, int]:
        return {o: k for k, o in enumerate(self.names)}

    @classmethod
    def from_program(cls, loaded, kinds: dict[str, str]) -> "PlanIndex":
        """From a `LoadedProgram`'s columns (SPEC §2 `op`, `reads`, `writes`) and its order."""
        columns = loaded.columns
        symbols = columns.symbols
        names = list(loaded.order)
        order = loaded.order_ids
        at = np.full(len(symbols.names), -1, dtype=I64)  # symbol id → statement
        at[order] = np.arange(len(names), dtype=I64)
        ops, reads, writes = columns["op"], columns["reads"], columns["writes"]
        cls_of = np.empty(len(names), dtype=I64)
        cls_of[at[ops[:, 0]]] = ops[:, 1]
        writer = np.full(len(symbols.names), -1, dtype=I64)  # tensor id → its writer
        writer[writes[:, 1]] = at[writes[:, 0]]
        reader, tensor = at[reads[:, 0]], reads[:, 2]
        return cls._build(names, cls_of, symbols.names, kinds, writer[tensor], reader, tensor, order)

    @classmethod
    def from_graph(cls, g, kinds: dict[str, str]) -> "PlanIndex":
        """From a `TensorGraph` (shim/graph.py)."""
        names = list(g.order())
        position = g.position
        classes: dict[str, int] = {}
        cls_of = np.fromiter((classes.setdefault(g.op(o).cls, len(classes)) for o in names), dtype=I64,
                             count=len(names))
        tensors = {t.name: i for i, t in enumerate(g.tensors)}
        rows = [(position[op.name], tensors[t]) for op in g.ops for t in op.reads]
        pairs = np.array(rows, dtype=I64).reshape(-1, 2)
        writer = np.full(len(tensors), -1, dtype=I64)
        for op in g.ops:
            writer[tensors[op.writes]] = position[op.name]
        return cls._build(names, cls_of, list(classes), kinds, writer[pairs[:, 1]], pairs[:, 0], pairs[:, 1])

    @classmethod
    def _build(cls, names, cls_of, class_names, kinds, producer, reader, tensor, ids=None) -> "PlanIndex":
        """`cls_of`: each statement's class, as an index into `class_names`; one row per read:
        the statement reading, the tensor read and its producer (-1: a program input)."""
        used = distinct(cls_of)
        kind = {c: kinds.get(class_names[c]) for c in used.tolist()}
        matmul = isin(cls_of, [c for c, k in kind.items() if k == Ops.MATMUL])
        elementwise = isin(cls_of, [c for c, k in kind.items() if k == "elementwise"])
        made = producer >= 0
        n = max(len(names), 1)
        flow = distinct(producer[made] * n + reader[made])
        pairs = distinct(tensor * n + reader)  # each (tensor, reader) once
        t, r = pairs // n, pairs % n
        starts = np.flatnonzero(np.concatenate(([True], t[1:] != t[:-1])))
        ends = np.append(starts[1:], len(t))
        r_list = r.tolist()
        shared = [r_list[a:b] for a, b in zip(starts.tolist(), ends.tolist()) if b - a > 1]
        return cls(names, flow // n, flow % n, matmul, elementwise, shared, ids)
