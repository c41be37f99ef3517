"""Kernel IR: what one planned group computes, before it is rendered for a device.

A kernel is a sequence of stages over its parameters (buffers). Each stage iterates over
one domain and stores values given as expressions; an expression is evaluated at an index
of its own shape (operands of other shapes are broadcast as NumPy does). Frozen and
hashable, so the renderers can share common subexpressions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod
from typing import Union

from ..ops import Ops

Shape = tuple[int, ...]


# -- expressions -------------------------------------------------------------------------


@dataclass(frozen=True)
class Load:
    """An element of a buffer parameter."""

    param: str
    shape: Shape


@dataclass(frozen=True)
class Op:
    """A pointwise class (SPEC §4 kind elementwise) over its operands, kept in `dtype`."""

    cls: str
    args: tuple["Expr", ...]
    shape: Shape
    dtype: str
    attrs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Transpose:
    arg: "Expr"
    shape: Shape
    dtype: str


@dataclass(frozen=True)
class Quant:
    """The second pass of a quantized read: `arg` as int8 with the scale of parameter `scale`."""

    arg: "Expr"
    scale: str
    shape: Shape


@dataclass(frozen=True)
class Acc:
    """The result of matmul number `index` of the current matmul stage, at the stage's index."""

    index: int
    shape: Shape
    dtype: str


@dataclass(frozen=True)
class RowOut:
    """The output of row op number `index` of the current row stage, at the stage's index."""

    index: int
    shape: Shape
    dtype: str


@dataclass(frozen=True)
class Remap:
    """A layout class: `arg` read at another index (codegen/lowering/layout.py maps the index).
    kind reshape | expand (to `shape`), permute (params: the dims), slice (params: axis, start, step)."""

    kind: str
    arg: "Expr"
    shape: Shape
    dtype: str
    params: tuple[int, ...] = ()


@dataclass(frozen=True)
class Concat:
    """`cat`: the operand whose range of `axis` holds the index, read at the offset index."""

    args: tuple["Expr", ...]
    axis: int
    shape: Shape
    dtype: str


@dataclass(frozen=True)
class Gather:
    """`embedding`, `take_rows`: row ids[lead] of `table`, at the other indices; with an `offset` (a
    vocabulary-parallel slice of the table) row ids[lead] - offset, and zero where that
    row lies outside the table. `take_along` (an `axis`): table at the index itself, its
    `axis` index replaced by ids at the index."""

    table: "Expr"
    ids: "Expr"
    shape: Shape
    dtype: str
    offset: int | None = None
    axis: int | None = None


@dataclass(frozen=True)
class Window:
    """`conv1d`: at [b, o, t], bias[o] plus Σ_i Σ_k w[o, i, k] · x[b, g·C/g + i, t + k − padding],
    zero outside x (codegen/lowering/window.py)."""

    x: "Expr"
    w: "Expr"
    bias: "Expr | None"
    padding: int
    groups: int
    shape: Shape
    dtype: str

    @property
    def taps(self) -> int:
        return self.w.shape[1] * self.w.shape[2]

    @property
    def tapped(self) -> tuple["Expr", ...]:
        """What each tap reads (computed again at every tap)."""
        return (self.x,)

    @property
    def operands(self) -> tuple["Expr", ...]:
        return (self.x, self.w) + ((self.bias,) if self.bias is not None else ())


@dataclass(frozen=True)
class PutAlong:
    """`put_along`: at an index, `value` (or `source` at the entry) where an entry of `index`'s
    window along `axis` (the index itself, that axis running over the index's size) names
    it, the last such entry winning; else x there. Not an expression: a scatter stage's
    (ScatterStage) description, its result read from its buffer by later stages."""

    x: "Expr"
    index: "Expr"
    source: "Expr | None"
    axis: int
    value: float | None
    shape: Shape
    dtype: str

    @property
    def taps(self) -> int:
        """The entries of one line of the index (its extent along the axis)."""
        return self.index.shape[self.axis]


Expr = Union[Load, Op, Transpose, Quant, Acc, RowOut, Remap, Concat, Gather, Window]


def children(e: Expr) -> tuple[Expr, ...]:
    """The expressions `e` reads directly."""
    if isinstance(e, Op):
        return e.args
    if isinstance(e, (Transpose, Quant, Remap)):
        return (e.arg,)
    if isinstance(e, Concat):
        return e.args
    if isinstance(e, Gather):
        return (e.table, e.ids)
    if isinstance(e, Window):
        return (e.x, e.w) + ((e.bias,) if e.bias is not None else ())
    return ()  # Load, Acc, RowOut


def params_read(e: Expr) -> set[str]:
    """The buffer parameters `e` loads from."""
    found: set[str] = set()
    seen: set[int] = set()
    todo = [e]
    while todo:
        x = todo.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, Load):
            found.add(x.param)
        todo.extend(children(x))
    return found


# -- stages ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Store:
    """`value`, evaluated at the stage's index, stored there (or at the swapped index)."""

    param: str
    value: Expr
    flip: bool = False


@dataclass(frozen=True)
class Pointwise:
    """One pass over `shape`: every store is evaluated at each index."""

    shape: Shape
    stores: tuple[Store, ...]


@dataclass(frozen=True)
class Matmul:
    a: Expr  # [M, K]
    b: Expr  # [K, N], or [N, K] with transpose_b
    transpose_b: bool


@dataclass(frozen=True)
class MatmulStage:
    """Matmuls of one size [M, K] x [K, N] sharing a tiled loop; their operands' pointwise
    producers are the prologue, the stores (at [M, N]) the epilogue."""

    m: int
    n: int
    k: int
    matmuls: tuple[Matmul, ...]
    stores: tuple[Store, ...]


@dataclass(frozen=True)
class RowOp:
    cls: str  # rmsnorm | softmax | mean | layernorm | topk_values | topk_indices
    x: Expr
    w: Expr | None = None
    eps: float = 1e-6
    b: Expr | None = None  # layernorm's bias


@dataclass(frozen=True)
class RowStage:
    """Row ops over the last axis of `shape`, one row at a time: their reductions in order,
    then one pass that stores (the row ops' pointwise neighbours ride along)."""

    shape: Shape
    rows: tuple[RowOp, ...]
    stores: tuple[Store, ...]
    # on a GPU: row op number → the scratch parameter its stable sort works in (cuda/sort.py)
    sorts: tuple[tuple[int, str], ...] = ()

    @property
    def row_count(self) -> int:
        return prod(self.shape[:-1])


@dataclass(frozen=True)
class AbsMax:
    """The first pass of a quantized read: max |value| / 127 into the one-element `scale`."""

    scale: str
    value: Expr


@dataclass(frozen=True)
class Gemm:
    """A library's matmul (codegen/render/extern.py): parameter `c` [m, n] = op(`a`) @ op(`b`), where
    `a` holds [m, k] (or [k, m] when `ta`) and `b` holds [k, n] (or [n, k] when `tb`); with
    `a_at` (offset, leading dimension) the block of `a`'s buffer that element (r, s) of what
    it holds is at offset + r * ld + s (a view, render/views.py), else the whole buffer; `b_at` alike."""

    a: str
    ta: bool
    b: str
    tb: bool
    c: str
    m: int
    n: int
    k: int
    a_at: tuple[int, int] | None = None
    b_at: tuple[int, int] | None = None


@dataclass(frozen=True)
class BatchedMatmulStage:
    """`bmm`s of one size [B, M, K] x [B, K, N] sharing a loop (codegen/render/batched.py); the
    stores (at [B, M, N]) are the epilogue, as in a matmul stage."""

    batch: int
    m: int
    n: int
    k: int
    matmuls: tuple[Matmul, ...]
    stores: tuple[Store, ...]


@dataclass(frozen=True)
class GroupedMatmulStage:
    """A `grouped_matmul` [M, K] x [E, K, N] (codegen/render/grouped.py): expert e's rows of A,
    offsets[e − 1] .. offsets[e], times B[e]; `offsets` is read as integers. The stores (at
    [M, N]) are the epilogue, as in a matmul stage."""

    m: int
    n: int
    k: int
    experts: int
    matmul: Matmul
    offsets: Expr
    stores: tuple[Store, ...]

    @property
    def matmuls(self) -> tuple[Matmul, ...]:
        return (self.matmul,)


@dataclass(frozen=True)
class ScatterStage:
    """`put_along` as a scatter (codegen/lowering/window.py): parameter `param` already holds x (a
    pointwise stage before it copied x there, or it is x's own buffer: see Param.alias); then
    one pass over the index's shape, its lines (the index without `put.axis`) in any order
    and each line's entries in order along the axis, puts at each entry the source there (or
    the value) where the entry names, so the last entry naming a place wins. O(index), not
    O(x · taps)."""

    param: str
    put: PutAlong

    @property
    def shape(self) -> Shape:
        """The index's shape: the pass's domain."""
        return self.put.index.shape

    @property
    def lines(self) -> int:
        return prod(self.shape) // self.put.taps if self.put.taps else 0


@dataclass(frozen=True)
class AttentionStage:
    """Attention's chain (codegen/lowering/attention.py): a bmm stage, the row and pointwise stages
    over its result, and the bmm stage that reads them, run per batch index and tile of rows
    as one stage; `local` are the scratch parameters between them, which live in the tile."""

    stages: tuple  # (BatchedMatmulStage, RowStage | Pointwise, ..., BatchedMatmulStage)
    local: tuple[str, ...]


Stage = Union[Pointwise, MatmulStage, RowStage, AbsMax, Gemm, BatchedMatmulStage, GroupedMatmulStage, AttentionStage,
              ScatterStage]


# -- the kernel --------------------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    """A kernel argument. Roles: `in` (a tensor read, already resident), `out` (a tensor the
    group writes for others), `scratch` (lives for one launch), `scale` (a quantized read's
    scale), `local` (a fused fold's operand: the partial of the chip the kernel runs on).
    `alias`: the parameter whose buffer this one is, reshaped (a put_along written in place
    into its x, an input that only it reads; a reshape of a put_along: lowering/lower.py)."""

    name: str
    role: str
    shape: Shape
    dtype: str
    tensor: str | None = None
    local: tuple[tuple[int, str], ...] = ()  # chip → tensor, for role local
    alias: str | None = None

    @property
    def buffer_shape(self) -> Shape:
        return self.shape or (1,)


@dataclass(frozen=True)
class Kernel:
    group: str
    members: tuple[str, ...]
    place: str
    params: tuple[Param, ...]
    stages: tuple[Stage, ...]
    # expression (or stored parameter's name) -> the member statement it computes: lets a
    # compiler's error on a line of the rendered source name the statement (codegen/cuda/nvvm.py)
    origins: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def kind(self) -> str:
        """A short description: the stage kinds in order, e.g. `matmul` or `row+pointwise`."""
        names = {Pointwise: "pointwise", MatmulStage: Ops.MATMUL.value, RowStage: "row", AbsMax: "absmax", Gemm: "gemm",
                 BatchedMatmulStage: Ops.BMM.value, GroupedMatmulStage: Ops.GROUPED_MATMUL.value,
                 AttentionStage: "attention", ScatterStage: "scatter"}
        return "+".join(names[type(s)] for s in self.stages)

    def param(self, name: str) -> Param:
        return next(p for p in self.params if p.name == name)

    @property
    def work(self) -> int:
        """Rough element operations, to decide whether threads pay off."""
        total = 0
        for s in [x for st in self.stages for x in (st.stages if isinstance(st, AttentionStage) else (st,))]:
            if isinstance(s, MatmulStage):
                total += s.m * s.n * s.k * len(s.matmuls)
            elif isinstance(s, Gemm):
                total += s.m * s.n * s.k
            elif isinstance(s, BatchedMatmulStage):
                total += s.batch * s.m * s.n * s.k * len(s.matmuls)
            elif isinstance(s, GroupedMatmulStage):
                total += s.m * s.n * s.k
            elif isinstance(s, ScatterStage):
                total += prod(s.shape)
            elif isinstance(s, (Pointwise, RowStage)):
                total += prod(s.shape) * (1 + len(getattr(s, "rows", ())) * 2)
            else:
                total += prod(s.value.shape)
        return total
