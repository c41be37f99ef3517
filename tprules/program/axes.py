"""The axis groups of a reshape: which axes of the source make up which axes of the result.
The sharding table (frontends/sharding/table.py) and the layout lowering (codegen/lowering/layout.py)
both walk them."""

from __future__ import annotations


def axis_groups(shape, out) -> list[tuple[list[int], list[int]]]:
    """A reshape of `shape` into `out` as pairs (axes of `shape`, axes of `out`) whose sizes
    multiply to the same number, in order; an axis of size 1 of `shape` is a pair of its own
    with no axis of `out`, and one of `out` belongs to no pair.

    >>> axis_groups((2, 6), (2, 3, 2))
    [([0], [0]), ([1], [1, 2])]
    >>> axis_groups((1, 4), (4,))
    [([0], []), ([1], [0])]
    """
    groups: list[tuple[list[int], list[int]]] = []
    i, j = 0, 0
    while i < len(shape) or j < len(out):
        if i < len(shape) and shape[i] == 1:
            groups.append(([i], []))
            i += 1
            continue
        if j < len(out) and out[j] == 1:
            j += 1
            continue
        into, outof, a, b = [i], [j], shape[i], out[j]
        i, j = i + 1, j + 1
        while a != b:
            if a < b:
                into.append(i)
                a *= shape[i]
                i += 1
            else:
                outof.append(j)
                b *= out[j]
                j += 1
        groups.append((into, outof))
    return groups
