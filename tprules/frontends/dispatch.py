"""Expert parallelism in the Sharder (tp.py): transformers' EP plan, as its AllReduceEP runs
an `ep_dispatch_experts` module at inference, where every chip holds the same batch.

- `grouped_gemm` splits an experts module's stacked parameters on axis 0, the expert axis:
  chip k holds experts [k E/N, (k+1) E/N) whole (weights.weight_placement);
- the router runs on the spine; where its expert ids and routing weights enter the experts
  module, each chip keeps the routing slots whose expert it holds: their ids become local
  ids (id - k E/N), the others are sent to a slot that contributes nothing (a local id
  clamped into range, weight 0). Per chip k, over the ids' shape:

      shifted = add_scalar(ids, -k E/N)          local = clamp(shifted, 0, E/N - 1)
      held = greater_equal(shifted, 0) - greater_equal(shifted, E/N)
      weights' = weights * held

- inside the module every statement that reads a chip's slots (or what they gave) runs on
  each chip over its own experts, its value the chip's own (placed Partial: the chips'
  copies are summed only where the module's output leaves it, by the style's one fold);
  the split experts are read only by expert id (`EXPERT_READERS`). The statements do not
  depend on how the experts module computes (a batched matmul of the gathered weights, or
  a grouped one): only on reading the split weights by the local ids.

Which value is which: of the values read inside the module and written outside it, the
one of an integer dtype is the expert ids, the floating one of the same shape the routing
weights (transformers' `experts(hidden_states, top_k_index, top_k_weights)`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from ..ops import Ops
from .errors import ImportFailed
from .graph import under
from .placement import PARTIAL, Partial, Placement, Replicate, Shard
from .styles import Style

if TYPE_CHECKING:
    from ..program.builder import ProgramBuilder
    from .graph import Graph, Statement, Tensor

INTEGER = ("i64", "i32", "i8")
# the classes that may read an experts module's weights split by expert: by local expert id
EXPERT_READERS = (Ops.TAKE_ROWS,)


@dataclass(frozen=True)
class Routing:
    """An `ep_dispatch_experts` module's routing inputs and its expert count."""

    module: str
    style: Style
    ids: str  # the expert ids (top_k_index)
    weights: str  # the routing weights (top_k_weights)
    experts: int  # E, the experts the module's split parameters stack


class Dispatch:
    """The expert-parallel half of the Sharder: only where the plan has a `dispatch` style."""

    # the Sharder's (tp.py)
    g: Graph
    tp: int
    arch: str
    b: ProgramBuilder
    place: dict[str, Placement]
    styles: Callable[[str], Style | None]  # module or parameter path → its plan style

    if TYPE_CHECKING:
        def styled(self, module: str) -> list[tuple[str, Style]]: ...

        def _derived(self, name: str, like: Tensor, module: str, placement: Placement) -> None: ...

    def __init__(self) -> None:
        self.routings: dict[str, Routing] = {}
        self.dispatched: dict[str, str] = {}  # a routing input → each chip's kept slots of it

    def _dispatched(self, value: str, module: str, s: Style) -> str:
        """A replicated value entering a dispatch module: each chip's kept routing slots of
        the expert ids or the routing weights; any other input (the hidden states) as it is."""
        r = self._routing(module, s)
        if value == r.ids:
            return self._local_ids(r)
        if value == r.weights:
            return self._masked(r)
        return value

    def runs_local(self, st: Statement, reads: list[str]) -> bool:
        """Whether a statement of a dispatch module runs on each chip's own experts: it reads
        a chip's routing slots, or what they gave."""
        found = [(prefix, s) for prefix, s in self.styled(st.module or "") if s.dispatch]
        if not found or not any(isinstance(self.place[r], Partial) for r in reads):
            return False
        prefix, s = found[0]
        split = [r for r in reads if isinstance(self.place[r], Shard)]
        if split and st.cls not in EXPERT_READERS:
            raise ImportFailed(f"{self.arch}: {s.name} at {prefix}: {st.aten} reads {split[0]}, split by expert, "
                               "other than by expert id (tprules reads split experts by take_rows)")
        table = self.g.values[reads[0]]
        if st.cls == Ops.TAKE_ROWS and isinstance(self.place[table.name], Replicate) and \
                table.shape[:1] == (self._routing(prefix, s).experts,):
            raise ImportFailed(f"{self.arch}: {s.name} at {prefix}: {table.name} is read by expert id, but the plan "
                               "keeps it whole, so each chip's local ids would pick other experts' rows (grouped_gemm "
                               "splits it by expert)")
        return True

    def _routing(self, module: str, s: Style) -> Routing:
        if module in self.routings:
            return self.routings[module]
        inputs: list[str] = []
        for st in self.g.stmts:
            if not under(st.module or "", module):
                continue
            for r in st.reads:
                v = self.g.values[r]
                if v.role in ("activation", "input") and not under(v.module, module) and r not in inputs:
                    inputs.append(r)
        ids = [r for r in inputs if self.g.values[r].dtype in INTEGER]
        if len(ids) != 1:
            raise ImportFailed(f"{self.arch}: {s.name} at {module}: its inputs hold {len(ids)} integer tensors "
                               f"({', '.join(ids) or 'none'}); it needs exactly one, the expert ids")
        shape = self.g.values[ids[0]].shape
        weights = [r for r in inputs if r not in ids and self.g.values[r].shape == shape]
        if len(weights) != 1:
            raise ImportFailed(f"{self.arch}: {s.name} at {module}: {len(weights)} of its inputs have the expert ids' "
                               f"shape {list(shape)}; it needs exactly one, the routing weights")
        counts = sorted({v.shape[0] for v in self.g.inputs if v.role == "weight" and under(v.module, module)
                         and self._by_expert(v)})
        if len(counts) != 1:
            what = "none of its parameters is split by expert (grouped_gemm)" if not counts else \
                f"its parameters split by expert stack {' and '.join(map(str, counts))} experts"
            raise ImportFailed(f"{self.arch}: {s.name} at {module}: {what}")
        self.routings[module] = Routing(module, s, ids[0], weights[0], counts[0])
        return self.routings[module]

    def _by_expert(self, v: Tensor) -> bool:
        styled = self.styles(v.name) or self.styles(v.module)
        return styled is not None and styled.weight == "experts"

    def _local_ids(self, r: Routing) -> str:
        """Each chip's local expert ids, and which slots it holds (`held`: 1 or 0)."""
        local = f"{r.ids}_ep_local"
        if r.ids in self.dispatched:
            return local
        per = r.experts // self.tp
        ids, weights = self.g.values[r.ids], self.g.values[r.weights]
        shifted, low, high, held = f"{r.ids}_ep_shifted", f"{r.ids}_ep_from", f"{r.ids}_ep_past", f"{r.ids}_ep_held"
        for name, like in ((shifted, ids), (local, ids), (low, weights), (high, weights), (held, weights)):
            self._derived(name, like, r.module, PARTIAL)
        attrs = {"module": r.module, "aten": f"({r.style.name})"}
        for k in range(self.tp):
            self.b.stmt(f"ep_shift_{r.ids}@{k}", Ops.ADD_SCALAR, [r.ids], f"{shifted}@{k}", value=str(-k * per),
                        **attrs)
            self.b.stmt(f"ep_local_{r.ids}@{k}", Ops.CLAMP, [f"{shifted}@{k}"], f"{local}@{k}", min="0",
                        max=str(per - 1), **attrs)
            self.b.stmt(f"ep_from_{r.ids}@{k}", Ops.GREATER_EQUAL, [f"{shifted}@{k}"], f"{low}@{k}", value="0",
                        **attrs)
            self.b.stmt(f"ep_past_{r.ids}@{k}", Ops.GREATER_EQUAL, [f"{shifted}@{k}"], f"{high}@{k}",
                        value=str(per), **attrs)
            self.b.stmt(f"ep_held_{r.ids}@{k}", Ops.SUB, [f"{low}@{k}", f"{high}@{k}"], f"{held}@{k}", **attrs)
        self.dispatched[r.ids] = local
        return local

    def _masked(self, r: Routing) -> str:
        """Each chip's routing weights: 0 on the slots whose expert it does not hold."""
        masked = f"{r.weights}_ep"
        if r.weights in self.dispatched:
            return masked
        self._local_ids(r)
        self._derived(masked, self.g.values[r.weights], r.module, PARTIAL)
        for k in range(self.tp):
            self.b.stmt(f"ep_mask_{r.weights}@{k}", Ops.MUL, [r.weights, f"{r.ids}_ep_held@{k}"], f"{masked}@{k}",
                        module=r.module, aten=f"({r.style.name})")
        self.dispatched[r.weights] = masked
        return masked


__all__ = ["EXPERT_READERS", "Dispatch", "Routing"]
