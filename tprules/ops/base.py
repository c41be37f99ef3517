"""The vocabulary of classes and the shape of one class's entry.

`Ops` names every class of the registry once, in the order of `facts/shims/registry.facts`
(SPEC §4's seventeen first, then the classes real models need, in the order they came).
An `Ops` member is a `str`, so it compares and hashes as the class name a fact holds.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Callable


class Ops(enum.StrEnum):
    MATMUL = "matmul"
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    SUM = "sum"
    NEG = "neg"
    EXP = "exp"
    RELU = "relu"
    SILU = "silu"
    RSQRT = "rsqrt"
    GELU = "gelu"
    SCALE = "scale"
    CAST = "cast"
    RMSNORM = "rmsnorm"
    SOFTMAX = "softmax"
    TRANSPOSE = "transpose"
    # the classes real models need (docs/classes.md)
    BMM = "bmm"
    POW = "pow"
    ADD_SCALAR = "add_scalar"
    SIGMOID = "sigmoid"
    TANH = "tanh"
    GELU_ERF = "gelu_erf"
    MEAN = "mean"
    LAYERNORM = "layernorm"
    RESHAPE = "reshape"
    PERMUTE = "permute"
    EXPAND = "expand"
    SLICE = "slice"
    CAT = "cat"
    EMBEDDING = "embedding"
    EXPM1 = "expm1"
    MINIMUM = "minimum"
    GREATER = "greater"
    WHERE = "where"
    # mixture-of-experts routing (issue 21)
    TAKE_ROWS = "take_rows"
    TOPK_VALUES = "topk_values"
    TOPK_INDICES = "topk_indices"
    # the remaining ATen ops (issue 22)
    GREATER_EQUAL = "greater_equal"
    LOG1P = "log1p"
    CLAMP = "clamp"
    AMAX = "amax"
    CONV1D = "conv1d"
    LOG = "log"
    # MoE routing's gather and scatter (issues 21 and 22)
    TAKE_ALONG = "take_along"
    PUT_ALONG = "put_along"
    # mixture-of-experts in the grouped form: each expert's rows times its weights (issue 36)
    GROUPED_MATMUL = "grouped_matmul"
    # the sort of the grouped form: each element's place in its row sorted stably (issue 36)
    SORT_RANK = "sort_rank"


KINDS = ("matmul", "elementwise", "row", "layout", "window")
# How a row class reduces its row: sum of squares; max, then sum of exp; sum; sum, then
# sum of squared deviations; no statistics, each stored element selecting again over the
# row (top-k: the t-th largest found by t + 1 selection passes); max; no statistics, each
# stored element counting over the row (a stable sort's rank: the elements that go before it).
REDUCTIONS = ("rms", "max_exp", "average", "moments", "select", "max", "count")
N_ARY = 0  # the registry's arity of a class that reads any number of operands


@dataclass(frozen=True)
class OpClass:
    """One class, declared once: what the registry, the docs, the shape checks, the
    reference, the kernels and the cost model each need to know of it.

    `reference(attrs, *operands)` computes in float32 (SPEC §4's meaning); a class that
    takes its shape from its destination (`shaped`) is called `reference(attrs, shape, *xs)`.
    `shape(attrs, shapes, out)` is the shape rule (ValueError when the operands do not fit).
    An elementwise class has a `formula(args, attrs)`: Python source over its operands'
    variables, the piece both renderers (codegen/render/emit.py) build kernels from. A row class
    names its `reduction` (how codegen's cpu and cuda row passes compute its statistics).
    """

    op: Ops
    kind: str
    arity: int  # operands the registry declares; N_ARY for any number
    operands: str  # the docs' operands column
    meaning: str  # the docs' meaning column
    reference: Callable
    shape: Callable
    formula: Callable | None = None
    reduction: str | None = None  # row classes: rms | max_exp | average | moments | select | max | count
    passes: int = 0  # row classes: reduction passes over the row before the one that stores
    eps: str | None = None  # the default eps of a normalisation
    number_attrs: tuple[str, ...] = ()  # attributes read as numbers (a missing or bad one is ill-formed)
    optional_attrs: tuple[str, ...] = ()  # of number_attrs and int_attrs, those with a default
    int_attrs: tuple[str, ...] = ()
    # (attribute, default) read as numbers after the shape check (SPEC §4's classes)
    late_numbers: tuple[tuple[str, str | None], ...] = ()
    check: Callable | None = None  # check(attrs): ValueError for an attribute the others do not cover
    shaped: bool = False  # the result takes its shape from the destination
    # operands read as integer indices (an embedding's ids): integers from their buffer to
    # the subscript, in the reference and in the kernels (codegen/render/emit.py `Scope.index`)
    ids: tuple[int, ...] = ()
    # the ids' range: `bound(attrs, shapes)` is how many positions they index (an id lies in
    # 0..bound − 1; runtime/values/semantics.py refuses one outside), None where any id is an answer
    bound: Callable | None = None
    transcendental: bool = False  # a libm call, not a few instructions (codegen/cost.py)
    spec: bool = False  # one of SPEC §4's seventeen

    @property
    def name(self) -> str:
        return str(self.op)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"class {self.op}: kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.kind == "elementwise" and self.formula is None:
            raise ValueError(f"elementwise class {self.op} has no formula")
        if self.kind == "row" and self.reduction not in REDUCTIONS:
            raise ValueError(f"row class {self.op} has no reduction")


def formula(text: str) -> Callable:
    """A formula written as a format string over the operands' variables."""
    return lambda args, attrs: text.format(*args)


def constant(x: float) -> str:
    """A float32 constant in kernel source, exactly."""
    import math

    import numpy as np

    x = float(np.float32(x))
    if math.isinf(x) or math.isnan(x):  # the kernels' own constants (codegen/render/emit.py's HELPERS)
        return "NAN" if math.isnan(x) else ("INF" if x > 0 else "-INF")
    return f"f32({x!r})"


def fmt_shape(shape) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def broadcast(attrs, shapes, out):
    """NumPy broadcasting: the shape rule of every elementwise class."""
    import numpy as np

    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ValueError(f"operand shapes {', '.join(fmt_shape(x) for x in shapes)} do not broadcast") from None
