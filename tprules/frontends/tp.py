"""From whole tensors to a TP program: placements from the plan, a chip's statements wherever
a placement is a shard or a partial, and a fold wherever a partial sum meets a class that
needs the whole sum.

- a weight the plan marks colwise is split on its output axis (axis 0 of [out, in]), its
  bias too; rowwise, on its input axis (the bias stays whole: it is added after the fold);
  everything else is replicated: the spine;
- key/value heads fewer than chips are replicated as Megatron does: the k and v weights
  are split by head, each head on N / heads chips;
- a statement whose result is replicated runs once, on the spine, under its own name; any
  other runs as one statement per chip, `NAME@K`, reading and writing chip K's tensors
  `TENSOR@K` (and the spine's tensors by their own names);
- a fold `allreduce_T` sums the partials `T@K` into the spine tensor `T`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from ..ops import ELEMENTWISE, LAYOUT, Ops
from ..program.builder import ProgramBuilder
from .dispatch import Dispatch
from .errors import ImportFailed
from .graph import Graph, Statement, Tensor, under
from .hf import generic_path, plan_style
from .placement import PARTIAL, REPLICATE, Partial, Placement, Replicate, Shard, Split, local_shape, plain
from .ports import Ports
from .sequence import check_token_wise
from .sharding import (
    PARTIAL_THROUGH,
    CutInside,
    NotShardable,
    _rank_aligned,
    local_attrs,
    partial_through,
    reads_local_blocks,
    rule,
)
from .styles import SPLIT_FACTOR, Style, style


@dataclass
class Heads:
    heads: int | None
    kv: int | None


@dataclass
class TPProgram:
    builder: ProgramBuilder
    placement: dict[str, Placement]  # whole value → placement
    inputs: list[Tensor] = field(default_factory=list)

    def local_names(self, value: str, tp: int) -> list[tuple[str, int | None]]:
        """(tensor, chip) of each copy of a whole value: one spine tensor, or one per chip."""
        p = self.placement[value]
        return [(value, None)] if isinstance(p, Replicate) else [(f"{value}@{k}", k) for k in range(tp)]


EXPERTS = ("num_local_experts", "num_experts", "n_routed_experts")


def check_experts(source, ep: int | None = None) -> None:
    """A router picks at most as many experts as there are; under the EP plan on `ep` chips,
    each chip holds E/N whole experts."""
    config = source.config
    k = getattr(config, "num_experts_per_tok", None)
    experts = next((getattr(config, f) for f in EXPERTS if isinstance(getattr(config, f, None), int)), None)
    if isinstance(k, int) and experts is not None and k > experts:
        raise source.fail(f"num_experts_per_tok {k} is more than the {experts} experts a router picks from (top-{k})")
    if ep is not None and experts is not None and experts % ep:
        raise source.fail(f"{experts} experts do not split over --tp {ep} chips under the EP plan (each chip holds "
                          "E/N whole experts)")


def check_heads(source, heads: Heads, tp: int) -> None:
    """Heads must split over the chips; key/value heads may be fewer than chips (replicated)."""
    if heads.heads is None or heads.kv is None:  # kv is None only where heads is (hf.head_counts)
        return
    if heads.heads % tp:
        raise source.fail(f"{heads.heads} attention heads ({heads.kv} key/value heads) do not split over --tp {tp} chips")
    if heads.kv % tp and tp % heads.kv:
        raise source.fail(f"{heads.kv} key/value heads ({heads.heads} attention heads) neither split over --tp {tp} "
                          "chips nor replicate evenly on them")


def weight_placement(arch: str, value: Tensor, style: Style | None, tp: int, heads: Heads) -> Placement:
    """Where a weight lives under its plan style (styles.py says what each kind means)."""
    kind = style.weight if style is not None else None
    if kind in (None, "replicate") or tp == 1:
        return REPLICATE
    assert style is not None  # it has a kind
    module = value.module
    shape = value.shape
    rank = len(shape)
    if kind == "colwise" and rank == 3:  # transformers' Shard(ndim - 2): an experts' [E, out, in] on out
        placement = Shard((plain(1, tp, shape[1]),))
    elif kind == "colwise" and rank in (1, 2):
        parts = tp
        if style.output is None and module.rsplit(".", 1)[-1] in ("k_proj", "v_proj") and heads.kv is not None \
                and heads.kv < tp:
            parts = heads.kv  # Megatron: each key/value head on tp / kv chips
        placement = Shard((plain(0, parts, shape[0]),))
    elif kind == "rowwise" and rank in (2, 3):  # an expert's down_proj [E, out, in] on its input axis too
        placement = Shard((plain(rank - 1, tp, shape[-1]),))
    elif kind in ("rowwise", "packed_rowwise") and rank == 1:
        return REPLICATE  # added once, after the fold
    elif kind == "packed_colwise" and rank in (1, 2, 3) and shape[0 if rank == 1 else rank - 2] % SPLIT_FACTOR == 0:
        axis = 0 if rank == 1 else rank - 2  # gate and up packed on the output axis: each cut in tp
        placement = Shard((Split(axis, tp, shape[axis] // SPLIT_FACTOR),))
    elif kind == "packed_rowwise" and rank in (2, 3) and shape[-1] % SPLIT_FACTOR == 0:
        placement = Shard((Split(rank - 1, tp, shape[-1] // SPLIT_FACTOR),))
    elif kind == "vocab" and rank == 2:
        placement = Shard((plain(0, tp, shape[0]),))  # rows [k V/N, (k+1) V/N) of the table on chip k
    elif kind == "embedding_colwise" and rank == 2:
        placement = Shard((plain(1, tp, shape[1]),))
    elif kind == "experts" and rank >= 1:  # transformers' Shard(0): experts [k E/N, (k+1) E/N) whole on chip k
        if shape[0] % tp:
            raise ImportFailed(f"{arch}: {style.name} at {value.name}: its {shape[0]} experts do not split over "
                               f"--tp {tp} chips (each chip holds E/N whole experts)")
        placement = Shard((plain(0, tp, shape[0]),))
    else:
        raise ImportFailed(f"{arch}: the plan says {style.name} for {module}, but {value.name} has shape {list(shape)}")
    for split in placement.splits:
        if split.factor % split.parts:
            what = f"has {shape[split.axis]} on axis {split.axis}" if split.plain(shape[split.axis]) else \
                f"packs {shape[split.axis] // split.factor} parts of {split.factor} on axis {split.axis}, each of which"
            raise ImportFailed(f"{arch}: {value.name} {what} does not split into {split.parts} ({style.name}, --tp {tp})")
    return placement



class Sharder(Ports, Dispatch):
    def __init__(self, graph: Graph, tp: int, arch: str, styles=None, args=None):
        Ports.__init__(self, args)
        Dispatch.__init__(self)
        self.g = graph
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
        return TPProgram(self.b, self.place, self.g.inputs)

    def _derived(self, name: str, like: Tensor, module: str, placement: Placement) -> None:
        """A value the sharding adds (a slice, share, block or whole twin of `like`): its
        shape and dtype, placed and declared on its chips or the spine."""
        self.g.values[name] = Tensor(name, like.shape, like.dtype, role="activation", module=module)
        self.place[name] = placement
        self._declare(self.g.values[name])

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
        v = self.g.values[value]
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
        v = self.g.values[value]
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
        v = self.g.values[value]
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
        v = self.g.values[value]
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
            raise ImportFailed(f"{self.arch}: {self.g.values[value].module}: {value} is split inside a "
                               "rowwise_split_input module and read outside it, where it is whole; it is computed by "
                               f"{writer.aten if writer else 'no statement'}, which the spine cannot compute again")
        reads = [self._whole(r, seen | {value}) for r in writer.reads]
        v = self.g.values[value]
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
        v = self.g.values[value]
        self._derived(key, v, module, PARTIAL)
        for k in range(self.tp):
            self.b.stmt(self._named("share_", value) + f"@{k}", Ops.SCALE, [value], f"{key}@{k}", factor=repr(1.0 / self.tp),
                        module=module, aten=f"({s.name})")
        self.splits[key] = key
        return key

    def _localize(self, reads: list[str], out, module: str) -> list[str]:
        """A statement's replicated operands that are as wide as a split one on its split axes
        (an elementwise one's, a cat's, a gather's: sharding.BLOCKWISE): each chip's own block of
        them (a slice per chip and axis, no communication: DTensor's Replicate → Shard; attention
        sinks beside split heads; MLA's shared rotary key written beside the heads' own keys)."""
        shard = next((_rank_aligned(placed, len(out), len(self.g.values[r].shape)) for r in reads
                      if isinstance(placed := self.place[r], Shard)), None)
        if shard is None:
            return reads
        local = []
        for r in reads:
            v = self.g.values[r]
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
        v = self.g.values[value]
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
        left = [self._leaving(r, module) for r in st.reads]
        reads = [self._entering(r, module) for r in left]
        keep = self.keeps_partial(module) and partial_through(st.cls, [self.place[r] for r in reads]) \
            or self.runs_local(st, reads)
        if self.ported and not keep and st.cls == Ops.ADD:
            reads, keep = self._partial_bias(reads, module)
        for r in reads:
            if isinstance(self.place[r], Partial) and st.cls not in PARTIAL_THROUGH and not keep:
                self._fold(r)
        out = self.g.values[st.writes]
        if reads_local_blocks(st.cls) and not keep:
            reads = self._localize(reads, out.shape, module)
        ins = [self.place[r] for r in reads]
        shapes = [self.g.values[r].shape for r in reads]
        attrs = dict(st.attrs)
        try:
            placed = self._embedding(st, reads, out.shape) if st.cls == Ops.EMBEDDING else None
            if keep:
                placed = PARTIAL
            if placed is None:
                placed = rule(st.cls)(attrs, ins, shapes, out.shape, self.tp, transpose_b=attrs.get("transpose_b") == "1")
        except CutInside as err:
            raise ImportFailed(self._cut_inside(st, err)) from None
        except NotShardable as err:
            raise ImportFailed(f"{self.arch}: {st.aten} at {st.module or '(top)'}: {err}") from None
        self.place[st.writes] = placed
        self._declare(out)
        attrs.update(module=st.module or "(top)", aten=st.aten)
        folded = [r for r in reads if self.g.values[r].role == "folded"]
        if folded:  # constant subgraphs computed at import (RoPE tables, the causal mask)
            attrs["folded"] = ",".join(folded)
        chips = [None] if isinstance(placed, Replicate) else range(self.tp)
        local = local_attrs(st.cls, dict(st.attrs), ins, shapes, self.tp)
        if st.cls == Ops.EMBEDDING and self.tables.get(reads[0]) == "vocab" and isinstance(ins[0], Shard):
            rows = self.g.values[reads[0]].shape[0] // self.tp
            local = lambda k: {"offset": str(k * rows)}  # noqa: E731 - chip k's rows of the vocabulary
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
            if not split or any(self.g.values[r].role == "weight" for r in split):
                break
            value = split[0]
        styled = self.styled(origin) if origin is not None else []
        over = f"over --tp {self.tp} chips" if err.parts == self.tp else f"into {err.parts} parts (--tp {self.tp})"
        if not styled:
            return f"{self.arch}: {st.aten} at {st.module or '(top)'}: {err}"
        prefix, s = styled[0]
        return (f"{self.arch}: {s.name} at {prefix}: its output's {err.size} features are {err.groups} groups of "
                f"{err.size // err.groups} {at}, which do not split {over}")

    def _embedding(self, st: Statement, reads: list[str], out) -> Placement | None:
        """A split table the plan made vocabulary-parallel (a partial: zeros outside each chip's
        rows) or hidden-parallel (split on the last axis); None for the table rule."""
        table, ids = reads
        kind = self.tables.get(table)
        if kind is None or not isinstance(self.place[table], Shard):
            return None
        if not isinstance(self.place[ids], Replicate):
            raise NotShardable(f"ids placed {self.place[ids]} (an embedding reads replicated ids)")
        return PARTIAL if kind == "vocab" else Shard((plain(len(out) - 1, self.tp, out[-1]),))

    def _fold(self, value: str) -> None:
        """The all-reduce of a partial value: its spine tensor is the value's own name."""
        if value in self.folds:
            return
        v = self.g.values[value]
        partials = [f"{value}@{k}" for k in range(self.tp)]
        self.place[value] = REPLICATE
        self.b.tensor(value, v.shape, v.dtype, spine=True)
        name = self._named("allreduce_", value)
        self.b.fold(name, partials, value, collective=v.module or value)
        self.b.facts["attr"].append((name, "module", v.module or "(top)"))
        self.folds[value] = name


def plan_placements(graph: Graph, tp: int, arch: str, plan: dict[str, str], base_prefix: str, heads: Heads,
                    buffers: frozenset[str] = frozenset()):
    """The plan read for a graph: its style of a module path, each weight's placement, and
    the weights' style kinds (what `Sharder.run` takes). A module's style splits its
    parameters only: its buffers (`buffers`, layer numbers as `*`: a scaled embedding's
    embed_scale) stay replicated, as transformers shards parameters only."""
    def style_of(path: str) -> Style | None:
        name = plan_style(plan, path, base_prefix)
        return style(name) if name is not None else None

    weights, kinds = placements(graph, tp, arch, style_of, heads, buffers)
    check_token_wise(graph, style_of, tp, arch)
    return style_of, weights, kinds


def placements(graph: Graph, tp: int, arch: str, style_of, heads: Heads, buffers: frozenset[str] = frozenset()):
    """Each weight's placement and style kind under `style_of` (module or parameter path →
    its Style, if any)."""
    weights, kinds = {}, {}
    for v in graph.inputs:
        if v.role == "weight":
            s = None if generic_path(v.name) in buffers else style_of(v.name) or style_of(v.module)
            weights[v.name] = weight_placement(arch, v, s, tp, heads)
            if s is not None and s.weight is not None:
                kinds[v.name] = s.weight
    for st in graph.stmts:  # a table tied to lm_head: the embedding's own style makes it a table
        table = graph.values[st.reads[0]] if st.cls == Ops.EMBEDDING else None
        s = style_of(st.module or "") if table is not None and table.role == "weight" else None
        if table is None or s is None or s.weight not in ("vocab", "embedding_colwise") or \
                kinds.get(table.name) == s.weight:
            continue
        placed = weight_placement(arch, table, s, tp, heads)
        if placed != weights[table.name]:
            raise ImportFailed(f"{arch}: {table.name} is tied: {s.name} at {st.module} places it {placed}, "
                               f"{kinds.get(table.name, 'replicate')} at {table.module} {weights[table.name]}")
        kinds[table.name] = s.weight
    return weights, kinds


def shard(graph: Graph, tp: int, arch: str, plan: dict[str, str], base_prefix: str, heads: Heads,
          buffers: frozenset[str] = frozenset()) -> TPProgram:
    style_of, weights, kinds = plan_placements(graph, tp, arch, plan, base_prefix, heads, buffers)
    return Sharder(graph, tp, arch, style_of).run(weights, kinds)


__all__ = ["Heads", "PARTIAL", "Sharder", "TPProgram", "placements", "plan_placements", "shard"]
