"""The common case of well-formedness, settled on encoded columns.

The checkers in wellformed.py walk the facts in file order so that they name the first
offending line; on a model-sized program that walk costs more than judging it. These
guards decide with vectorised set arithmetic whether a program is well-formed; only a
program that fails one gets the precise walk, which then raises with file:line.
"""

from __future__ import annotations

import numpy as np

from ..datalog.facts.columns import Columns, unique
from ..ops import Ops
from .schema import DTYPES

I64 = np.int64


def _sorted_unique(values: np.ndarray) -> np.ndarray:
    values = np.sort(values)
    if len(values) < 2:
        return values
    return values[np.concatenate(([True], values[1:] != values[:-1]))]


def _distinct(values: np.ndarray) -> bool:
    return len(_sorted_unique(values)) == len(values)


def _within(values: np.ndarray, allowed: np.ndarray) -> bool:
    """Every value is among `allowed` (sorted, distinct)."""
    if not len(values):
        return True
    if not len(allowed):
        return False
    position = np.minimum(np.searchsorted(allowed, values), len(allowed) - 1)
    return bool(np.all(allowed[position] == values))


def _pairs_distinct(a: np.ndarray, b: np.ndarray) -> bool:
    if len(a) < 2:
        return True
    span = int(b.max()) - int(b.min()) + 1
    return _distinct((a - int(a.min())) * span + (b - int(b.min())))


def statements_look_fine(c: Columns) -> bool:
    op = c["op"]
    stmts = _sorted_unique(op[:, 0])
    if len(stmts) != len(op):
        return False
    registry = c["registry"]
    if len(registry) and not _within(op[:, 1], _sorted_unique(registry[:, 0])):
        return False
    for rel, col in (("reads", 0), ("writes", 0), ("attr", 0), ("fold", 0), ("member", 1), ("section", 1)):
        if not _within(c[rel][:, col], stmts):
            return False
    writes = c["writes"]
    if len(writes) != len(op) or not _distinct(writes[:, 0]) or not _distinct(writes[:, 1]):
        return False
    reads = c["reads"]
    if len(reads) and (int(reads[:, 1].min()) < 0 or not _pairs_distinct(reads[:, 0], reads[:, 1])):
        return False
    # Operands numbered 0..n-1: n distinct indexes per statement whose largest is n - 1.
    where = np.searchsorted(stmts, reads[:, 0])
    count = np.bincount(where, minlength=len(stmts))
    top = np.full(len(stmts), -1, dtype=I64)
    np.maximum.at(top, where, reads[:, 1])
    if not np.array_equal(top, count - 1):
        return False
    if len(registry):  # the registry's operand count (0: any number, at least one)
        classes, first = unique(registry[:, 0], return_index=True)
        want_of_class = registry[first, 2]
        want = np.empty(len(stmts), dtype=I64)
        want[np.searchsorted(stmts, op[:, 0])] = want_of_class[np.searchsorted(classes, op[:, 1])]
        if np.any(np.where(want > 0, count != want, count == 0)):
            return False
    return True


def tensors_look_fine(c: Columns) -> bool:
    tensor, chips = c["tensor"], c["chips"]
    declared = _sorted_unique(tensor[:, 0])
    if len(declared) != len(tensor) or not _within(tensor[:, 1], c.symbols.known(DTYPES)) or len(chips) != 1:
        return False
    n = int(chips[0, 0])
    placed, spine = c["placed"], c["spine"][:, 0]
    if n < 1 or not _distinct(placed[:, 0]) or np.any((placed[:, 1] < 0) | (placed[:, 1] >= n)):
        return False
    homed = np.concatenate([placed[:, 0], spine])
    if not _distinct(homed):
        return False
    bound = np.concatenate([c["reads"][:, 2], c["writes"][:, 1]])
    if not _within(bound, declared) or not _within(bound, _sorted_unique(homed)):
        return False
    relocated = c["relocated"]
    return not np.any((relocated[:, 1] < 0) | (relocated[:, 1] >= n))


def non_folds_bind_one_chip(c: Columns) -> bool:
    """Each statement other than a fold binds tensors of one chip at most."""
    placed = c["placed"]
    chip_of = np.full(len(c.symbols.names) + 1, -1, dtype=I64)
    chip_of[placed[:, 0]] = placed[:, 1]
    reads, writes = c["reads"], c["writes"]
    stmts = np.concatenate([writes[:, 0], reads[:, 0]])
    chips = chip_of[np.concatenate([writes[:, 1], reads[:, 2]])]
    folds = _sorted_unique(c["fold"][:, 0])
    keep = chips >= 0
    if len(folds):
        position = np.minimum(np.searchsorted(folds, stmts), len(folds) - 1)
        keep &= folds[position] != stmts
    stmts, chips = stmts[keep], chips[keep]
    if not len(stmts):
        return True
    pairs = _sorted_unique((stmts - int(stmts.min())) * (int(chips.max()) + 1) + chips)
    return len(pairs) == len(_sorted_unique(stmts))


def folds_look_fine(c: Columns) -> bool:
    """Each fold is a sum that reads one chip tensor of every chip and writes a spine tensor."""
    fold = c["fold"]
    if not len(fold):
        return True
    if len(c["collective"]):
        return False  # a kind per collective (an all-gather's fold is a cat): checked line by line
    folds = _sorted_unique(fold[:, 0])
    op, reads, writes, placed = c["op"], c["reads"], c["writes"], c["placed"]
    is_fold = np.zeros(len(c.symbols.names) + 1, dtype=bool)
    is_fold[folds] = True
    sums = op[is_fold[op[:, 0]]]
    if len(sums) != len(folds) or np.any(sums[:, 1] != c.symbols.one(Ops.SUM.value)):
        return False
    chip_of = np.full(len(c.symbols.names) + 1, -1, dtype=I64)
    chip_of[placed[:, 0]] = placed[:, 1]
    n = int(c["chips"][0, 0])
    read = reads[is_fold[reads[:, 0]]]
    chips = chip_of[read[:, 2]]
    if np.any(chips < 0) or len(read) != n * len(folds) or not _pairs_distinct(read[:, 0], chips):
        return False
    written = writes[is_fold[writes[:, 0]], 1]
    return len(written) == len(folds) and not np.any(chip_of[written] >= 0)


def candidates_look_fine(c: Columns) -> bool:
    """Every candidate fusion has at least two members."""
    fusions = c["member"][:, 0]
    if not len(fusions):
        return True
    _, counts = unique(fusions, return_counts=True)
    return bool(np.all(counts >= 2))
