"""The Sharder: from whole tensors to a TP program. Each statement of the graph, in order,
is placed by the sharding table (table.py) from its operands' placements (the weights' by
the plan, weights.py); its reads first cross the plan's module boundaries (a `Boundary`:
the styles' ports, ports.py, transformers' and torch's alike), and a partial operand is folded
where its class needs the whole sum. It writes through an Emitter (emit.py) and leaves the
graph it is given as it was (the values it adds are the TP program's).

- a statement whose result is replicated runs once, on the spine, under its own name; any
  other runs as one statement per chip, `NAME@K`, reading and writing chip K's tensors
  `TENSOR@K` (and the spine's tensors by their own names);
- a fold `allreduce_T` sums the partials `T@K` into the spine tensor `T`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from ...ops import Ops
from ...program.builder import ProgramBuilder
from ..errors import ImportFailed
from ..graph import Graph, Statement, Tensor
from .dispatch import Dispatch
from .emit import Emitter
from .placement import PARTIAL, REPLICATE, Partial, Placement, Replicate, Shard
from .ports import Ports
from .rules import rank_aligned
from .sequence import check_token_wise
from .styles import Style
from .table import CutInside, NotShardable, entry
from .weights import Heads, plan_placements


@dataclass
class TPProgram:
    builder: ProgramBuilder
    placement: dict[str, Placement]  # whole value → placement
    inputs: list[Tensor] = field(default_factory=list)
    values: dict[str, Tensor] = field(default_factory=dict)  # the graph's values and those the sharding added

    def local_names(self, value: str, tp: int) -> list[tuple[str, int | None]]:
        """(tensor, chip) of each copy of a whole value: one spine tensor, or one per chip."""
        p = self.placement[value]
        return [(value, None)] if isinstance(p, Replicate) else [(f"{value}@{k}", k) for k in range(tp)]


class Boundary(Protocol):
    """What the Sharder asks of the plan's styles at a module's boundary (ports.py)."""

    def leaving(self, value: str, reader: str) -> str: ...  # what `reader`'s module reads of a value leaving its own

    def entering(self, value: str, reader: str) -> str: ...  # what `reader`'s module reads of a value entering it

    def kept(self, st: Statement, reads: list[str]) -> tuple[list[str], bool]: ...  # reads, and whether it stays partial

    def after(self, writes: str, reads: list[str]) -> None: ...  # a statement written

    def unsplit(self, output: str, placement: Placement) -> str: ...  # why the output may not stay split


class Sharder:
    """The walk over the graph's statements: each placed by the sharding table, its reads
    taken through the styles' boundaries (their ports and the experts' routing: `boundary`),
    written by `emit`."""

    def __init__(self, graph: Graph, tp: int, arch: str, styles=None, args=None):
        self.g = graph  # read only: the values the sharding adds are the Emitter's
        self.tp = tp
        self.arch = arch
        self.styles = styles or (lambda path: None)  # module path → its plan Style, if any
        self.emit = Emitter(dict(graph.values), tp, arch)
        self.tables: dict[str, str] = {}  # embedding table → vocab | embedding_colwise
        self._styled: dict[str, list[tuple[str, Style]]] = {}
        self.writers: dict[str, Statement] = {st.writes: st for st in graph.stmts}
        self.later: dict[str, Tensor] = {}  # the caches placed at their first reader (run's `caches`)
        dispatch = Dispatch(self.emit, graph, self.styled, self.styles, self.writers)
        self.boundary: Boundary = Ports(self.emit, graph, self.styled, dispatch, self.writers, args)

    @property
    def b(self) -> ProgramBuilder:
        return self.emit.b

    @property
    def values(self) -> dict[str, Tensor]:
        return self.emit.values

    @property
    def place(self) -> dict[str, Placement]:
        return self.emit.place

    @property
    def derived(self) -> dict[str, tuple[str, str, str]]:
        return self.emit.derived

    def run(self, weights: dict[str, Placement], kinds: dict[str, str] | None = None,
            caches: frozenset[str] = frozenset()) -> TPProgram:
        """The TP program: `weights` places the program's inputs (the rest replicated), but
        each of `caches` (a decode step's key and value caches) is placed as the value its
        first reader, a put_along, writes into it (`_cache`)."""
        check_token_wise(self.g, self.styles, self.tp, self.arch)  # sequence_parallel modules (sequence.py)
        self.tables = {w: k for w, k in (kinds or {}).items() if k in ("vocab", "embedding_colwise")}
        later = {v.name: v for v in self.g.inputs if v.name in caches and v.name not in weights}
        for v in self.g.inputs:
            if v.name not in later:
                self._input(v, weights.get(v.name, REPLICATE))
        self.later = later
        for st in self.g.stmts:
            self._statement(st)
        for v in later.values():
            if v.name not in self.place:
                self._input(v, REPLICATE)  # a cache nothing reads
        if later:
            self._inputs_first()
        output = self.g.output
        out = self.place[self._leaving(output, "")]  # (a torch output port may leave it in blocks of its own)
        if isinstance(out, Partial):
            self.emit.fold(output)
        elif isinstance(out, Shard):
            raise ImportFailed(f"{self.arch}: {self.boundary.unsplit(output, out)}")
        return TPProgram(self.b, self.place, self.g.inputs, self.values)

    def _input(self, v: Tensor, placement: Placement) -> None:
        """A program input (a weight, a folded constant, the ids) placed and declared."""
        self.place[v.name] = placement
        self.emit.declare(v)

    def _inputs_first(self) -> None:
        """The program's inputs declared first, in the graph's order, as if every cache had
        been placed before the walk (their tensor, shape, spine and placed rows moved up)."""
        rank = {self.emit.local(v.name, k): i for i, v in enumerate(self.g.inputs)
                for k in ([None] if isinstance(self.place[v.name], Replicate) else range(self.tp))}
        last = len(rank)
        for rel in ("tensor", "shape", "spine", "placed"):
            rows = self.b.facts[rel]
            order = sorted(range(len(rows)), key=lambda i: rank.get(rows[i][0], last))
            self.b.facts[rel] = [rows[i] for i in order]
            self._moved(rel, order)

    def _moved(self, rel: str, order: list[int]) -> None:
        """The rows of `rel` reordered: row i is now the former row order[i]."""

    def _cache(self, st: Statement, value: str) -> None:
        """A cache placed at its first reader: as the value a put_along writes into it (the
        key or value heads after the projection, split or gathered as the plan places them),
        else replicated."""
        p = self.place[st.reads[2]] if st.cls == Ops.PUT_ALONG and len(st.reads) == 3 and st.reads[0] == value \
            else REPLICATE
        self._input(self.later[value], p if isinstance(p, Shard) else REPLICATE)

    # -- module boundaries (styles.py) -------------------------------------------------

    def styled(self, module: str) -> list[tuple[str, Style]]:
        """The module and its ancestors that the plan gives a style, innermost first."""
        if module not in self._styled:
            parts = module.split(".") if module else []
            found = []
            for n in range(len(parts), 0, -1):
                path = ".".join(parts[:n])
                s = self.styles(path)
                if s is not None:
                    found.append((path, s))
            self._styled[module] = found
        return self._styled[module]

    def _leaving(self, value: str, reader: str) -> str:
        """A value leaving a styled module for `reader`'s, as the boundary says (a gather, a
        fold, a torch output port's redistribution): what the reader reads."""
        if self.values[value].role != "activation":
            return value
        return self.boundary.leaving(value, reader)

    def _entering(self, value: str, reader: str) -> str:
        """A value entering a styled module, as the boundary says (each chip's slice, share or
        routing slots; a torch input port's redistribution): what the reader reads."""
        return self.boundary.entering(value, reader)

    def _localize(self, reads: list[str], out, module: str) -> list[str]:
        """A statement's replicated operands that are as wide as a split one on its split axes
        (an elementwise one's, a cat's, a gather's: the table's `blockwise`): each chip's own block of
        them (a slice per chip and axis, no communication: DTensor's Replicate → Shard; attention
        sinks beside split heads; MLA's shared rotary key written beside the heads' own keys)."""
        shard = next((rank_aligned(placed, len(out), len(self.values[r].shape)) for r in reads
                      if isinstance(placed := self.place[r], Shard)), None)
        if shard is None:
            return reads
        local = []
        for r in reads:
            v = self.values[r]
            off = len(out) - len(v.shape)
            wide = [sp for sp in shard.splits if sp.axis >= off and v.shape[sp.axis - off] != 1]
            if not isinstance(self.place[r], Replicate) or not wide:
                local.append(r)
                continue
            if len(wide) != len(shard.splits) or any(not sp.plain(out[sp.axis]) or v.shape[sp.axis - off] !=
                                                     out[sp.axis] for sp in wide):
                local.append(r)  # the rule says what it would need
                continue
            local.append(self.emit.block(r, Shard(tuple(sp.moved(sp.axis - off) for sp in wide)), module))
        return local

    # -- statements -------------------------------------------------------------------

    def _statement(self, st: Statement) -> None:
        module = st.module or ""
        sharding = entry(st.cls)
        left = [self._leaving(r, module) for r in st.reads]
        for r in st.reads:
            if r not in self.place:
                self._cache(st, r)
        reads = [self._entering(r, module) for r in left]
        reads, keep = self.boundary.kept(st, reads)
        for r in reads:
            if isinstance(self.place[r], Partial) and not sharding.partial_view and not keep:
                self.emit.fold(r)
        out = self.values[st.writes]
        if sharding.blockwise and not keep:
            reads = self._localize(reads, out.shape, module)
        ins = [self.place[r] for r in reads]
        shapes = [self.values[r].shape for r in reads]
        attrs = dict(st.attrs)
        table = self.tables.get(reads[0]) if reads else None  # an embedding's table: its plan kind (vocab, ...)
        try:
            placed = PARTIAL if keep else sharding.rule(attrs, ins, shapes, out.shape, self.tp,
                                                        transpose_b=attrs.get("transpose_b") == "1", table=table)
        except CutInside as err:
            raise ImportFailed(self._cut_inside(st, err)) from None
        except NotShardable as err:
            raise ImportFailed(f"{self.arch}: {st.aten} at {st.module or '(top)'}: {err}") from None
        self.place[st.writes] = placed
        self.emit.declare(out)
        attrs.update(module=st.module or "(top)", aten=st.aten)
        folded = [r for r in reads if self.values[r].role == "folded"]
        if folded:  # constant subgraphs computed at import (RoPE tables, the causal mask)
            attrs["folded"] = ",".join(folded)
        chips = [None] if isinstance(placed, Replicate) else range(self.tp)
        local = sharding.local_attrs and sharding.local_attrs(dict(st.attrs), ins, shapes, self.tp, table=table)
        for k in chips:
            name = st.name if k is None else f"{st.name}@{k}"
            mine = attrs if k is None or local is None else {**attrs, **local(k)}
            self.b.stmt(name, st.cls, [self.emit.local(r, k) for r in reads], self.emit.local(st.writes, k), **mine)
        self.boundary.after(st.writes, reads)

    def _cut_inside(self, st: Statement, err: CutInside) -> str:
        """A view cutting the groups of a split factor, named at the style that split it: the
        first styled module back along the reshape's split operand where the split enters
        (a statement reading a split weight, or none split)."""
        at = f"(a view at {st.module or '(top)'})"
        value, seen = st.reads[0], set()
        origin = None
        while value not in seen and (writer := self.writers.get(value)) is not None:
            seen.add(value)
            split = [r for r in writer.reads if isinstance(self.place.get(r), Shard)]
            origin = writer.module or ""
            if not split or any(self.values[r].role == "weight" for r in split):
                break
            value = split[0]
        styled = self.styled(origin) if origin is not None else []
        over = f"over --tp {self.tp} chips" if err.parts == self.tp else f"into {err.parts} parts (--tp {self.tp})"
        if not styled:
            return f"{self.arch}: {st.aten} at {st.module or '(top)'}: {err}"
        prefix, s = styled[0]
        return (f"{self.arch}: {s.name} at {prefix}: its output's {err.size} features are {err.groups} groups of "
                f"{err.size // err.groups} {at}, which do not split {over}")


def shard(graph: Graph, tp: int, arch: str, plan: dict[str, str], base_prefix: str, heads: Heads,
          buffers: frozenset[str] = frozenset()) -> TPProgram:
    style_of, weights, kinds = plan_placements(graph, tp, arch, plan, base_prefix, heads, buffers)
    return Sharder(graph, tp, arch, style_of).run(weights, kinds)


__all__ = ["PARTIAL", "Sharder", "TPProgram", "shard"]
