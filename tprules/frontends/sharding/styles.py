"""The tensor-parallel plan styles transformers registers (`distributed/tensor_parallel.py`,
`ALL_PARALLEL_STYLES`), and what each means for an import: how the weights it names are
split, and what happens at the module's boundary.

- `weight`: how a weight of the module (or the parameter the entry names) is placed:
  `colwise` (a linear's output axis: axis 0 of [out, in]; the bias too), `rowwise` (its
  input axis; the bias replicated, added after the fold), `packed_colwise` /
  `packed_rowwise` (a fused weight such as gate_up_proj packs `split_factor` projections
  along that axis: chip k gets its slice of each part), `vocab` (an embedding's rows:
  vocabulary-parallel), `embedding_colwise` (an embedding's hidden axis), `replicate`, or
  `experts` (an experts module's stacked parameter on axis 0, the expert axis: chip k holds
  experts [k E/N, (k+1) E/N) whole: grouped_gemm), or `None` (the style changes no weight:
  local_params, mla_kv_a_proj, all_reduce);
- `output`: `gather` (an all-gather makes the module's output whole on the spine),
  `reduce` (a fold sums its partial output at the boundary), or `None` (as it is);
- `split_input`: the module's replicated input is sliced per chip on its last axis before
  the module reads it (rowwise_split_input: each chip takes its slice, multiplies, and the
  fold sums the partials);
- `linear`: inside the module a partial sum stays partial through linear statements (a
  product with a replicated routing weight, a sum over the chosen experts) up to the
  boundary's one fold (moe_tp_experts);
- `share_input`: each chip reads its replicated input divided by N, a partial the
  enclosing fold sums back once (moe_identity_expert);
- `dispatch`: an experts module whose experts are split by expert (ep_dispatch_experts, as
  transformers' AllReduceEP runs it at inference): at its boundary each chip keeps the
  routing slots whose expert it holds (local ids, the others' weights 0), runs its own
  experts, and one fold sums the partial outputs where they leave (dispatch.py).

transformers applies its EP plan (`base_model_ep_plan`, `import hf --ep`) with the same
registry, in place of the TP plan; `ep_router` and `moe_tp_experts` it refuses there.

A style tprules cannot import says why (`missing`); the importer names every such entry
of a plan at once.

torch's styles (`torch.distributed.tensor.parallel`, read by source/torch_plan.py) describe their
boundary as DTensor does, one `Port` per positional input and per output: the layout torch
takes a plain tensor to have (`given`, DTensor.from_local), the layout it redistributes to
(`desired`), and whether it hands on a plain tensor (`use_local_output`). ports.py turns each
change of layout into the collective DTensor inserts (a gather, a fold, a reduce-scatter, or
each chip's slice).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Layout:
    """A placement as a torch style names it: Replicate() (`dim` None) or Shard(dim)."""

    dim: int | None = None

    def __str__(self) -> str:
        return "Replicate()" if self.dim is None else f"Shard({self.dim})"


REPLICATED = Layout()


@dataclass(frozen=True)
class Port:
    """One tensor at a module's boundary: a plain tensor is taken as `given` (None: the
    value's real placement: a DTensor, or a module's own output), redistributed to `desired`
    (None: left as it is), and handed on plain (`local`) or as a DTensor."""

    given: Layout | None
    desired: Layout | None
    local: bool = True


@dataclass(frozen=True)
class Style:
    name: str
    weight: str | None = None
    output: str | None = None
    split_input: bool = False
    linear: bool = False  # a partial stays partial through linear statements up to the boundary's fold
    share_input: bool = False  # each chip takes 1 / N of its replicated input (a partial)
    dispatch: bool = False  # whole experts per chip, routing slots masked at the boundary (dispatch.py)
    missing: str | None = None  # why it is not imported (None: it is)
    inputs: tuple[Port | None, ...] = ()  # a torch style's positional inputs (None: left alone)
    outputs: tuple[Port | None, ...] = ()  # a torch style's outputs

    @property
    def ported(self) -> bool:
        """Whether the boundary is torch's (ports), not transformers' (output, split_input, ...)."""
        return bool(self.inputs or self.outputs)


STYLES = {s.name: s for s in [
    Style("colwise", "colwise"),
    Style("colwise_gather_output", "colwise", output="gather"),
    Style("colwise_rep", "colwise", output="gather"),
    Style("rowwise", "rowwise"),
    Style("rowwise_split_input", "rowwise", output="reduce", split_input=True),
    Style("rowwise_rep", "rowwise", output="reduce", split_input=True),
    Style("packed_colwise", "packed_colwise"),
    Style("packed_rowwise", "packed_rowwise"),
    Style("embedding_rowwise", "vocab", output="reduce"),
    Style("embedding_colwise", "embedding_colwise", output="gather"),
    # a training concern (gradients all-reduced); at inference the weight is replicated
    Style("replicated_with_grad_allreduce", "replicate"),
    Style("replicate", "replicate"),
    # the module runs on its parameters as their own entries split them: nothing to add
    Style("local_params"),
    # the forward is the identity (the split and cat only fix the rope part's gradient)
    Style("mla_kv_a_proj"),
    Style("all_reduce", output="reduce"),
    # each chip runs the module on its whole copy of the input, as transformers' from_local of
    # a local tensor does; imported where the module works token by token (sequence.py)
    Style("sequence_parallel", "replicate"),
    # every expert's FFN split over the chips (gate_up packed_colwise, down rowwise, by their
    # own entries); routing on the spine; the experts' partial outputs folded by one all-reduce
    Style("moe_tp_experts", output="reduce", linear=True),
    # an identity expert inside moe_tp_experts: its input divided by N, so that the fold sums it once
    Style("moe_identity_expert", share_input=True),
    # expert parallelism (transformers' expert_parallel.py): whole experts per chip, split on
    # the expert axis; the experts module's routing slots masked per chip, one all-reduce
    Style("grouped_gemm", "experts"),
    Style("ep_dispatch_experts", output="reduce", dispatch=True),
    # transformers 5.25 no longer registers it, and refuses it in an EP plan
    Style("ep_router", missing="transformers no longer registers it: ep_dispatch_experts with grouped_gemm "
                               "replaces it"),
]}

# styles transformers refuses in an EP plan (DistributedMixin._resolve_parallel_plans)
NOT_IN_EP_PLAN = {"ep_router", "moe_tp_experts"}

SPLIT_FACTOR = 2  # packed_colwise / packed_rowwise as transformers registers them


def style(name: str) -> Style | None:
    return STYLES.get(name)


__all__ = ["Layout", "NOT_IN_EP_PLAN", "Port", "REPLICATED", "SPLIT_FACTOR", "STYLES", "Style", "style"]
