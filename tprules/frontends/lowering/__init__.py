"""The op table: the traced program's ATen ops as statements of registry classes, in order.

    table.py        the registry: `lowering` registers a function by its op's name; OpTable, Lowerings
    arithmetic.py   add, sub, mul, div, the unary classes, powers, clamps, where
    compare.py      comparisons and logical ops
    matmul.py       embedding, mm, bmm, a convolution as conv1d
    reductions.py   means, sums, maxima, softmax, layer norm, norms, running sums over any axes
    layout.py       views, permutes, expands, slices, cat, repeat, select, casts
    items.py        ops of several results (split, topk, max.dim) and each item a getitem reads
    fills.py        constant fills, padding, writes into a slice
    indexed.py      gather, scatter, index, index_put, index_copy
    grouped.py      transformers' grouped experts: sort, histc, grouped_mm
    complex_pairs.py  complex rotary as real pairs (overrides mul and the layout ops)
    positions.py    a decode step's functions of the position, tabulated
    aten.py         the op table: every module above, built into one `OpTable` (ops.txt lists its ops)
    walk.py         the Lowerer: walks the traced program in order through the table into a `Graph`
"""
