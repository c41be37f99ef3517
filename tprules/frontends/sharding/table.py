"""The sharding table: one record per registry class (`tprules.ops`'s `Ops`), saying how
placements flow through it (DTensor's sharding rules, for the classes an import writes),
as the op table says how each ATen op lowers. A class without a record fails at import, as
`ops` does; a name that is no class has no rule (`entry` raises), never a default one.

A record's columns:

- `rule`: the operands' placements and whole shapes → the result's placement, or
  `NotShardable` (rules.py, views.py);
- `linear`: linear in a partial operand, the others replicated (`"one"`, `"first"`: only the
  first operand partial, `"all"`: every operand partial): a sum of partials taken through
  where a style keeps the partial to its module's boundary (moe_tp_experts' one all-reduce);
- `partial_view`: a partial operand reaches the rule (a sum of partials viewed another way is
  the view of the sum); for every other class the Sharder first folds it (the all-reduce);
- `blockwise`: its operands are cut alike on every axis (an elementwise class's) or on every
  axis but one (a cat's, a gather's or scatter's along its axis): a replicated operand as wide
  as a split one there may be each chip's own block of it (the Sharder's local slices);
- `local_attrs`: a chip's attributes where its statement differs from the whole one (a slice
  of packed parts, a vocabulary-parallel embedding's row offset);
- `by_expert`: how it may read an experts module's weights split by expert under the EP plan
  (dispatch.py): by expert id (`"ids"`, take_rows) or by its groups' offsets (`"groups"`);
- `ids_through`: the operand whose expert ids its result still holds (a view's, a cast's, a
  sort's values: put_along's source), as dispatch.py follows the router's ids;
- `bias`: a replicated bias added to a partial sum stays partial (torch's rowwise linear:
  each chip adds 1 / N of it, so that the output's collective comes after the add).

>>> from .placement import REPLICATE, Shard, Split
>>> str(rule("matmul")({}, [REPLICATE, Shard((Split(0, 2, 32),))], [(8, 64), (32, 64)], (8, 32), 2, transpose_b=True))
'Shard(axis 1 in 2)'
>>> entry("transpose").rule is elementwise
False
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal, assert_never

from ...ops import Ops, require
from .placement import Partial, Placement, Replicate
from .rules import (
    CutInside,
    NotShardable,
    along,
    bmm,
    conv1d,
    elementwise,
    embedding,
    embedding_local_attrs,
    grouped_matmul,
    matmul,
    row,
    take_rows,
)
from .views import cat, expand, permute, reshape, slice_, slice_local_attrs, transpose

Rule = Callable[..., Placement]
LocalAttrs = Callable[..., Callable[[int], dict[str, str]] | None]
Linear = Literal["one", "first", "all"]


@dataclass(frozen=True)
class Sharding:
    """How placements flow through one class (the module's doc says each column)."""

    rule: Rule
    linear: Linear | None = None
    partial_view: bool = False
    blockwise: bool = False
    local_attrs: LocalAttrs | None = None
    by_expert: Literal["ids", "groups"] | None = None
    ids_through: int | None = None
    bias: bool = False


def _elementwise(linear: Linear | None = None, ids_through: int | None = None, bias: bool = False) -> Sharding:
    return Sharding(elementwise, linear=linear, blockwise=True, ids_through=ids_through, bias=bias)


_ROW = Sharding(row)

# Every class, in registry order.
TABLE: dict[str, Sharding] = require({
    Ops.MATMUL: Sharding(matmul),
    Ops.ADD: _elementwise("all", bias=True),
    Ops.SUB: _elementwise("all"),
    Ops.MUL: _elementwise("one"),
    Ops.DIV: _elementwise("first"),
    Ops.SUM: _elementwise("all"),
    Ops.NEG: _elementwise("one"),
    Ops.EXP: _elementwise(),
    Ops.RELU: _elementwise(),
    Ops.SILU: _elementwise(),
    Ops.RSQRT: _elementwise(),
    Ops.GELU: _elementwise(),
    Ops.SCALE: _elementwise("one"),
    Ops.CAST: _elementwise("one", ids_through=0),
    Ops.RMSNORM: _ROW,
    Ops.SOFTMAX: _ROW,
    Ops.TRANSPOSE: Sharding(transpose),
    Ops.BMM: Sharding(bmm),
    Ops.POW: _elementwise(),
    Ops.ADD_SCALAR: _elementwise(),
    Ops.SIGMOID: _elementwise(),
    Ops.TANH: _elementwise(),
    Ops.GELU_ERF: _elementwise(),
    Ops.MEAN: _ROW,
    Ops.LAYERNORM: _ROW,
    Ops.RESHAPE: Sharding(reshape, linear="one", partial_view=True, ids_through=0),
    Ops.PERMUTE: Sharding(permute, linear="one", partial_view=True, ids_through=0),
    Ops.EXPAND: Sharding(expand, linear="one", ids_through=0),
    Ops.SLICE: Sharding(slice_, linear="one", local_attrs=slice_local_attrs, ids_through=0),
    Ops.CAT: Sharding(cat, blockwise=True),
    Ops.EMBEDDING: Sharding(embedding, local_attrs=embedding_local_attrs),
    Ops.EXPM1: _elementwise(),
    Ops.MINIMUM: _elementwise(),
    Ops.GREATER: _elementwise(),
    Ops.WHERE: _elementwise(),
    # the grouped form's rows put back in token order: rows of a sum are the sum of the rows
    Ops.TAKE_ROWS: Sharding(take_rows, linear="first", by_expert="ids"),
    Ops.TOPK_VALUES: _ROW,
    Ops.TOPK_INDICES: _ROW,
    Ops.GREATER_EQUAL: _elementwise(),
    Ops.LOG1P: _elementwise(),
    Ops.CLAMP: _elementwise(ids_through=0),
    Ops.AMAX: _ROW,
    Ops.CONV1D: Sharding(conv1d),
    Ops.LOG: _elementwise(),
    Ops.TAKE_ALONG: Sharding(along, blockwise=True),
    Ops.PUT_ALONG: Sharding(along, blockwise=True, ids_through=2),  # a sort's values: its source
    Ops.GROUPED_MATMUL: Sharding(grouped_matmul, by_expert="groups"),
    Ops.SORT_RANK: _ROW,
}, set(Ops), "the sharding table")
if len(TABLE) != len(Ops):
    raise ImportError(f"the sharding table has entries for {len(TABLE) - len(Ops)} names that are not classes")


def entry(cls: str) -> Sharding:
    """The record of a class; KeyError for a name that is no registry class (no default rule)."""
    found = TABLE.get(cls)
    if found is None:
        raise KeyError(f"the sharding table has no class {cls!r}")
    return found


def rule(cls: str) -> Rule:
    return entry(cls).rule


def partial_through(cls: str, ins) -> bool:
    """Whether a statement of `cls` over these placements is linear in its partial operands."""
    how = entry(cls).linear
    partial = [isinstance(p, Partial) for p in ins]
    if how is None or not any(partial):
        return False
    others = [p for p, is_partial in zip(ins, partial) if not is_partial]
    if how == "all":
        return all(partial)
    if how == "first":
        return partial[0] and sum(partial) == 1 and all(isinstance(p, Replicate) for p in others)
    if how == "one":
        return sum(partial) == 1 and all(isinstance(p, Replicate) for p in others)
    assert_never(how)


__all__ = ["TABLE", "CutInside", "NotShardable", "Sharding", "entry", "partial_through", "rule"]
