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

from ..program.builder import ProgramBuilder
from .errors import ImportFailed
from .graph import OUTPUT, Graph, Stmt, Value
from .hf import plan_style
from .placement import PARTIAL, REPLICATE, Partial, Placement, Replicate, Shard, local_shape, plain
from .sharding import PARTIAL_THROUGH, NotShardable, rule


@dataclass
class Heads:
    heads: int | None
    kv: int | None


@dataclass
class TPProgram:
    builder: ProgramBuilder
    placement: dict[str, Placement]  # whole value → placement
    inputs: list[Value] = field(default_factory=list)

    def local_names(self, value: str, tp: int) -> list[tuple[str, int | None]]:
        """(tensor, chip) of each copy of a whole value: one spine tensor, or one per chip."""
        p = self.placement[value]
        return [(value, None)] if isinstance(p, Replicate) else [(f"{value}@{k}", k) for k in range(tp)]


def check_heads(source, heads: Heads, tp: int) -> None:
    """Heads must split over the chips; key/value heads may be fewer than chips (replicated)."""
    if heads.heads is None:
        return
    if heads.heads % tp:
        raise source.fail(f"{heads.heads} attention heads ({heads.kv} key/value heads) do not split over --tp {tp} chips")
    if heads.kv % tp and tp % heads.kv:
        raise source.fail(f"{heads.kv} key/value heads ({heads.heads} attention heads) neither split over --tp {tp} "
                          "chips nor replicate evenly on them")


def weight_placement(arch: str, value: Value, style: str | None, tp: int, heads: Heads) -> Placement:
    if style in (None, "replicate") or tp == 1:
        return REPLICATE
    leaf = value.name.rsplit(".", 1)[-1]
    module = value.module
    rank = len(value.shape)
    if style == "colwise" and rank in (1, 2):
        parts = tp
        if module.rsplit(".", 1)[-1] in ("k_proj", "v_proj") and heads.kv is not None and heads.kv < tp:
            parts = heads.kv  # Megatron: each key/value head on tp / kv chips
        placement = Shard((plain(0, parts, value.shape[0]),))
    elif style == "rowwise" and rank == 2:
        placement = Shard((plain(1, tp, value.shape[1]),))
    elif style == "rowwise" and leaf == "bias":
        return REPLICATE  # added once, after the fold
    else:
        raise ImportFailed(f"{arch}: the plan says {style} for {module}, but {value.name} has shape {list(value.shape)}")
    for split in placement.splits:
        if value.shape[split.axis] % split.parts:
            raise ImportFailed(f"{arch}: {value.name} has {value.shape[split.axis]} on axis {split.axis}, which does "
                               f"not split into {split.parts} ({style}, --tp {tp})")
    return placement


class Sharder:
    def __init__(self, graph: Graph, tp: int, arch: str):
        self.g = graph
        self.tp = tp
        self.arch = arch
        self.b = ProgramBuilder(chips=tp)
        self.place: dict[str, Placement] = {}
        self.folds: dict[str, str] = {}  # partial value → its fold statement

    def run(self, weights: dict[str, Placement]) -> TPProgram:
        for v in self.g.inputs:
            self.place[v.name] = weights.get(v.name, REPLICATE)
            self._declare(v)
        for st in self.g.stmts:
            self._statement(st)
        out = self.place[OUTPUT]
        if isinstance(out, Partial):
            self._fold(OUTPUT)
        elif isinstance(out, Shard):
            raise ImportFailed(f"{self.arch}: the logits would stay split over the chips ({out}): "
                               "tprules has no all-gather; leave lm_head out of the plan")
        return TPProgram(self.b, self.place, self.g.inputs)

    def _declare(self, v: Value) -> None:
        p = self.place[v.name]
        shape = local_shape(p, v.shape, self.tp)
        if isinstance(p, Replicate):
            self.b.tensor(v.name, shape, v.dtype, spine=True)
        else:
            for k in range(self.tp):
                self.b.tensor(f"{v.name}@{k}", shape, v.dtype, chip=k)

    def _local(self, value: str, chip: int | None) -> str:
        return value if isinstance(self.place[value], Replicate) or chip is None else f"{value}@{chip}"

    def _statement(self, st: Stmt) -> None:
        reads = list(st.reads)
        for r in reads:
            if isinstance(self.place[r], Partial) and st.cls not in PARTIAL_THROUGH:
                self._fold(r)
        ins = [self.place[r] for r in reads]
        out = self.g.values[st.writes]
        attrs = dict(st.attrs)
        try:
            placed = rule(st.cls)(attrs, ins, [self.g.values[r].shape for r in reads], out.shape, self.tp,
                                  transpose_b=attrs.get("transpose_b") == "1")
        except NotShardable as err:
            raise ImportFailed(f"{self.arch}: {st.aten} at {st.module or '(top)'}: {err}") from None
        self.place[st.writes] = placed
        self._declare(out)
        attrs.update(module=st.module or "(top)", aten=st.aten)
        folded = [r for r in reads if self.g.values[r].role == "folded"]
        if folded:  # constant subgraphs computed at import (RoPE tables, the causal mask)
            attrs["folded"] = ",".join(folded)
        chips = [None] if isinstance(placed, Replicate) else range(self.tp)
        for k in chips:
            name = st.name if k is None else f"{st.name}@{k}"
            self.b.stmt(name, st.cls, [self._local(r, k) for r in reads], self._local(st.writes, k), **attrs)

    def _fold(self, value: str) -> None:
        """The all-reduce of a partial value: its spine tensor is the value's own name."""
        if value in self.folds:
            return
        v = self.g.values[value]
        partials = [f"{value}@{k}" for k in range(self.tp)]
        self.place[value] = REPLICATE
        self.b.tensor(value, v.shape, v.dtype, spine=True)
        name = f"allreduce_{value}"
        self.b.fold(name, partials, value, collective=v.module or value)
        self.b.facts["attr"].append((name, "module", v.module or "(top)"))
        self.folds[value] = name


def shard(graph: Graph, tp: int, arch: str, plan: dict[str, str], base_prefix: str, heads: Heads) -> TPProgram:
    weights = {}
    for v in graph.inputs:
        if v.role == "weight":
            weights[v.name] = weight_placement(arch, v, plan_style(plan, v.module, base_prefix), tp, heads)
    return Sharder(graph, tp, arch).run(weights)


__all__ = ["Heads", "PARTIAL", "Sharder", "TPProgram", "shard"]
