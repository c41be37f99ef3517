"""SPEC §4's checks of a program's tensors and statements, with the exact error each gives.

The rule engine never looks at shapes: they are checked here, so a bad shape is a clear
`file:line` error before anything is computed (program/model.py `Program.check`).
"""

from __future__ import annotations

from .. import ops
from ..errors import IllFormed
from .records import Statement, Tensor

DTYPES = ("f32", "f16", "bf16", "i8", "i32", "i64")
QUANT_FORMATS = ("int8_two_pass",)


def fact_tensors(facts) -> dict[str, Tensor]:
    """Every declared tensor, from the facts, in file order; the first bad axis or dtype raises."""
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


def check_shapes(prog, facts) -> None:
    """Raise the first problem of the tensors (`fact_tensors`) or of the program's
    statements, in order, naming its fact's file and line; nothing when all is well."""
    tensors = fact_tensors(facts)
    for s in prog.statements:
        problem = shape_problem(s, tensors)
        if problem is not None:
            raise IllFormed(problem, facts.where("op", (s.name, s.cls)))


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
