"""From whole tensors to a TP program: the weights placed by the plan (weights.py), a chip's
statements wherever a placement is a shard or a partial, and a fold wherever a partial sum
meets a class that needs the whole sum.

- a statement whose result is replicated runs once, on the spine, under its own name; any
  other runs as one statement per chip, `NAME@K`, reading and writing chip K's tensors
  `TENSOR@K` (and the spine's tensors by their own names);
- a fold `allreduce_T` sums the partials `T@K` into the spine tensor `T`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from ...ops import ELEMENTWISE, LAYOUT, Ops
from ...program.builder import ProgramBuilder
from ..errors import ImportFailed
from ..graph import Graph, Statement, Tensor, under
from .dispatch import Dispatch
from .placement import PARTIAL, REPLICATE, Partial, Placement, Replicate, Shard, local_shape, plain
from .ports import Ports
from .rules import rank_aligned
from .styles import Style
from .table import CutInside, NotShardable, entry, partial_through
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


class Sharder(Ports, Dispatch):
    def __init__(self, graph: Graph, tp: int, arch: str, styles=None, args=None):
        Ports.__init__(self, args)
        Dispatch.__init__(self)
        self.g = graph  # read only: the values the sharding adds go to its own `values`
        self.values: dict[str, Tensor] = dict(graph.values)
        self.tp = tp
        self.arch = arch
        self.styles = styles or (lambda path: None)  # module path → its plan Style, if any
        self.b = ProgramBuilder(chips=tp)
        self.place: dict[str, Placement] = {}
        self.folds: dict[str, str] = {}  # partial value → its fold statement
        self.splits: dict[str, str] = {}  # replicated value → its per-chip slices (rowwise_split_input)
        self.tables: dict[str, str] = {}  # embedding table → vocab | embedding_colwise
        self._styled: dict[str, list[tuple[str, Style]]] = {}
        # each name the sharding makes from one of the graph's: (prefix, that name, suffix)
        self.derived: dict[str, tuple[str, str, str]] = {}

    def run(self, weights: dict[str, Placement], kinds: dict[str, str] | None = None) -> TPProgram:
        self.tables = {w: k for w, k in (kinds or {}).items() if k in ("vocab", "embedding_colwise")}
        for v in self.g.inputs:
            self.place[v.name] = weights.get(v.name, REPLICATE)
            self._declare(v)
        self._find_boundaries()
        for st in self.g.stmts:
            self._statement(st)
        output = self.g.output
        out = self.place[self._leaving(output, "")]  # (a torch output port may leave it in blocks of its own)
        if isinstance(out, Partial):
            self._fold(output)
        elif isinstance(out, Shard) and self.ported:
            raise ImportFailed(f"{self.arch}: the forward's output {output} would stay split over the chips ({out}): "
                               "torch would return each chip's block; no style of the plan gathers it")
        elif isinstance(out, Shard):
            raise ImportFailed(f"{self.arch}: the logits would stay split over the chips ({out}): the plan gathers "
                               "them nowhere (colwise_gather_output on lm_head would); leave lm_head out of the plan")
        return TPProgram(self.b, self.place, self.g.inputs, self.values)

    def _derived(self, name: str, like: Tensor, module: str, placement: Placement) -> None:
        """A value the sharding adds (a slice, share, block or whole twin of `like`): its
        shape and dtype, placed and declared on its chips or the spine."""
        self.values[name] = Tensor(name, like.shape, like.dtype, role="activation", module=module)
        self.place[name] = placement
        self._declare(self.values[name])

    def _declare(self, v: Tensor) -> None:
        p = self.place[v.name]
        shape = local_shape(p, v.shape, self.tp)
        if isinstance(p, Replicate):
            self.b.tensor(v.name, shape, v.dtype, spine=True)
        else:
            for k in range(self.tp):
                self.b.tensor(f"{v.name}@{k}", shape, v.dtype, chip=k)

    def _named(self, prefix: str, source: str, suffix: str = "") -> str:
        """A name made from `source` (a value or statement name), kept with its parts (stamp.py
        renames the source and keeps the rest)."""
        name = f"{prefix}{source}{suffix}"
        self.derived[name] = (prefix, source, suffix)
        return name

    def _local(self, value: str, chip: int | None) -> str:
        return value if isinstance(self.place[value], Replicate) or chip is None else f"{value}@{chip}"

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
        """A value leaving a styled module for `reader`'s: gathered or folded as the style says
        (a torch style's output port: its redistribution, whose value the reader reads)."""
        v = self.values[value]
        if v.role != "activation":
            return value
        if self.ported:
            return self._ports_leaving(value, reader)
        for prefix, s in self.styled(v.module):
            if under(reader, prefix):
                continue
            if s.output == "gather" and isinstance(self.place[value], Shard):
                self._gather(value, prefix, s)
            elif s.output == "reduce" and isinstance(self.place[value], Partial):
                self._fold(value)
        return value

    def _entering(self, value: str, reader: str) -> str:
        """A replicated value entering a module whose style splits its input: its slices (a
        torch style's input port: its redistribution)."""
        v = self.values[value]
        if self.ported and self.tp > 1 and v.role != "weight":  # a folded constant may be a module's input too
            return self._ports_entering(value, reader)
        if v.role not in ("activation", "input") or self.tp == 1:
            return value  # on one chip every value is whole
        if isinstance(self.place[value], Shard) and self._left_split_input(v.module, reader):
            return self._whole(value, set())
        for prefix, s in self.styled(reader):
            if s.dispatch and not under(v.module, prefix) and isinstance(self.place[value], Replicate):
                return self._dispatched(value, prefix, s)
            if s.share_input and not under(v.module, prefix) and isinstance(self.place[value], Replicate):
                return self._share(value, prefix, s)
            if not s.split_input or under(v.module, prefix):
                continue
            if isinstance(self.place[value], Partial):
                self._fold(value)
            if isinstance(self.place[value], Replicate):
                return self._split(value, prefix, s)
        return value

    def _gather(self, value: str, module: str, s: Style, out: str | None = None, what: str = "output") -> str:
        """The all-gather of a value split over the chips: its spine tensor is the value's own
        name, or `out` (a value gathered for the readers of one module only, its collective
        named by its fold)."""
        p = self.place[value]
        assert isinstance(p, Shard)  # gathered only when split (_leaving)
        v = self.values[value]
        split = p.splits[0]
        if len(p.splits) != 1 or split.parts != self.tp or not split.plain(v.shape[split.axis]):
            raise ImportFailed(f"{self.arch}: {s.name} at {module}: its {what} {value} is placed {p}; an all-gather "
                               f"joins one contiguous block per chip (needs a redistribution first)")
        slices = [f"{value}@{k}" for k in range(self.tp)]
        name = self._named("allgather_", out or value)
        if out is None:
            self.place[value] = REPLICATE
            self.b.tensor(value, v.shape, v.dtype, spine=True)
        else:
            self._derived(out, v, module, REPLICATE)
        self.b.gather(name, slices, out or value, collective=module if out is None else name, axis=split.axis)
        self.b.facts["attr"].append((name, "module", module))
        return out or value

    def _split(self, value: str, module: str, s: Style, axis: int | None = None) -> str:
        """Each chip's slice of a replicated value on its last axis, or on `axis` (a `slice`
        per chip: DTensor's Replicate → Shard, no communication)."""
        v = self.values[value]
        last = len(v.shape) - 1
        axis = last if axis is None else axis
        key = value if axis == last else f"{value}:{axis}"
        if key in self.splits:
            return self.splits[key]
        size = v.shape[axis]
        if size % self.tp:
            where = "its last axis" if axis == last else f"axis {axis}"
            raise ImportFailed(f"{self.arch}: {s.name} at {module}: its input {value} has {size} on {where}, "
                               f"which does not split into {self.tp}")
        name = self._named("", value, "_split" if axis == last else f"_split{axis}")
        self._derived(name, v, module, Shard((plain(axis, self.tp, size),)))
        width = size // self.tp
        for k in range(self.tp):
            stem = "split" if axis == last else f"split{axis}"
            self.b.stmt(self._named(f"{stem}_", value) + f"@{k}", Ops.SLICE, [value], f"{name}@{k}", axis=axis, start=k * width,
                        end=(k + 1) * width, step=1, module=module, aten=f"({s.name})")
        self.splits[key] = name
        return name

    def _left_split_input(self, module: str, reader: str) -> bool:
        """Whether `module` is in a split-input module that `reader` is outside of."""
        return any(s.split_input and not under(reader, prefix) for prefix, s in self.styled(module))

    def _whole(self, value: str, seen: set) -> str:
        """The whole value of one that a split-input module computed from its slices, for a
        reader outside the module: the statements from the module's input to it again, on the
        spine, from the whole input. transformers slices the input inside the module, so
        nothing split ever leaves it; a reader outside reads such a value only where the
        importer shares one statement between two modules (the same view of one tensor,
        lower.py's `computed`), as Qwen4-Exp's block_inject_weight shares the flattened
        input of its sibling input_mix_weight_down."""
        source = next((v for v, name in self.splits.items() if name == value and name == f"{v}_split"), None)
        if source is not None or isinstance(self.place[value], Replicate):
            return source or value
        twin = self._named("", value, "_whole")
        if twin in self.place:
            return twin
        writer = self.writers.get(value)
        if writer is None or writer.cls not in (LAYOUT | ELEMENTWISE) or value in seen:
            raise ImportFailed(f"{self.arch}: {self.values[value].module}: {value} is split inside a "
                               "rowwise_split_input module and read outside it, where it is whole; it is computed by "
                               f"{writer.aten if writer else 'no statement'}, which the spine cannot compute again")
        reads = [self._whole(r, seen | {value}) for r in writer.reads]
        v = self.values[value]
        self._derived(twin, v, v.module, REPLICATE)
        self.b.stmt(self._named("", writer.name, "_whole"), writer.cls, reads, twin, **dict(writer.attrs), module=writer.module,
                    aten=writer.aten)
        return twin

    @cached_property
    def writers(self) -> dict[str, Statement]:
        return {st.writes: st for st in self.g.stmts}

    def _share(self, value: str, module: str, s: Style) -> str:
        """Each chip's 1 / N of a replicated value: a partial that sums back to it."""
        key = self._named("", value, "_share")
        if key in self.splits:
            return self.splits[key]
        v = self.values[value]
        self._derived(key, v, module, PARTIAL)
        for k in range(self.tp):
            self.b.stmt(self._named("share_", value) + f"@{k}", Ops.SCALE, [value], f"{key}@{k}", factor=repr(1.0 / self.tp),
                        module=module, aten=f"({s.name})")
        self.splits[key] = key
        return key

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
            local.append(self._block(r, Shard(tuple(sp.moved(sp.axis - off) for sp in wide)), module))
        return local

    def _block(self, value: str, placement: Shard, module: str) -> str:
        """Chip k's block of a replicated value under `placement` (plain splits): slices."""
        key = self._named("", value, f"_block_{'_'.join(f'{sp.axis}x{sp.parts}' for sp in placement.splits)}")
        if key in self.splits:
            return self.splits[key]
        v = self.values[value]
        self._derived(key, v, module, placement)
        for k in range(self.tp):
            src, digits = value, placement.block(k, self.tp)
            for n, sp in enumerate(placement.splits):
                width = v.shape[sp.axis] // sp.parts
                last = n == len(placement.splits) - 1
                dst = f"{key}@{k}" if last else self._named("", key, f"_{n}") + f"@{k}"
                if not last:
                    shape = list(local_shape(Shard(placement.splits[:n + 1]), v.shape, self.tp))
                    self.b.tensor(dst, shape, v.dtype, chip=k)
                self.b.stmt(self._named("block_", value, f"_{n}") + f"@{k}", Ops.SLICE, [src], dst, axis=sp.axis,
                            start=digits[sp.axis] * width, end=(digits[sp.axis] + 1) * width, step=1,
                            module=module, aten="(local block)")
                src = dst
        self.splits[key] = key
        return key

    def keeps_partial(self, module: str) -> bool:
        return any(s.linear for _, s in self.styled(module))

    # -- statements -------------------------------------------------------------------

    def _statement(self, st: Statement) -> None:
        module = st.module or ""
        sharding = entry(st.cls)
        left = [self._leaving(r, module) for r in st.reads]
        reads = [self._entering(r, module) for r in left]
        keep = self.keeps_partial(module) and partial_through(st.cls, [self.place[r] for r in reads])
        if not keep and (own := self.local_reads(st, reads)) is not None:
            keep, reads = True, own
        if self.ported and not keep and sharding.bias:
            reads, keep = self._partial_bias(reads, module)
        for r in reads:
            if isinstance(self.place[r], Partial) and not sharding.partial_view and not keep:
                self._fold(r)
        out = self.values[st.writes]
        if sharding.blockwise and not keep:
            reads = self._localize(reads, out.shape, module)
        ins = [self.place[r] for r in reads]
        shapes = [self.values[r].shape for r in reads]
        attrs = dict(st.attrs)
        table = self.tables.get(reads[0])  # an embedding's table: the plan's kind of it (vocab, embedding_colwise)
        try:
            placed = PARTIAL if keep else sharding.rule(attrs, ins, shapes, out.shape, self.tp,
                                                        transpose_b=attrs.get("transpose_b") == "1", table=table)
        except CutInside as err:
            raise ImportFailed(self._cut_inside(st, err)) from None
        except NotShardable as err:
            raise ImportFailed(f"{self.arch}: {st.aten} at {st.module or '(top)'}: {err}") from None
        self.place[st.writes] = placed
        self._declare(out)
        attrs.update(module=st.module or "(top)", aten=st.aten)
        folded = [r for r in reads if self.values[r].role == "folded"]
        if folded:  # constant subgraphs computed at import (RoPE tables, the causal mask)
            attrs["folded"] = ",".join(folded)
        chips = [None] if isinstance(placed, Replicate) else range(self.tp)
        local = sharding.local_attrs and sharding.local_attrs(dict(st.attrs), ins, shapes, self.tp, table=table)
        for k in chips:
            name = st.name if k is None else f"{st.name}@{k}"
            mine = attrs if k is None or local is None else {**attrs, **local(k)}
            self.b.stmt(name, st.cls, [self._local(r, k) for r in reads], self._local(st.writes, k), **mine)
        if self.ported:
            self._carry(st.writes, reads)

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

    def _fold(self, value: str) -> None:
        """The all-reduce of a partial value: its spine tensor is the value's own name."""
        if value in self.folds:
            return
        v = self.values[value]
        partials = [f"{value}@{k}" for k in range(self.tp)]
        self.place[value] = REPLICATE
        self.b.tensor(value, v.shape, v.dtype, spine=True)
        name = self._named("allreduce_", value)
        self.b.fold(name, partials, value, collective=v.module or value)
        self.b.facts["attr"].append((name, "module", v.module or "(top)"))
        self.folds[value] = name


def shard(graph: Graph, tp: int, arch: str, plan: dict[str, str], base_prefix: str, heads: Heads,
          buffers: frozenset[str] = frozenset()) -> TPProgram:
    style_of, weights, kinds = plan_placements(graph, tp, arch, plan, base_prefix, heads, buffers)
    return Sharder(graph, tp, arch, style_of).run(weights, kinds)


__all__ = ["PARTIAL", "Sharder", "TPProgram", "shard"]
