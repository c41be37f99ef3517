"""What the kernels of many groups depend on, found at once with numpy (the cost model's cache key).

`KernelCost._shape_key` says, for one group, what its kernel depends on without names: per
member in program order its signature, where each operand comes from (a member, by its
index in the group, or outside: numbered by order of first read, with its tensor's
signature) and whether its output is read outside the group. `shape_keys` writes the same
for many groups as one int64 sequence each:

    per member:  signature, read outside (0/1), then per operand two numbers:
                 (index of the member writing it, -1) or (-1 - its outside number, tensor signature)

A statement's signature fixes how many operands it has, so a sequence reads back in one way
only: two groups have equal sequences exactly when `_shape_key` gives them equal keys, and
the bytes of the sequence can stand for that key.

>>> from tprules.workspace import Workspace
>>> view = Workspace("facts/megatron-mlp-tp2").tensor_program
>>> at = [view.position[o] for o in ("mm1_0", "gelu_0", "mm1_1", "gelu_1", "mm1_0", "mm2_0")]
>>> keys = shape_keys(view, np.array([0, 0, 1, 1, 2, 2]), np.array(at))
>>> keys[0] == keys[1], keys[0] == keys[2]  # each chip's matmul and GELU, and a matmul with a later one
(True, False)
"""

from __future__ import annotations

import numpy as np

from ..program.view import first_reads

I64 = np.int64


def shape_keys(view, owner: np.ndarray, members: np.ndarray) -> list[bytes]:
    """A key per group 0..max(owner): rows (group, statement position), sorted by group and
    then by statement (each group's members in program order)."""
    statement, writes, tensor, read_start, read, reader_start, reader = view.operand_table
    n = max(len(view), 1)
    rows = len(owner)
    if not rows:
        return []
    groups = int(owner[-1]) + 1
    group_start = np.searchsorted(owner, np.arange(groups + 1))
    rank = np.arange(rows, dtype=I64) - group_start[owner]
    key = owner * n + members  # sorted: a statement's row in its group by binary search
    writer = np.full(len(tensor), -1, dtype=I64)
    writer[writes] = np.arange(len(writes), dtype=I64)

    def rank_in_group(group: np.ndarray, s: np.ndarray) -> np.ndarray:
        """The index in `group` of statement `s` (-1 for none)."""
        probe = group * n + s
        at = np.minimum(np.searchsorted(key, probe), rows - 1)
        return np.where((s >= 0) & (key[at] == probe), rank[at], -1)

    # operands, one row each: its member's row and the tensor read
    count = read_start[members + 1] - read_start[members]
    op_row = np.repeat(np.arange(rows, dtype=I64), count)
    op_slot = np.arange(len(op_row), dtype=I64) - np.repeat(np.cumsum(count) - count, count)
    t = read[read_start[members][op_row] + op_slot]
    inside = rank_in_group(owner[op_row], writer[t])
    first, second = inside.copy(), np.full(len(t), -1, dtype=I64)
    out = np.flatnonzero(inside < 0)
    if len(out):
        first[out] = -1 - first_reads(owner[op_row[out]], t[out])
        second[out] = tensor[t[out]]
    # whether a member's output is read outside its group (or not at all)
    written = writes[members]
    readers = reader_start[written + 1] - reader_start[written]
    by_row = np.repeat(np.arange(rows, dtype=I64), readers)
    r_slot = np.arange(len(by_row), dtype=I64) - np.repeat(np.cumsum(readers) - readers, readers)
    r = reader[reader_start[written][by_row] + r_slot]
    away = np.bincount(by_row[rank_in_group(owner[by_row], r) < 0], minlength=rows)
    escapes = (readers == 0) | (away > 0)
    # the sequence: per member 2 + 2 * operands numbers
    width = 2 + 2 * count
    at = np.cumsum(width) - width
    seq = np.empty(int(width.sum()), dtype=I64)
    seq[at] = statement[members]
    seq[at + 1] = escapes
    o = at[op_row] + 2 + 2 * op_slot
    seq[o] = first
    seq[o + 1] = second
    buf = seq.tobytes()
    ends = np.append(at, len(seq))[group_start] * 8
    bounds = ends.tolist()
    return [buf[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
