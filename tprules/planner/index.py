"""What the planner needs of a program, as integer arrays over statements in program order.

Statement k is the k-th in program order (a topological order of the data flow, ties in
the order of op.facts: what `tprules check` lists members in). The planner reads only
the data flow, whether each statement is a matmul or elementwise, the statement pairs to
propose first (`first_src` → `first_dst`: a matmul's elementwise epilogue, also through views
of its result, and attention's chain; see `priority_pairs`), and the tensors two or more
statements read (horizontal fusion). A
`PlanIndex` is computed from the program's own arrays (`of`: program/model.py `Program`,
no Python object per statement), or from any `TensorGraph` (`from_graph`, for a
compiler's own shim; a graph that is a view of a program is read off the same arrays).

>>> from tprules.shim import TensorGraph
>>> ix = PlanIndex.from_graph(TensorGraph.load("facts/megatron-mlp-tp2"), {"matmul": "matmul"})
>>> ix.names[:3], len(ix), int(ix.matmul.sum())
(['mm1_0', 'gelu_0', 'mm2_0'], 9, 4)
>>> [(ix.names[a], ix.names[b]) for a, b in zip(ix.src.tolist(), ix.dst.tolist())][:2]
[('mm1_0', 'gelu_0'), ('gelu_0', 'mm2_0')]
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import ops
from ..datalog.facts.columns import distinct, isin
from ..ops import Ops

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
    # statement pairs whose groups are proposed first: first_src[e] in a group, first_dst[e] in another
    first_src: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=I64))
    first_dst: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=I64))

    def __len__(self) -> int:
        return len(self.names)

    @property
    def position(self) -> dict[str, int]:
        return {o: k for k, o in enumerate(self.names)}

    @classmethod
    def of(cls, program) -> "PlanIndex":
        """From the arrays of a `Program` (program/model.py: each statement's class, what it
        reads and writes) and the class registry loaded with it: no Python object per statement."""
        tensor_ids = program.tensor_ids  # tensor index → symbol id
        n = len(program)
        writer = np.full(len(program.text), -1, dtype=I64)  # tensor symbol id → its writer
        writer[tensor_ids[program.out]] = np.arange(n, dtype=I64)
        reader, read = program.read_rows
        tensor = tensor_ids[read]
        return cls._build(program.names, program.cls, program.text, program.kinds, writer[tensor], reader, tensor,
                          program.loaded.order_ids)

    @classmethod
    def from_graph(cls, g, kinds: dict[str, str]) -> "PlanIndex":
        """From a `TensorGraph` (shim/graph.py): a view of a loaded program from the
        program's arrays (as `of`, with these `kinds`), any other from its records."""
        program = g.program
        if program is not None:
            writer = np.full(len(program.tensor_names), -1, dtype=I64)  # tensor index → its writer
            writer[program.out] = np.arange(len(program), dtype=I64)
            reader, read = program.read_rows
            return cls._build(program.names, program.cls, program.text, kinds, writer[read], reader, read)
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
        src, dst = flow // n, flow % n
        first_src, first_dst = priority_pairs(len(names), src, dst, [class_names[c] for c in cls_of.tolist()], kinds)
        return cls(names, src, dst, matmul, elementwise, shared, ids, first_src, first_dst)


PASSES = ("elementwise", "layout", "row")  # kinds between attention's two products


def priority_pairs(n: int, src: np.ndarray, dst: np.ndarray, classes: list[str],
                   kinds: dict[str, str]) -> tuple[np.ndarray, np.ndarray]:
    """The statement pairs (o, c) that make a proposal between their groups come first
    (sorted, each once):

    - a matmul o and each of its elementwise consumers c, and the views (reshapes, permutes,
      ...) of its result on the way to one (an imported model reshapes a projection's result
      before its activation): a matmul's epilogue;
    - attention's chain: each statement o on a data path from a bmm to a bmm through
      elementwise, layout and row statements only (QKᵀ → scale → mask → softmax → ·V), and
      the next statement c of such a path. A group holding the whole chain runs it per head
      and tile (codegen/lowering/attention.py).

    Found a step along the data flow at a time, with numpy, for every statement at once."""
    kind = [kinds.get(c) for c in classes]

    def is_kind(wanted) -> np.ndarray:
        return np.fromiter((k in wanted for k in kind), dtype=bool, count=n)

    elementwise = is_kind(("elementwise",))
    view = np.fromiter((c in ops.VIEWS for c in classes), dtype=bool, count=n) & ~elementwise
    passes = is_kind(PASSES)
    bmm = np.fromiter((c == Ops.BMM for c in classes), dtype=bool, count=n)
    # views from which an elementwise statement is reached through views only
    onward = _closure(elementwise, dst, src, view)
    pairs = []
    # epilogues: from each matmul through views on the way to an elementwise statement
    step = is_kind((Ops.MATMUL,))[src]
    o, c = src[step], dst[step]
    while len(o):
        keep = elementwise[c] | onward[c]
        pairs.append(distinct(o[keep] * max(n, 1) + c[keep]))
        o, c = _next(o[keep & onward[c]], c[keep & onward[c]], src, dst)
    # attention's chain
    inner = _closure(bmm, src, dst, passes) & _closure(bmm, dst, src, passes)
    chain = ((bmm | inner)[src] & inner[dst]) | (inner[src] & bmm[dst])
    pairs.append(src[chain] * max(n, 1) + dst[chain])
    found = distinct(np.concatenate(pairs)) if pairs else np.zeros(0, dtype=I64)
    return found // max(n, 1), found % max(n, 1)


def _closure(seeds: np.ndarray, frm: np.ndarray, to: np.ndarray, through: np.ndarray) -> np.ndarray:
    """The statements marked `through` that the edges frm[e] → to[e] reach from `seeds` (a
    mask) through statements marked `through` only."""
    found = np.zeros(len(seeds), dtype=bool)
    frontier = seeds
    while True:
        step = frontier[frm] & through[to] & ~found[to]
        if not step.any():
            return found
        frontier = np.zeros(len(seeds), dtype=bool)
        frontier[to[step]] = True
        found |= frontier


def _next(o: np.ndarray, c: np.ndarray, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(o, d) for each (o, c) and each edge c → d (flows sorted by src), each pair once."""
    if not len(o):
        return o, c
    start, end = np.searchsorted(src, c), np.searchsorted(src, c, side="right")
    count = end - start
    row = np.repeat(np.arange(len(c)), count)
    at = start[row] + np.arange(len(row)) - np.repeat(np.cumsum(count) - count, count)
    n = int(max(o.max(), dst.max(initial=0))) + 1
    both = distinct(o[row] * n + dst[at])
    return both // n, both % n
