"""The class registry as one table: every class declared once (`Ops`), its entry in the
module of its kind, and the kinds as sets over the vocabulary (tinygrad's `Ops` and
`GroupOp`). `facts/shims/registry.facts` and the class table of docs/classes.md are
generated from here (`python -m tprules.ops.registry_files`).

Backends are tables keyed by `Ops`; `require` makes one that forgets a class fail at import.

>>> CLASSES["sigmoid"].kind, CLASSES[Ops.CAT].arity
('elementwise', 0)
>>> Ops.RMSNORM in ROW and "rmsnorm" in ROW
True
"""

from __future__ import annotations

from . import elementwise, layout, matmul, row, window
from .base import KINDS, N_ARY, OpClass, Ops, constant, fmt_shape
from .layout import dims

__all__ = ["CLASSES", "ELEMENTWISE", "INDEXED", "KINDS", "LAYOUT", "MATMULS", "N_ARY", "OpClass", "Ops",
           "ROW", "SHAPED", "WINDOW", "check_attrs", "constant", "dims", "fmt_shape", "require", "shape_of"]


# Keyed by `Ops`, a StrEnum: a class's name (a str) finds its entry as well.
def _table() -> dict[str, OpClass]:
    entries: dict[str, OpClass] = {}
    for module in (matmul, elementwise, row, layout, window):
        for c in module.CLASSES:
            if c.op in entries:
                raise ImportError(f"class {c.op} is declared twice")
            entries[c.op] = c
    missing = [op for op in Ops if op not in entries]
    if missing:
        raise ImportError(f"classes without an entry: {', '.join(missing)}")
    return {op: entries[op] for op in Ops}  # registry order


CLASSES: dict[str, OpClass] = _table()

# The kinds, as sets over the vocabulary
MATMULS = frozenset(op for op, c in CLASSES.items() if c.kind == "matmul")
ELEMENTWISE = frozenset(op for op, c in CLASSES.items() if c.kind == "elementwise")
ROW = frozenset(op for op, c in CLASSES.items() if c.kind == "row")
LAYOUT = frozenset(op for op, c in CLASSES.items() if c.kind == "layout")
WINDOW = frozenset(op for op, c in CLASSES.items() if c.kind == "window")
INDEXED = LAYOUT | WINDOW  # read an operand at another index than the one they write
# layout classes that only move elements, read through index arithmetic (codegen/render/views.py);
# cat, embedding and take_rows choose what they read, so they compute
VIEWS = frozenset({Ops.RESHAPE, Ops.PERMUTE, Ops.EXPAND, Ops.SLICE, Ops.TRANSPOSE})
SHAPED = frozenset(op for op, c in CLASSES.items() if c.shaped)  # take their shape from the destination


def require(table, group, what: str):
    """`table` (keyed by class) as given, or ImportError naming every class of `group` it lacks."""
    missing = [op for op in Ops if op in group and op not in table]
    if missing:
        raise ImportError(f"{what} lacks {', '.join(missing)}")
    return table


def shape_of(cls: str, attrs: dict[str, str], shapes: list[tuple[int, ...]], out: tuple[int, ...] = ()) -> tuple[int, ...]:
    """The shape a statement of `cls` computes (the destination's `out` where the class takes
    it from there); ValueError when the operands do not fit."""
    return CLASSES[cls].shape(attrs, shapes, out)


def check_attrs(cls: str, attrs: dict[str, str]) -> None:
    """ValueError naming the attribute a statement of `cls` lacks or has wrong."""
    c = CLASSES[cls]
    for key in c.number_attrs:
        if key in c.optional_attrs and key not in attrs:
            continue
        try:
            float(attrs[key])
        except (KeyError, ValueError):
            raise ValueError(f"needs a number attribute {key}; got {attrs.get(key)!r}") from None
    for key in c.int_attrs:
        if key in c.optional_attrs and key not in attrs:
            continue
        try:
            int(attrs[key])
        except (KeyError, ValueError):
            raise ValueError(f"needs an integer attribute {key}; got {attrs.get(key)!r}") from None
    if c.check is not None:
        c.check(attrs)
