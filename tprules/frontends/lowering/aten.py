"""The op table: each core ATen op, one small function that writes its node as a statement
of a registry class (docs/classes.md), or says the node is another value (a view to its own
shape, a clone). An op not in the table is one error naming the architecture, the op, the
module path, and what is missing (table.MISSING, raised by walk.py).

The lowerings live in modules by kind of op, each registering its functions by the op's
name (table.py's `lowering`); ops.txt lists every op the table holds, sorted:

    arithmetic   add, sub, mul, div, the unary classes, clamps, where
    compare      comparisons and logical ops, as the classes greater and greater_equal
    matmul       embedding, mm, bmm, a convolution as conv1d
    reductions   means, sums, maxima, softmax, norms, running sums over any axes
    layout       views, permutes, slices, cat, repeat, select, casts
    items        ops of several results (split, topk, max.dim) and the getitem of each
    fills        constant fills, padding, writes into a slice (copy, slice_scatter)
    indexed      gather, scatter, index, index_put, index_copy
    grouped      transformers' grouped experts: sort, histc, grouped_mm
    complex_pairs complex rotary as real pairs (it overrides mul and the layout ops)
    positions    a decode step's functions of the position, tabulated
"""

from __future__ import annotations

from functools import cache

from . import arithmetic, compare, complex_pairs, fills, grouped, indexed, items, layout, matmul, positions, reductions
from .table import REGISTRY, Lowerings, OpTable, resolve

MODULES = (arithmetic, compare, matmul, reductions, layout, items, fills, indexed, grouped, complex_pairs, positions)

# ops that compute nothing: assertions of a shape or a value, no statement
SKIP = ("aten._assert_tensor_metadata.default", "aten._assert_scalar.default", "aten.sym_constrain_range_for_size.default")


@cache
def op_table() -> Lowerings:
    """The op table every import reads: built on first use, read-only."""
    return build_table().frozen()


def build_table() -> OpTable:
    """A new op table, filled from the registry: every module of MODULES's lowerings, each
    op found in torch by its name (an optional op this torch lacks has no entry)."""
    table = OpTable()
    table.skip.update(resolve(name) for name in SKIP)
    for registration in REGISTRY.entries.values():
        op = resolve(registration.name, registration.optional, registration.loads)
        if op is None:
            continue
        table.ops[op] = registration.fn
        if registration.reads_empty:
            table.cat.add(op)
    return table
