"""How the program (program/model.py `Program`) is read off its columns without an object
per statement: ids for rows of integers, spans of one flat list, and mappings that make
objects only when asked.

- `Signatures`: per statement and per tensor, ids equal exactly when what they stand for
  is equal (a tensor's shape and dtype; a statement's class, attributes, quantized reads,
  fold and output), found by sorting rows of integers (`row_ids`, `sequence_ids`);
- `_Position`, `_Tensors`, `_Readers`: the program's `position`, `tensors` and `readers`,
  looked up through the symbol table, each object made on first use.

Attributes that only say where a statement came from (`PROVENANCE`: an imported model's
module path and ATen op) are left out of the signatures: no class, shape rule or kernel
reads them, and keeping them would make every layer's statements differ.

>>> row_ids(np.array([3, 1, 3]), np.array([0, 0, 0])).tolist()
[1, 0, 1]
>>> sequence_ids(np.array([0, 0, 2]), np.array([[5], [6], [5]]), 3).tolist()  # owner 1 owns nothing
[2, 0, 1]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..datalog.facts.columns import distinct
from .records import Tensor

I64 = np.int64
PROVENANCE = ("module", "aten")  # attributes no class reads: where an imported statement came from


def sequence_ids(owner: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """An id for each owner 0..n-1: the sequence of `values` rows (2-D, one per owner entry)
    it owns, in the order given (equal sequences, equal ids; no rows: the empty sequence)."""
    counts = np.bincount(owner, minlength=n)
    width = int(counts.max()) if len(owner) else 0
    cols = values.shape[1]
    table = np.full((1 + width * cols, n), -1, dtype=I64)  # one column per owner
    table[0] = counts
    if len(owner):
        order = np.argsort(owner, kind="stable")
        o = owner[order]
        rank = np.arange(len(o)) - (np.cumsum(counts) - counts)[o]
        for j in range(cols):
            table[1 + rank * cols + j, o] = values[order, j]
    return row_ids(*table)


def row_ids(*columns: np.ndarray) -> np.ndarray:
    """An id per row of these equal-length columns: equal rows, equal ids."""
    n = len(columns[0])
    if n == 0:
        return np.zeros(0, dtype=I64)
    order = np.lexsort(columns[::-1])
    change = np.zeros(n, dtype=bool)
    for c in columns:
        c = c[order]
        change[1:] |= c[1:] != c[:-1]
    ids = np.empty(n, dtype=I64)
    ids[order] = np.cumsum(change)
    return ids


def first_reads(reader: np.ndarray, read: np.ndarray) -> np.ndarray:
    """For each read (rows grouped by reader, in operand order): which of its reader's
    distinct operands it is, in order of first read (`x * x` reads 0, 0; `x * y` 0, 1)."""
    n = len(reader)
    if n == 0:
        return np.zeros(0, dtype=I64)
    entry = np.arange(n, dtype=I64)
    order = np.lexsort((entry, read, reader))  # each (reader, tensor) together, first read first
    r, t = reader[order], read[order]
    starts = np.concatenate(([True], (r[1:] != r[:-1]) | (t[1:] != t[:-1])))
    first = np.empty(n, dtype=I64)
    first[order] = entry[order][np.maximum.accumulate(np.where(starts, np.arange(n), 0))]
    heads = distinct(first)  # the first read of each distinct operand, in entry order (so by reader)
    head_reader = reader[heads]
    rank = np.arange(len(heads)) - np.searchsorted(head_reader, head_reader)
    return rank[np.searchsorted(heads, first)]


class Spans(Sequence):
    """Tuples cut from one flat list, made when read: item k is `flat[ends[k - 1]:ends[k]]`."""

    def __init__(self, flat: list[int], ends: list[int]):
        self.flat, self.ends = flat, ends

    def __len__(self) -> int:
        return len(self.ends)

    def __getitem__(self, k: int) -> tuple[int, ...]:  # type: ignore[override]  # by index only, no slices
        ends = self.ends
        if k < 0:
            k += len(ends)
        if not 0 <= k < len(ends):
            raise IndexError(k)
        return tuple(self.flat[ends[k - 1] if k else 0:ends[k]])


@dataclass(frozen=True)
class Signatures:
    statement: list[int]  # per statement: class, attributes, quantized reads, fold, output shape and dtype
    tensor: list[int]  # per tensor (its index in `Program.tensor_names`): shape and dtype
    writes: list[int]  # per statement: the tensor it writes
    reads: Sequence[tuple[int, ...]]  # per statement: the tensors it reads, in operand order
    readers: Sequence[tuple[int, ...]]  # per tensor: the statements that read it, in program order
    checked: np.ndarray  # per statement: its signature and its operands' shapes (what its shape check sees)
    alone: list[int]  # per statement: its signature and its operands' shapes, repeated operands as such (its kernel alone)


def _through_symbols(view, by_symbol: np.ndarray, name: str) -> int:
    """A name's index in `by_symbol` (symbol id → index, -1 for none): no dict is built."""
    i = view._ids.get(name)  # `get`: looking up interns nothing
    k = int(by_symbol[i]) if i is not None else -1
    if k < 0:
        raise KeyError(name)
    return k


class _Position(Mapping):
    """statement → its index in program order."""

    def __init__(self, view):
        self.view = view

    def __getitem__(self, name: str) -> int:
        return _through_symbols(self.view, self.view.at, name)

    def __iter__(self):
        return iter(self.view.names)

    def __len__(self) -> int:
        return len(self.view.names)


class _Tensors(Mapping):
    """tensor → its `Tensor`, made on first use."""

    def __init__(self, view):
        self.view = view

    def index(self, name: str) -> int:
        return _through_symbols(self.view, self.view.tix, name)

    def __getitem__(self, name: str) -> Tensor:
        return self.view.tensor_at(self.index(name))

    def __iter__(self):
        return iter(self.view.tensor_names)

    def __len__(self) -> int:
        return len(self.view.tensor_names)


class _Readers(Mapping):
    """tensor → the statements that read it, in program order (only tensors someone reads)."""

    def __init__(self, view):
        self.view = view

    def __getitem__(self, name: str) -> tuple[str, ...]:
        try:
            found = self.view.signatures.readers[self.view.tensors.index(name)]
        except KeyError:
            found = ()
        if not found:
            raise KeyError(name)
        return tuple(self.view.names[k] for k in found)

    def __iter__(self):
        view = self.view
        return (view.tensor_names[t] for t, rs in enumerate(view.signatures.readers) if rs)

    def __len__(self) -> int:
        return sum(1 for rs in self.view.signatures.readers if rs)
