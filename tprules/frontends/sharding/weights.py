"""The plan's weight placements: where each weight lives under its plan style (styles.py
says what each kind means), and the checks of a config's heads and experts against the
chips, before anything is traced.

- a weight the plan marks colwise is split on its output axis (axis 0 of [out, in]), its
  bias too; rowwise, on its input axis (the bias stays whole: it is added after the fold);
  everything else is replicated: the spine;
- key/value heads fewer than chips are replicated as Megatron does: the k and v weights
  are split by head, each head on N / heads chips;
- an experts module's stacked parameters under `grouped_gemm` (the EP plan) are split on
  the expert axis: chip k holds experts [k E/N, (k+1) E/N) whole.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...ops import Ops
from ..errors import ImportFailed
from ..graph import Graph, Tensor
from ..source.pretrained import generic_path, plan_style
from .placement import REPLICATE, Placement, Shard, Split, plain
from .styles import SPLIT_FACTOR, Style, style


@dataclass
class Heads:
    heads: int | None
    kv: int | None


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
        if not style.hooked_output and module.rsplit(".", 1)[-1] in ("k_proj", "v_proj") and heads.kv is not None \
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


def plan_placements(graph: Graph, tp: int, arch: str, plan: dict[str, str], base_prefix: str, heads: Heads,
                    buffers: frozenset[str] = frozenset()):
    """The plan read for a graph: its style of a module path, each weight's placement, and
    the weights' style kinds (what `Sharder.run` takes). A module's style splits its
    parameters only: its buffers (`buffers`, layer numbers as `*`: a scaled embedding's
    embed_scale) stay replicated, as transformers shards parameters only. (Its
    sequence_parallel modules the Sharder checks, sequence.py.)"""
    def style_of(path: str) -> Style | None:
        name = plan_style(plan, path, base_prefix)
        return style(name) if name is not None else None

    weights, kinds = placements(graph, tp, arch, style_of, heads, buffers)
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


__all__ = ["EXPERTS", "Heads", "check_experts", "check_heads", "placements", "plan_placements", "weight_placement"]
