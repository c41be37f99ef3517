"""The op table's registry, shared by its modules (aten.py, aten_more.py, aten_complex.py;
aten_indexed.py returns its own table): the table itself, the `lowering` decorator, the
dtypes, and the helpers more than one module's lowerings call."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Callable

SUM_SLICES = 64  # a sum over one axis of at most this size is slices and an n-ary sum


@dataclass
class OpTable:
    """ATen op → its lowering, and the ops the lowerer treats apart, being filled by
    `aten.build_table()` (no module-level table filled in import order). `frozen()` is the
    read-only `Lowerings` a process shares and the lowerer reads."""

    ops: dict[object, Callable] = field(default_factory=dict)
    skip: set = field(default_factory=set)  # ops that compute nothing (assertions)
    cat: set = field(default_factory=set)  # ops that may read an empty tensor (they drop it)

    def lowering(self, *ops):
        """A decorator: the function lowers each of `ops`."""
        def register(fn):
            for op in ops:
                self.ops[op] = fn
            return fn
        return register

    def frozen(self) -> "Lowerings":
        return Lowerings(MappingProxyType(dict(self.ops)), frozenset(self.skip), frozenset(self.cat))


@dataclass(frozen=True)
class Lowerings:
    """An op table, read-only (what `OpTable.frozen` gives)."""

    ops: Mapping[object, Callable]
    skip: frozenset
    cat: frozenset


# torch dtype → tensor dtype; a boolean is kept as an i8 0 or 1
DTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "int64": "i64", "int32": "i32", "int8": "i8",
          "bool": "i8"}


def arg(n, i: int, key: str, default=None):
    """Argument `i` of a node, given by position or by name."""
    return n.args[i] if len(n.args) > i else n.kwargs.get(key, default)


def over_axes(ctx, n, x, dims, keepdim: bool, reduce: str) -> None:
    """A reduction over `dims` of x as the row classes compute it: the reduced axes permuted
    last and merged into one, the row class, then the result's own shape. `reduce` is
    `amax` (the class), `argmax` (the top-1 index: the first of equal maxima, as torch),
    `mean`, or `sum` (a mean times the row's length)."""
    from math import prod

    shape = ctx.shape(x)
    rank = len(shape)
    if ctx.dtype(x) not in ("f32", "f16", "bf16"):
        ctx.unsupported(n, f"a {reduce} of {ctx.dtype(x)} tensors (the row classes compute in floats)")
    axes = sorted({d % rank for d in dims}) if dims else list(range(rank))
    keep = [a for a in range(rank) if a not in axes]
    lead, h = [shape[a] for a in keep], prod(shape[a] for a in axes)
    v, moved = x, ctx.dtype(x)  # the layout parts move x's elements as they are
    if keep + axes != list(range(rank)):
        v = ctx.part(n, "last", "permute", [v], [shape[a] for a in keep + axes], moved,
                     dims=",".join(map(str, keep + axes)))
    if len(axes) != 1:
        v = ctx.part(n, "rows", "reshape", [v], lead + [h], moved)
    if reduce == "amax":
        v = ctx.part(n, "amax", "amax", [v], lead + [1])
    elif reduce == "argmax":
        v = ctx.part(n, "argmax", "topk_indices", [v], lead + [1], k=1)
    else:
        v = ctx.part(n, "mean", "mean", [v], lead + [1])
        if h != 1 and reduce == "sum":
            v = ctx.part(n, "total", "scale", [v], lead + [1], factor=repr(float(h)))
    del keepdim  # the node's own shape says how the result is kept
    if tuple(lead + [1]) == ctx.shape(n):
        return ctx.alias(n, v)
    ctx.emit(n, "reshape", [v])
