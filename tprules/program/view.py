"""A loaded program as codegen reads it, from the encoded columns: objects made only when asked.

`RunProgram.from_workspace` builds a `Statement` and a `Tensor` for everything and checks
every statement's shape: what `run` needs. The planner's cost model needs much less: for
each statement a few small integers that say what its kernel depends on (`signatures`),
and the objects themselves only for the groups it lowers, one per distinct shape. A
`ProgramView` gives both, from the columns the loader already holds (program/columns.py):

- `statement(name)`, `position`, `tensors`, `readers`: RunProgram's interface for
  codegen (codegen/lower.py, schedule.py), each object made on first use;
- `Signatures`: per statement and per tensor, ids equal exactly when what they stand for
  is equal (a tensor's shape and dtype; a statement's class, attributes, quantized reads,
  fold and output), found by sorting rows of integers, no Python object per statement;
- `shapes_ok()`: SPEC §4's shape checks, once per distinct (signature, operand shapes). On
  any doubt it answers False, and the caller builds the RunProgram, whose checks then
  name the first bad statement's file and line exactly as they always did.

Attributes that only say where a statement came from (`PROVENANCE`: an imported model's
module path and ATen op) are left out of the signatures: no class, shape rule or kernel
reads them, and keeping them would make every layer's statements differ.

>>> from tprules.workspace import Workspace
>>> view = ProgramView(Workspace("facts/megatron-mlp-tp2").program)
>>> view.statement("gelu_0").reads, view.readers["h_0"]
(('h_0',), ('gelu_0',))
>>> sig = view.signatures  # the two chips' GELUs are the same kernel, the two matmuls of a chip are not
>>> sig.alone[view.position["gelu_0"]] == sig.alone[view.position["gelu_1"]], sig.alone[0] == sig.alone[2]
(True, False)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .columns import distinct, isin
from .model import DTYPES, Statement, Tensor, shape_problem

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
    tensor: list[int]  # per tensor (its index in `ProgramView.tensor_names`): shape and dtype
    writes: list[int]  # per statement: the tensor it writes
    reads: Sequence[tuple[int, ...]]  # per statement: the tensors it reads, in operand order
    readers: Sequence[tuple[int, ...]]  # per tensor: the statements that read it, in program order
    checked: np.ndarray  # per statement: its signature and its operands' shapes (what its shape check sees)
    alone: list[int]  # per statement: its signature and its operands' shapes, repeated operands as such (its kernel alone)


class ProgramView:
    """RunProgram's interface for codegen over a `LoadedProgram` (statement k is the k-th
    in program order); `shim` chooses the quantized reads, as in RunProgram."""

    def __init__(self, loaded):
        columns = loaded.columns
        symbols = columns.symbols
        self.text = symbols.names
        self._ids = symbols.ids
        self.shim = loaded.shim
        self.names: list[str] = list(loaded.order)
        n = len(self.names)
        self.at = np.full(len(self.text), -1, dtype=I64)  # symbol id → statement
        self.at[loaded.order_ids] = np.arange(n, dtype=I64)
        tensors = columns["tensor"]
        self.tensor_names = [self.text[t] for t in tensors[:, 0].tolist()]
        self.tix = np.full(len(self.text), -1, dtype=I64)  # symbol id → tensor index
        self.tix[tensors[:, 0]] = np.arange(len(tensors), dtype=I64)
        self.dtype = tensors[:, 1]
        ops = columns["op"]
        self.cls = np.empty(n, dtype=I64)
        self.cls[self.at[ops[:, 0]]] = ops[:, 1]
        writes = columns["writes"]
        self.out = np.empty(n, dtype=I64)
        self.out[self.at[writes[:, 0]]] = self.tix[writes[:, 1]]
        reads = columns["reads"]
        reads = reads[np.lexsort((reads[:, 1], self.at[reads[:, 0]]))]
        self._reads = (self.at[reads[:, 0]], self.tix[reads[:, 2]])  # operand order within each statement
        attrs = columns["attr"]
        attrs = attrs[np.argsort(self.at[attrs[:, 0]], kind="stable")]  # file order within each statement
        self._attrs = (self.at[attrs[:, 0]], attrs[:, 1], attrs[:, 2])
        self.fold = np.zeros(n, dtype=bool)
        self.fold[self.at[columns["fold"][:, 0]]] = True
        self._shape_rows = columns["shape"]
        self._placed = columns["placed"]
        self._quantized_rows = columns["quantized"]
        self._statements: dict[int, Statement] = {}
        self._tensors: dict[int, Tensor] = {}
        self.position = _Position(self)
        self.tensors = _Tensors(self)
        self.readers = _Readers(self)

    def __len__(self) -> int:
        return len(self.names)

    # -- RunProgram's interface ------------------------------------------------------

    def statement(self, name: str) -> Statement:
        return self.statement_at(self.position[name])

    def statement_at(self, k: int) -> Statement:
        found = self._statements.get(k)
        if found is None:
            text, sig = self.text, self.signatures
            reads = tuple(self.tensor_names[t] for t in sig.reads[k])
            cls = text[int(self.cls[k])]
            a, b = self._span(self._attr_owner, k)
            _, key, value = self._attrs
            attrs = tuple(zip([text[i] for i in key[a:b].tolist()], [text[i] for i in value[a:b].tolist()]))
            quantized = tuple(sorted((i, f) for (c, i), f in self._quantized.items() if c == cls and i < len(reads)))
            found = self._statements[k] = Statement(self.names[k], cls, reads, self.tensor_names[sig.writes[k]],
                                                    attrs, bool(self.fold[k]), quantized)
        return found

    def tensor_at(self, t: int) -> Tensor:
        found = self._tensors.get(t)
        if found is None:
            owners, sizes = self._shape_table
            a, b = self._span(owners, t)
            shape = tuple(sizes[a:b].tolist())
            home = self._homes.get(t)
            found = self._tensors[t] = Tensor(self.tensor_names[t], shape, self.text[int(self.dtype[t])], home)
        return found

    # -- what the objects are made from ----------------------------------------------

    @cached_property
    def _attr_owner(self) -> np.ndarray:
        return self._attrs[0]

    @cached_property
    def _shape_table(self) -> tuple[np.ndarray, np.ndarray]:
        """(tensor, size) of every shape row of a declared tensor, by tensor then axis."""
        rows = self._shape_rows
        t = self.tix[rows[:, 0]]
        keep = t >= 0
        rows, t = rows[keep], t[keep]
        order = np.lexsort((rows[:, 1], t))
        return t[order], rows[order, 2]

    def _span(self, owners: np.ndarray, k: int) -> tuple[int, int]:
        return int(np.searchsorted(owners, k)), int(np.searchsorted(owners, k, side="right"))

    @cached_property
    def _homes(self) -> dict[int, int]:
        t = self.tix[self._placed[:, 0]]
        keep = t >= 0
        return dict(zip(t[keep].tolist(), self._placed[keep, 1].tolist()))

    @cached_property
    def _quantized(self) -> dict[tuple[str, int], str]:
        text = self.text
        return {(text[c], i): text[f] for s, c, i, f in self._quantized_rows.tolist() if text[s] == self.shim}

    @cached_property
    def signatures(self) -> Signatures:
        n, tensors = len(self), len(self.tensor_names)
        # a tensor: its dtype and its sizes in axis order
        owners, sizes = self._shape_table
        tensor = row_ids(self.dtype, sequence_ids(owners, sizes[:, None], tensors))
        reader, read = self._reads
        owner, key, value = self._attrs
        kept = ~isin(key, self._provenance)
        attrs = sequence_ids(owner[kept], np.stack([key[kept], value[kept]], axis=1), n)
        count = np.bincount(reader, minlength=n)
        statement = row_ids(self.cls, attrs, self.fold.astype(I64), count, tensor[self.out])
        checked = row_ids(statement, sequence_ids(reader, tensor[read][:, None], n))
        alone = row_ids(statement, sequence_ids(reader, np.stack([first_reads(reader, read), tensor[read]], axis=1), n))
        reads = Spans(read.tolist(), np.cumsum(count).tolist())
        by_tensor = np.lexsort((reader, read))
        r_of, t_of = reader[by_tensor], read[by_tensor]
        distinct = np.concatenate(([True], (t_of[1:] != t_of[:-1]) | (r_of[1:] != r_of[:-1]))) if len(t_of) else \
            np.zeros(0, dtype=bool)
        r_of, t_of = r_of[distinct], t_of[distinct]
        readers = Spans(r_of.tolist(), np.cumsum(np.bincount(t_of, minlength=tensors)).tolist())
        return Signatures(statement.tolist(), tensor.tolist(), self.out.tolist(), reads, readers, checked,
                          alone.tolist())

    @cached_property
    def operand_table(self) -> tuple[np.ndarray, ...]:
        """`Signatures` as arrays, for work on many statements at once: each statement's
        signature and the tensor it writes, each tensor's signature, each statement's
        operands (`read[read_start[k]:read_start[k + 1]]`, in operand order) and each tensor's
        distinct readers (`reader[reader_start[t]:reader_start[t + 1]]`, in program order)."""
        sig = self.signatures
        reader, read = self._reads
        read_start = np.zeros(len(self) + 1, dtype=I64)
        np.cumsum(np.bincount(reader, minlength=len(self)), out=read_start[1:])
        readers = distinct(read * max(len(self), 1) + reader)
        reader_start = np.zeros(len(self.tensor_names) + 1, dtype=I64)
        np.cumsum(np.bincount(readers // max(len(self), 1), minlength=len(self.tensor_names)), out=reader_start[1:])
        return (np.array(sig.statement, dtype=I64), self.out, np.array(sig.tensor, dtype=I64), read_start, read,
                reader_start, readers % max(len(self), 1))

    @cached_property
    def _provenance(self) -> np.ndarray:
        found = (self._ids.get(name) for name in PROVENANCE)  # `get`: looking up interns nothing
        return np.array([i for i in found if i is not None], dtype=I64)

    # -- SPEC §4, once per distinct statement ----------------------------------------

    def shapes_ok(self) -> bool:
        """Whether every tensor's axes and every statement's shape pass RunProgram's checks
        (checked on the first statement of each distinct `Signatures.checked`). False means
        "look closer": build the RunProgram, which raises the error."""
        rows = self._shape_rows
        if len(rows) and int(rows[:, 2].min()) < 1:
            return False
        if len(rows):
            key = np.sort(rows[:, 0] * (int(rows[:, 1].max()) + 1) + rows[:, 1])
            if np.any(key[1:] == key[:-1]):
                return False  # an axis with two sizes
        dtypes = {self.text[d] for d in set(self.dtype.tolist())}
        if not dtypes <= set(DTYPES):
            return False
        if not all(self._axes_ok()):
            return False
        checked = self.signatures.checked
        order = np.argsort(checked, kind="stable")
        first = order[np.concatenate(([True], checked[order][1:] != checked[order][:-1]))] if len(order) else order
        tensors = self.tensors
        return all(shape_problem(self.statement_at(k), tensors) is None for k in first.tolist())

    def _axes_ok(self) -> list[bool]:
        rows = self._shape_rows
        t = self.tix[rows[:, 0]]
        keep = t >= 0
        t, axes = t[keep], rows[keep, 1]
        count = np.bincount(t, minlength=len(self.tensor_names))
        top = np.full(len(self.tensor_names), -1, dtype=I64)
        np.maximum.at(top, t, axes)
        low = np.zeros(len(self.tensor_names), dtype=I64)
        if len(axes):
            np.minimum.at(low, t, axes)
        return ((top == count - 1) & (low >= 0)).tolist()


def _through_symbols(view: ProgramView, by_symbol: np.ndarray, name: str) -> int:
    """A name's index in `by_symbol` (symbol id → index, -1 for none): no dict is built."""
    i = view._ids.get(name)  # `get`: looking up interns nothing
    k = int(by_symbol[i]) if i is not None else -1
    if k < 0:
        raise KeyError(name)
    return k


class _Position(Mapping):
    """statement → its index in program order."""

    def __init__(self, view: ProgramView):
        self.view = view

    def __getitem__(self, name: str) -> int:
        return _through_symbols(self.view, self.view.at, name)

    def __iter__(self):
        return iter(self.view.names)

    def __len__(self) -> int:
        return len(self.view.names)


class _Tensors(Mapping):
    """tensor → its `Tensor`, made on first use."""

    def __init__(self, view: ProgramView):
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

    def __init__(self, view: ProgramView):
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
