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
- `inputs`, `outputs`: the ports of its boundary (below): `GATHER` (colwise_gather_output:
  an all-gather makes the module's output whole on the spine), `REDUCE` (a fold sums its
  partial output), `SPLIT` (rowwise_split_input: each chip takes its slice of the replicated
  input's last axis, multiplies, and the fold sums the partials), `SHARE`
  (moe_identity_expert: each chip reads its replicated input divided by N, a partial the
  enclosing fold sums back once);
- `linear`: inside the module a partial sum stays partial through linear statements (a
  product with a replicated routing weight, a sum over the chosen experts) up to the
  boundary's one fold (moe_tp_experts);
- `dispatch`: an experts module whose experts are split by expert (ep_dispatch_experts, as
  transformers' AllReduceEP runs it at inference): at its boundary each chip keeps the
  routing slots whose expert it holds (local ids, the others' weights 0), runs its own
  experts, and one fold sums the partial outputs where they leave (dispatch.py).

transformers applies its EP plan (`base_model_ep_plan`, `import hf --ep`) with the same
registry, in place of the TP plan; `ep_router` and `moe_tp_experts` it refuses there.

A style tprules cannot import says why (`missing`); the importer names every such entry
of a plan at once.

Every style's boundary is a list of ports, one per positional input and per output, as
DTensor describes one: the layout the style takes a tensor to have (`given`), the layout it
redistributes it to (`desired`: Replicate(), Shard(d) or Partial()), and whether it hands on
a plain tensor (`local`). ports.py turns each change of layout into the collective DTensor
inserts (a gather, a fold, a reduce-scatter, each chip's slice or 1 / N share).

- torch's styles (`torch.distributed.tensor.parallel`, read by source/torch_plan.py) take a
  plain tensor as `given` (DTensor.from_local: `taken`), so a tensor placed otherwise is
  refused: torch would run a program other than the model's;
- transformers' styles are its hooks, each written for one layout (`given`): `colwise_*`
  gather a chip's block of the output, `rowwise_*` fold a partial output and slice a
  replicated input, `moe_identity_expert` shares its input. tprules knows every value's
  real placement, so a hook acts on each value crossing the boundary in the layout it was
  written for, and any other crosses as it is (a partial entering where a replicated value
  is given is folded first: tprules folds a partial where it is read, transformers' rowwise
  at its module's output).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Layout:
    """A placement as a style names it: Replicate() (`dim` None), Shard(dim) or Partial()."""

    dim: int | None = None
    partial: bool = False

    def __str__(self) -> str:
        return "Partial()" if self.partial else "Replicate()" if self.dim is None else f"Shard({self.dim})"


REPLICATED = Layout()
SUMMED = Layout(partial=True)  # Partial(): each chip's partial sum
LAST = Layout(-1)  # Shard(-1): each chip's block of the last axis


@dataclass(frozen=True)
class Port:
    """One tensor at a module's boundary: a plain tensor is taken as `given` (None: the
    value's real placement: a DTensor, or a module's own output), redistributed to `desired`
    (None: left as it is), and handed on plain (`local`) or as a DTensor."""

    given: Layout | None
    desired: Layout | None
    local: bool = True
    taken: bool = True  # a plain tensor is taken as `given` (torch); False: a hook for `given` alone (transformers)


@dataclass(frozen=True)
class Style:
    name: str
    weight: str | None = None
    inputs: tuple[Port | None, ...] = ()  # its positional inputs (None: left alone)
    outputs: tuple[Port | None, ...] = ()  # its outputs
    linear: bool = False  # a partial stays partial through linear statements up to the boundary's fold
    dispatch: bool = False  # whole experts per chip, routing slots masked at the boundary (dispatch.py)
    partial_bias: bool = False  # a rowwise linear's bias added to its partial sum (DTensor), not after the fold
    missing: str | None = None  # why it is not imported (None: it is)

    @property
    def hooked_output(self) -> bool:
        """Whether a transformers hook changes the module's output (a gather or a fold)."""
        return any(p is not None and not p.taken for p in self.outputs)


# transformers' hooks as ports (see above)
GATHER = (Port(LAST, REPLICATED, taken=False),)  # each chip's block of the output all-gathered
REDUCE = (Port(SUMMED, REPLICATED, taken=False),)  # the partial output folded
SPLIT = (Port(REPLICATED, LAST, taken=False),)  # each chip's slice of the replicated input's last axis
SHARE = (Port(REPLICATED, SUMMED, taken=False),)  # each chip's 1 / N of the replicated input

STYLES = {s.name: s for s in [
    Style("colwise", "colwise"),
    Style("colwise_gather_output", "colwise", outputs=GATHER),
    Style("colwise_rep", "colwise", outputs=GATHER),
    # transformers 5.25: colwise by whole heads (a query/key/value projection); with fewer heads
    # than chips each head on N / heads chips, as a `colwise` k_proj / v_proj is here (weights.py)
    Style("unit_colwise", "colwise"),
    Style("rowwise", "rowwise"),
    Style("rowwise_split_input", "rowwise", inputs=SPLIT, outputs=REDUCE),
    Style("rowwise_rep", "rowwise", inputs=SPLIT, outputs=REDUCE),
    Style("packed_colwise", "packed_colwise"),
    Style("packed_rowwise", "packed_rowwise"),
    Style("embedding_rowwise", "vocab", outputs=REDUCE),
    Style("embedding_colwise", "embedding_colwise", outputs=GATHER),
    # a training concern (gradients all-reduced); at inference the weight is replicated
    Style("replicated_with_grad_allreduce", "replicate"),
    Style("replicate", "replicate"),
    # the module runs on its parameters as their own entries split them: nothing to add
    Style("local_params"),
    # the forward is the identity (the split and cat only fix the rope part's gradient)
    Style("mla_kv_a_proj"),
    Style("all_reduce", outputs=REDUCE),
    # each chip runs the module on its whole copy of the input, as transformers' from_local of
    # a local tensor does; imported where the module works token by token (sequence.py)
    Style("sequence_parallel", "replicate"),
    # every expert's FFN split over the chips (gate_up packed_colwise, down rowwise, by their
    # own entries); routing on the spine; the experts' partial outputs folded by one all-reduce
    Style("moe_tp_experts", outputs=REDUCE, linear=True),
    # an identity expert inside moe_tp_experts: its input divided by N, so that the fold sums it once
    Style("moe_identity_expert", inputs=SHARE),
    # expert parallelism (transformers' expert_parallel.py): whole experts per chip, split on
    # the expert axis; the experts module's routing slots masked per chip, one all-reduce
    Style("grouped_gemm", "experts"),
    Style("ep_dispatch_experts", outputs=REDUCE, dispatch=True),
    # transformers 5.25 no longer registers it, and refuses it in an EP plan
    Style("ep_router", missing="transformers no longer registers it: ep_dispatch_experts with grouped_gemm "
                               "replaces it"),
]}

# styles transformers refuses in an EP plan (DistributedMixin._resolve_parallel_plans)
NOT_IN_EP_PLAN = {"ep_router", "moe_tp_experts"}

SPLIT_FACTOR = 2  # packed_colwise / packed_rowwise as transformers registers them


def style(name: str) -> Style | None:
    return STYLES.get(name)


__all__ = ["LAST", "Layout", "NOT_IN_EP_PLAN", "Port", "REPLICATED", "SPLIT_FACTOR", "STYLES", "SUMMED", "Style", "style"]
