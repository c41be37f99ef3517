"""The program as codegen and the runtime see it: statements in topological order, tensors with their
shapes, dtypes and homes, each statement's place, the operands the shim reads quantized.

Shapes are checked here against SPEC §4 (the rule engine never looks at them), so a bad
shape is a clear `file:line` error before anything is computed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .. import ops
from ..errors import IllFormed
from ..ops import Ops
from .records import Statement, Tensor

DTYPES = ("f32", "f16", "bf16", "i8", "i32", "i64")
QUANT_FORMATS = ("int8_two_pass",)

# the kinds, as codegen asks for them (tprules/ops)
MATMUL, BMM = Ops.MATMUL, Ops.BMM
ROW = ops.ROW
ANCHORS = ops.MATMULS | ops.ROW  # classes whose output element needs more than one input element
POINTWISE = ops.ELEMENTWISE  # one output element from the same element of each operand
INDEXED = ops.INDEXED  # read an operand at another index than the one they write
WINDOW = ops.WINDOW  # a weighted sum over a window of an operand, computed where read (codegen/window.py)
LAYOUT = ops.LAYOUT - {Ops.TRANSPOSE}  # lowered as index reads (codegen/layout.py); transpose is a stage's flip


@dataclass
class RunProgram:
    """Everything `run` needs from a loaded program (see `from_workspace`)."""

    directory: Path
    display: str
    shim: str
    chips: int
    statements: tuple[Statement, ...]  # topological order, program order first
    tensors: dict[str, Tensor]
    places: dict[str, str]  # statement → chip:K | spine | collective
    writer: dict[str, str] = field(default_factory=dict)
    readers: dict[str, tuple[str, ...]] = field(default_factory=dict)
    shim_source: str = "library"  # where the shim is described: program | library (program/shimsource.py)
    where: dict = field(default_factory=dict)  # statement → its op.facts line (a Pos), for errors at run time

    def __post_init__(self):
        self.by_name = {s.name: s for s in self.statements}
        self.position = {s.name: i for i, s in enumerate(self.statements)}
        self.writer = {s.writes: s.name for s in self.statements}
        readers: dict[str, list[str]] = {}
        for s in self.statements:
            for t in dict.fromkeys(s.reads):
                readers.setdefault(t, []).append(s.name)
        self.readers = {t: tuple(r) for t, r in readers.items()}

    def statement(self, name: str) -> Statement:
        return self.by_name[name]

    @property
    def inputs(self) -> list[str]:
        """Tensors some statement reads and none writes, in order of first read."""
        seen = dict.fromkeys(t for s in self.statements for t in s.reads if t not in self.writer)
        return list(seen)

    @property
    def outputs(self) -> list[str]:
        """Tensors no statement reads (SPEC §5), in program order."""
        return [s.writes for s in self.statements if s.writes not in self.readers]

    def quantized_path(self, tensor: str) -> bool:
        """Whether the tensor's value depends on a quantized read (its tolerance is looser)."""
        seen, todo = set(), [tensor]
        while todo:
            t = todo.pop()
            o = self.writer.get(t)
            if o is None or o in seen:
                continue
            seen.add(o)
            s = self.by_name[o]
            if s.quantized:
                return True
            todo.extend(s.reads)
        return False

    @classmethod
    def from_workspace(cls, ws) -> "RunProgram":
        loaded = ws.program
        facts = loaded.facts
        shim = loaded.shim
        operands: dict[str, dict[int, str]] = {}
        for o, i, t in facts.tuples("reads"):
            operands.setdefault(o, {})[i] = t
        writes = dict(facts.tuples("writes"))
        class_of = dict(facts.tuples("op"))
        attrs: dict[str, list[tuple[str, str]]] = {}
        for o, key, value in facts.ordered("attr"):
            attrs.setdefault(o, []).append((key, value))
        folds = {o for o, _ in facts.tuples("fold")}
        quantized = {(c, i): f for s, c, i, f in facts.tuples("quantized") if s == shim}
        statements = []
        for o in loaded.order:
            reads = tuple(t for _, t in sorted(operands.get(o, {}).items()))
            q = tuple(sorted((i, f) for (c, i), f in quantized.items() if c == class_of[o] and i < len(reads)))
            statements.append(Statement(o, class_of[o], reads, writes[o], tuple(attrs.get(o, ())), o in folds, q))
        tensors = _tensors(facts)
        (chips,) = next(iter(facts.tuples("chips")), (1,))
        prog = cls(loaded.directory, loaded.display, shim, chips, tuple(statements), tensors, ws.places(),
                   shim_source=loaded.shim_source)
        check_shapes(prog, facts)
        return prog


def _tensors(facts) -> dict[str, Tensor]:
    axes: dict[str, dict[int, int]] = {}
    for t, axis, size in facts.tuples("shape"):
        if axis in axes.setdefault(t, {}):
            raise IllFormed(f"axis {axis} of {t} has two sizes", facts.where("shape", (t, axis, size)))
        if size < 1:
            raise IllFormed(f"axis {axis} of {t} has size {size}; sizes are at least 1",
                            facts.where("shape", (t, axis, size)))
        axes[t][axis] = size
    home = {t: c for t, c in facts.tuples("placed")}
    tensors = {}
    for t, dtype in facts.ordered("tensor"):
        if dtype not in DTYPES:
            raise IllFormed(f"tensor {t} has dtype {dtype}; dtypes are {', '.join(DTYPES)}", facts.where("tensor", (t, dtype)))
        sizes = axes.get(t, {})
        if sorted(sizes) != list(range(len(sizes))):
            raise IllFormed(f"the axes of {t} are {sorted(sizes)}; expected 0..{len(sizes) - 1}",
                            facts.where("tensor", (t, dtype)))
        tensors[t] = Tensor(t, tuple(sizes[a] for a in range(len(sizes))), dtype, home.get(t))
    return tensors


# -- shapes (SPEC §4) ------------------------------------------------------------------


def statement_shape(s: Statement, shapes: list[tuple[int, ...]], out: tuple[int, ...] = ()) -> tuple[int, ...]:
    """The shape a statement computes from its operands' shapes (and, for a class that takes
    its shape from its destination, the destination's `out`); ValueError when they do not fit."""
    return ops.shape_of(s.cls, dict(s.attrs), shapes, out)


def check_shapes(prog: RunProgram, facts) -> None:
    for s in prog.statements:
        where = prog.where[s.name] = facts.where("op", (s.name, s.cls))
        problem = shape_problem(s, prog.tensors)
        if problem is not None:
            raise IllFormed(problem, where)


def shape_problem(s: Statement, tensors) -> str | None:
    """What is wrong with a statement's shape, attributes or quantized reads (SPEC §4), or None."""
    want = tensors[s.writes].shape
    try:
        ops.check_attrs(s.cls, dict(s.attrs))
        got = statement_shape(s, [tensors[t].shape for t in s.reads], want)
    except (ValueError, KeyError) as err:
        return f"{s.name} ({s.cls}): {err}"
    if got != want:
        return f"{s.name} ({s.cls}) computes shape {_fmt(got)} but writes {s.writes} of shape {_fmt(want)}"
    for i, fmt in s.quantized:
        if fmt not in QUANT_FORMATS:
            return f"the shim reads operand {i} of {s.cls} as {fmt}; run knows {', '.join(QUANT_FORMATS)}"
    for key, default in ops.CLASSES[s.cls].late_numbers:
        text = s.attr(key, default)
        try:
            float(text)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return f"{s.name} ({s.cls}) needs a number attribute {key}; got {text!r}"
    return None


def _fmt(shape: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"
