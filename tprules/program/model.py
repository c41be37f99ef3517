"""The one loaded program: a view over the fact columns that the planner, the cost model,
codegen and the runtime all read, making objects only when asked.

`Program(loaded)` holds the encoded columns (program/columns.py) and, per statement in
program order (a topological order of the data flow, ties in op.facts order), a few
integer arrays. From them it gives:

- `statement(name)`, `statements`, `position`, `tensors`, `readers`, `writer`, `inputs`,
  `outputs`: what codegen and the runtime read, each `Statement` and `Tensor`
  (program/records.py) made on first use;
- `signatures`, `operand_table`: per statement and per tensor, ids equal exactly when what
  they stand for is equal (program/view.py), for the cost model, found by sorting rows of
  integers with no Python object per statement;
- `kinds`: class → kind from the loaded class registry, for the planner's index
  (planner/index.py `PlanIndex.of`, computed from these arrays);
- `check()`: SPEC §4's shape checks (program/shapes.py), once per distinct statement
  signature; on any doubt the checks run on every tensor and statement in order, and the
  first bad one is named by its file and line.

`places` (statement → chip:K | spine | collective) comes from the rules, asked only when read.

>>> from tprules.workspace import Workspace
>>> prog = Workspace("facts/megatron-mlp-tp2").tensor_program
>>> prog.statement("gelu_0").reads, prog.readers["h_0"], prog.places["gelu_0"]
(('h_0',), ('gelu_0',), 'chip:0')
>>> sig = prog.signatures  # the two chips' GELUs are the same kernel, the two matmuls of a chip are not
>>> sig.alone[prog.position["gelu_0"]] == sig.alone[prog.position["gelu_1"]], sig.alone[0] == sig.alone[2]
(True, False)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cached_property

import numpy as np

from .. import ops
from ..datalog.facts.columns import distinct, isin
from ..ops import Ops
from ..pos import Pos
from .records import Statement, Tensor
from .shapes import DTYPES, QUANT_FORMATS, check_shapes, shape_problem, statement_shape
from .view import I64, PROVENANCE, Signatures, Spans, _Position, _Readers, _Tensors, first_reads, row_ids, sequence_ids

# the kinds, as codegen asks for them (tprules/ops)
MATMUL, BMM, GROUPED = Ops.MATMUL, Ops.BMM, Ops.GROUPED_MATMUL
ROW = ops.ROW
ANCHORS = ops.MATMULS | ops.ROW  # classes whose output element needs more than one input element
POINTWISE = ops.ELEMENTWISE  # one output element from the same element of each operand
INDEXED = ops.INDEXED  # read an operand at another index than the one they write
WINDOW = ops.WINDOW  # a weighted sum over a window of an operand, computed where read (codegen/lowering/window.py)
LAYOUT = ops.LAYOUT - {Ops.TRANSPOSE}  # lowered as index reads (codegen/lowering/layout.py); transpose is a stage's flip


class Program:
    """The program over a `LoadedProgram`'s columns (statement k is the k-th in program
    order); its shim chooses the quantized reads. `places`: statement → place, or a
    function that returns them (asked when first read)."""

    def __init__(self, loaded, places: Mapping[str, str] | Callable[[], Mapping[str, str]] | None = None):
        self.loaded = loaded
        self.facts = loaded.facts
        self.directory, self.display, self.shim_source = loaded.directory, loaded.display, loaded.shim_source
        self._places = places
        self._checked = False
        columns = loaded.columns
        symbols = columns.symbols
        self.text = symbols.names
        self._ids = symbols.ids
        self.shim = loaded.shim
        self.names: list[str] = loaded.order
        n = len(self.names)
        self.at = np.full(len(self.text), -1, dtype=I64)  # symbol id → statement
        self._order_ids = loaded.order_ids
        self.at[loaded.order_ids] = np.arange(n, dtype=I64)
        tensors = columns["tensor"]
        self.tensor_ids = tensors[:, 0]  # tensor index → its symbol id
        self.tensor_names = [self.text[t] for t in tensors[:, 0].tolist()]
        self.tix = np.full(len(self.text), -1, dtype=I64)  # symbol id → tensor index
        self.tix[tensors[:, 0]] = np.arange(len(tensors), dtype=I64)
        self.dtype = tensors[:, 1]
        ops = columns["op"]
        self.facts_order = ops[:, 0]  # the statements' symbol ids in op.facts order
        self.cls = np.empty(n, dtype=I64)
        self.cls[self.at[ops[:, 0]]] = ops[:, 1]
        writes = columns["writes"]
        self.out = np.empty(n, dtype=I64)
        self.out[self.at[writes[:, 0]]] = self.tix[writes[:, 1]]
        reads = columns["reads"]
        reads = reads[np.lexsort((reads[:, 1], self.at[reads[:, 0]]))]
        self.read_rows = (self.at[reads[:, 0]], self.tix[reads[:, 2]])  # (statement, tensor index), operand order
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

    def __getstate__(self) -> dict:
        """Pickled (a `--ranks` job) with what a rank reads: the arrays statements and tensors
        are made from, the symbols' text, its places, chips and kinds as they are, and where
        each statement's op fact is (for errors at run time). Not the workspace that found the
        places, the fact base or its columns (the ranks read no fact), nor what is found again
        from the arrays when asked (the records, the signatures, the lookup tables)."""
        state = dict(self.__dict__)
        state["places"], state["_places"] = self.places, None
        state["chips"], state["kinds"], state["_sites"] = self.chips, self.kinds, self._sites
        state["folds"] = self.folds
        state["loaded"] = state["facts"] = None
        state["_statements"], state["_tensors"] = {}, {}
        for name in ("_ids", "at", "tix", "statements", "signatures", "operand_table", "_shape_table", "by_name",
                     "writer", "_homes", "_attr_owner", "_quantized", "where"):
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._ids = {name: i for i, name in enumerate(self.text)}
        self.at = np.full(len(self.text), -1, dtype=I64)
        self.at[self._order_ids] = np.arange(len(self.names), dtype=I64)
        self.tix = np.full(len(self.text), -1, dtype=I64)
        self.tix[self.tensor_ids] = np.arange(len(self.tensor_ids), dtype=I64)

    @classmethod
    def from_workspace(cls, ws) -> "Program":
        """The workspace's program (`Workspace.tensor_program`, built once), its shapes checked."""
        prog = ws.tensor_program
        prog.check()
        return prog

    # -- what codegen and the runtime read --------------------------------------------

    def statement(self, name: str) -> Statement:
        return self.statement_at(self.position[name])

    @cached_property
    def statements(self) -> tuple[Statement, ...]:
        """Every statement, in program order (made at once; those made before are kept)."""
        text, names, tensors, sig, made = self.text, self.names, self.tensor_names, self.signatures, self._statements
        owner, key, value = self._attrs
        keys, values = [text[i] for i in key.tolist()], [text[i] for i in value.tolist()]
        ends = np.searchsorted(owner, np.arange(len(self) + 1)).tolist()
        classes = [text[c] for c in self.cls.tolist()]
        quantized = self._quantized
        out = []
        for k, (reads, cls, writes, fold) in enumerate(zip(sig.reads, classes, sig.writes, self.fold.tolist())):
            found = made.get(k)
            if found is None:
                a, b = ends[k], ends[k + 1]
                q = tuple(sorted((i, f) for (c, i), f in quantized.items() if c == cls and i < len(reads))) \
                    if quantized else ()
                found = made[k] = Statement(names[k], cls, tuple(tensors[t] for t in reads), tensors[writes],
                                            tuple(zip(keys[a:b], values[a:b])), fold, q)
            out.append(found)
        return tuple(out)

    @cached_property
    def by_name(self) -> dict[str, Statement]:
        return {s.name: s for s in self.statements}

    @cached_property
    def writer(self) -> dict[str, str]:
        """tensor → the statement that writes it."""
        names, tensors = self.names, self.tensor_names
        return {tensors[t]: names[k] for k, t in enumerate(self.out.tolist())}

    @cached_property
    def chips(self) -> int:
        (chips,) = next(iter(self.facts.tuples("chips")), (1,))
        return chips

    @cached_property
    def places(self) -> Mapping[str, str]:
        """statement → chip:K | spine | collective (from the rules)."""
        places = self._places() if callable(self._places) else self._places
        return places if places is not None else {}

    @cached_property
    def where(self) -> "_Where":
        """statement → its op.facts line (a Pos), for errors at run time."""
        return _Where(self)

    @cached_property
    def _sites(self) -> tuple[list[str], np.ndarray, np.ndarray]:
        """Where each statement's op fact is, compactly (what `where` reads, also in a
        pickled program): the files, and per statement its file's index (-1: none) and line."""
        files: dict[str, int] = {}
        file, line = np.full(len(self), -1, dtype=np.int32), np.zeros(len(self), dtype=np.int32)
        for k, (name, cls) in enumerate(zip(self.names, self.cls.tolist())):
            pos = self.facts.where("op", (name, self.text[cls]))
            if pos is not None:
                file[k], line[k] = files.setdefault(pos.file, len(files)), pos.line
        return list(files), file, line

    @cached_property
    def kinds(self) -> dict[str, str]:
        """class → kind (SPEC §4), from the class registry loaded with the program."""
        return {cls: kind for cls, kind, _ in self.facts.ordered("registry")}

    @cached_property
    def folds(self) -> dict[str, str]:
        """Each fold statement → its collective's kind (SPEC §2 `fold`, `collective`; no
        `collective` fact: `all_reduce`), in the order of fold.facts."""
        kinds = dict(self.facts.tuples("collective"))
        return {o: kinds.get(c, "all_reduce") for o, c in self.facts.tuples("fold")}

    @property
    def inputs(self) -> list[str]:
        """Tensors some statement reads and none writes, in order of first read."""
        writer = self.writer
        seen = dict.fromkeys(t for s in self.statements for t in s.reads if t not in writer)
        return list(seen)

    @property
    def outputs(self) -> list[str]:
        """Tensors no statement reads (SPEC §5), in program order."""
        return [s.writes for s in self.statements if s.writes not in self.readers]

    def quantized_path(self, tensor: str) -> bool:
        """Whether the tensor's value depends on a quantized read (its tolerance is looser)."""
        seen, todo = set(), [tensor]
        writer = self.writer
        while todo:
            t = todo.pop()
            o = writer.get(t)
            if o is None or o in seen:
                continue
            seen.add(o)
            s = self.statement(o)
            if s.quantized:
                return True
            todo.extend(s.reads)
        return False

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
        reader, read = self.read_rows
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
        reader, read = self.read_rows
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

    def check(self) -> None:
        """SPEC §4: raise the first bad tensor's or statement's error, naming its file and
        line; checked once (on the signatures first, `shapes_ok`)."""
        if not self._checked:
            if not self.shapes_ok():
                check_shapes(self, self.facts)  # raises the error, if there is one
            self._checked = True

    def shapes_ok(self) -> bool:
        """Whether every tensor's axes and every statement's shape pass SPEC §4's checks
        (checked on the first statement of each distinct `Signatures.checked`). False means
        "look closer": `check` then checks every one in order, and raises the error."""
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


class _Where(Mapping):
    """statement → the Pos of its `op` fact (None where it has none)."""

    def __init__(self, prog: Program):
        self.prog = prog

    def __getitem__(self, name: str):
        files, file, line = self.prog._sites
        k = self.prog.position[name]
        return Pos(files[file[k]], int(line[k])) if file[k] >= 0 else None

    def __iter__(self):
        return iter(self.prog.names)

    def __len__(self) -> int:
        return len(self.prog.names)


__all__ = ["ANCHORS", "BMM", "DTYPES", "GROUPED", "INDEXED", "LAYOUT", "MATMUL", "POINTWISE", "QUANT_FORMATS", "ROW", "WINDOW",
           "Program", "Statement", "Tensor", "shape_problem", "statement_shape"]
