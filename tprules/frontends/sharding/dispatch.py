"""Expert parallelism in the Sharder (sharder.py): transformers' EP plan, as its AllReduceEP runs
an `ep_dispatch_experts` module at inference, where every chip holds the same batch.

- `grouped_gemm` splits an experts module's stacked parameters on axis 0, the expert axis:
  chip k holds experts [k E/N, (k+1) E/N) whole (weights.weight_placement);
- the router runs on the spine; where its expert ids and routing weights enter the experts
  module, each chip keeps the routing slots whose expert it holds: their ids become local
  ids (id - k E/N), the others are sent to a slot that contributes nothing (weight 0).
  Per chip k, over the ids' shape, with P = E/N experts on each chip:

      shifted = add_scalar(ids, -k P)
      held = greater_equal(shifted, 0) - greater_equal(shifted, P)
      weights' = weights * held

  and the local ids as the experts module's form reads them:
  - `batched_mm` (each slot's weights gathered by id): clamp(shifted, 0, P - 1), an expert
    of the chip whose product the weight 0 drops (transformers clamps its sentinel so);
  - `grouped_mm` (the slots sorted by id, one grouped matmul per projection): the sentinel
    P where a slot is not held, transformers' `local_index`:

        local = clamp(where(greater_equal(shifted, 0), shifted, add_scalar(shifted, E)), max=P)

    The chip's sort puts its sentinel slots last; the module's histogram of E bins counts
    them in bin P, which no offset reads: each grouped matmul reads the chip's P experts
    and the first P offsets (a slice per chip: transformers' histc of P bins), so the rows
    past the last offset, the sentinel slots, are not multiplied (zero, as transformers
    masks them). A split table gathered by the sorted ids (a bias) reads them clamped to
    P - 1, as transformers clamps expert_ids_g.

- inside the module every statement that reads a chip's slots (or what they gave) runs on
  each chip over its own experts, its value the chip's own (placed Partial: the chips'
  copies are summed only where the module's output leaves it, by the style's one fold);
  the split experts are read only by expert id (the sharding table's `by_expert`: gathered
  by take_rows, or a grouped matmul's groups).

Which value is which: of the values read inside the module and written outside it, the
one of an integer dtype is the expert ids, the floating one of the same shape the routing
weights (transformers' `experts(hidden_states, top_k_index, top_k_weights)`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ...ops import Ops
from ..errors import ImportFailed
from ..graph import Graph, Statement, Tensor, under
from .emit import Emitter
from .placement import PARTIAL, Partial, Replicate, Shard
from .styles import Style
from .table import entry

INTEGER = ("i64", "i32", "i8")


@dataclass(frozen=True)
class Routing:
    """An `ep_dispatch_experts` module's routing inputs and its expert count."""

    module: str
    style: Style
    ids: str  # the expert ids (top_k_index)
    weights: str  # the routing weights (top_k_weights)
    experts: int  # E, the experts the module's split parameters stack
    grouped: bool = False  # the module sorts its slots by id for a grouped matmul (transformers' grouped_mm)


class Dispatch:
    """The Sharder's expert dispatch: only where the plan has a `dispatch` style."""

    def __init__(self, emit: Emitter, graph: Graph, styled: Callable[[str], list[tuple[str, Style]]],
                 styles: Callable[[str], Style | None], writers: dict[str, Statement]):
        self.e = emit
        self.g = graph
        self.styled = styled
        self.styles = styles  # module or parameter path → its plan style
        self.writers = writers  # value → the statement that writes it
        self.routings: dict[str, Routing] = {}
        self.dispatched: dict[str, str] = {}  # a routing input (or an operand made local) → each chip's of it

    def enter(self, value: str, module: str, s: Style) -> str:
        """A replicated value entering a dispatch module: each chip's kept routing slots of
        the expert ids or the routing weights; any other input (the hidden states) as it is."""
        r = self._routing(module, s)
        if value == r.ids:
            return self._local_ids(r)
        if value == r.weights:
            return self._masked(r)
        return value

    def local_reads(self, st: Statement, reads: list[str]) -> list[str] | None:
        """A statement of a dispatch module that runs on each chip's own experts (it reads a
        chip's routing slots, or what they gave): the operands each chip reads (a grouped
        matmul's first P offsets, a split table's ids clamped in the grouped form); None
        where it does not run so."""
        found = [(prefix, s) for prefix, s in self.styled(st.module or "") if s.dispatch]
        if not found or not any(isinstance(self.e.place[r], Partial) for r in reads):
            return None
        prefix, s = found[0]
        r = self._routing(prefix, s)
        split = [x for x in reads if isinstance(self.e.place[x], Shard)]
        by_expert = entry(st.cls).by_expert
        if split and by_expert is None:
            raise ImportFailed(f"{self.e.arch}: {s.name} at {prefix}: {st.aten} reads {split[0]}, split by expert, "
                               "other than by expert id (tprules reads split experts by take_rows or a grouped "
                               "matmul)")
        if by_expert == "groups":
            self._whole_by_id(r, reads[1], st.reads[1])
            if not isinstance(self.e.place[reads[2]], Partial):
                raise ImportFailed(f"{self.e.arch}: {r.style.name} at {r.module}: {st.aten} groups its rows by offsets "
                                   f"{reads[2]} that are not counted from each chip's own routing slots")
            return [reads[0], reads[1], self._first_offsets(r, reads[2])]
        if by_expert == "ids" and self._by_id(st.reads[1], r):
            self._whole_by_id(r, reads[0], st.reads[0])
            if r.grouped and isinstance(self.e.place[reads[0]], Shard):
                return [reads[0], self._clamped(r, reads[1])]
        return reads

    def _whole_by_id(self, r: Routing, table: str, whole: str) -> None:
        """A table of E rows read by expert id must be split by expert (chip k's local ids
        pick rows of its own experts)."""
        if isinstance(self.e.place[table], Replicate) and self.e.values[table].shape[:1] == (r.experts,):
            name = self._origin(whole)
            raise ImportFailed(f"{self.e.arch}: {r.style.name} at {r.module}: {name} is read by expert id, but the plan "
                               "keeps it whole, so each chip's local ids would pick other experts' rows (grouped_gemm "
                               "splits it by expert)")

    def _origin(self, value: str) -> str:
        """The value a view of it was made from (a permuted weight's parameter)."""
        while (writer := self.writers.get(value)) is not None and writer.cls in (Ops.PERMUTE, Ops.RESHAPE):
            value = writer.reads[0]
        return value

    def _by_id(self, value: str, r: Routing) -> bool:
        """Whether a value of the module holds the router's expert ids: through views, casts
        and a sort's values."""
        seen: set[str] = set()
        while value != r.ids:
            writer = self.writers.get(value)
            through = None if writer is None else entry(writer.cls).ids_through
            if writer is None or value in seen or through is None:
                return False
            seen.add(value)
            value = writer.reads[through]
        return True

    def _routing(self, module: str, s: Style) -> Routing:
        if module in self.routings:
            return self.routings[module]
        inputs: list[str] = []
        grouped = False
        for st in self.g.stmts:
            if not under(st.module or "", module):
                continue
            grouped = grouped or st.cls == Ops.GROUPED_MATMUL
            for r in st.reads:
                v = self.e.values[r]
                if v.role in ("activation", "input") and not under(v.module, module) and r not in inputs:
                    inputs.append(r)
        ids = [r for r in inputs if self.e.values[r].dtype in INTEGER]
        if len(ids) != 1:
            raise ImportFailed(f"{self.e.arch}: {s.name} at {module}: its inputs hold {len(ids)} integer tensors "
                               f"({', '.join(ids) or 'none'}); it needs exactly one, the expert ids")
        shape = self.e.values[ids[0]].shape
        weights = [r for r in inputs if r not in ids and self.e.values[r].shape == shape]
        if len(weights) != 1:
            raise ImportFailed(f"{self.e.arch}: {s.name} at {module}: {len(weights)} of its inputs have the expert ids' "
                               f"shape {list(shape)}; it needs exactly one, the routing weights")
        counts = sorted({v.shape[0] for v in self.g.inputs if v.role == "weight" and under(v.module, module)
                         and self._by_expert(v)})
        if len(counts) != 1:
            what = "none of its parameters is split by expert (grouped_gemm)" if not counts else \
                f"its parameters split by expert stack {' and '.join(map(str, counts))} experts"
            raise ImportFailed(f"{self.e.arch}: {s.name} at {module}: {what}")
        self.routings[module] = Routing(module, s, ids[0], weights[0], counts[0], grouped)
        return self.routings[module]

    def _by_expert(self, v: Tensor) -> bool:
        styled = self.styles(v.name) or self.styles(v.module)
        return styled is not None and styled.weight == "experts"

    def _stmt(self, stem: str, source: str, k: int, cls: str, reads: list[str], out: str, r: Routing,
              **attrs) -> None:
        self.e.b.stmt(self.e.named(f"ep_{stem}_", source) + f"@{k}", cls, reads, f"{out}@{k}", module=r.module,
                    aten=f"({r.style.name})", **attrs)

    def _local_ids(self, r: Routing) -> str:
        """Each chip's local expert ids (module docstring), and which slots it holds (`held`: 1 or 0)."""
        local = self.e.named("", r.ids, "_ep_local")
        if r.ids in self.dispatched:
            return local
        per = r.experts // self.e.tp
        ids, weights = self.e.values[r.ids], self.e.values[r.weights]
        shifted, low, high, held, wrapped, unwrapped = (self.e.named("", r.ids, f"_ep_{stem}") for stem in
                                                        ("shifted", "from", "past", "held", "wrapped", "unwrapped"))
        made = [(shifted, ids), (local, ids), (low, weights), (high, weights), (held, weights)]
        for name, like in made + ([(wrapped, ids), (unwrapped, ids)] if r.grouped else []):
            self.e.add(name, like, r.module, PARTIAL)
        for k in range(self.e.tp):
            self._stmt("shift", r.ids, k, Ops.ADD_SCALAR, [r.ids], shifted, r, value=str(-k * per))
            if r.grouped:  # the sentinel P where not held: below the chip's experts wrapped past them
                self._stmt("wrap", r.ids, k, Ops.ADD_SCALAR, [f"{shifted}@{k}"], wrapped, r, value=str(r.experts))
                self._stmt("unwrap", r.ids, k, Ops.WHERE, [f"{low}@{k}", f"{shifted}@{k}", f"{wrapped}@{k}"],
                           unwrapped, r)
                self._stmt("local", r.ids, k, Ops.CLAMP, [f"{unwrapped}@{k}"], local, r, max=str(per))
            else:
                self._stmt("local", r.ids, k, Ops.CLAMP, [f"{shifted}@{k}"], local, r, min="0", max=str(per - 1))
            self._stmt("from", r.ids, k, Ops.GREATER_EQUAL, [f"{shifted}@{k}"], low, r, value="0")
            self._stmt("past", r.ids, k, Ops.GREATER_EQUAL, [f"{shifted}@{k}"], high, r, value=str(per))
            self._stmt("held", r.ids, k, Ops.SUB, [f"{low}@{k}", f"{high}@{k}"], held, r)
        self.dispatched[r.ids] = local
        return local

    def _masked(self, r: Routing) -> str:
        """Each chip's routing weights: 0 on the slots whose expert it does not hold."""
        masked = self.e.named("", r.weights, "_ep")
        if r.weights in self.dispatched:
            return masked
        self._local_ids(r)
        self.e.add(masked, self.e.values[r.weights], r.module, PARTIAL)
        held = self.e.named("", r.ids, "_ep_held")
        for k in range(self.e.tp):
            self._stmt("mask", r.weights, k, Ops.MUL, [r.weights, f"{held}@{k}"], masked, r)
        self.dispatched[r.weights] = masked
        return masked

    def _first_offsets(self, r: Routing, offsets: str) -> str:
        """Each chip's first P offsets (its own experts' groups): a slice of the module's E."""
        first = self.e.named("", offsets, "_ep")
        if offsets in self.dispatched:
            return first
        per = r.experts // self.e.tp
        v = self.e.values[offsets]
        self.e.values[first] = Tensor(first, (per,), v.dtype, role="activation", module=r.module)
        self.e.place[first] = PARTIAL
        for k in range(self.e.tp):
            self.e.b.tensor(f"{first}@{k}", [per], v.dtype, chip=k)
            self._stmt("first", offsets, k, Ops.SLICE, [f"{offsets}@{k}"], first, r, axis=0, start=0, end=per,
                       step=1)
        self.dispatched[offsets] = first
        return first

    def _clamped(self, r: Routing, ids: str) -> str:
        """Sorted local ids clamped to P - 1: the sentinel slots' rows of a split table are
        those of the chip's last expert (rows no offset reads)."""
        clamped = self.e.named("", ids, "_ep_clamped")
        if ids in self.dispatched:
            return clamped
        self.e.add(clamped, self.e.values[ids], r.module, PARTIAL)
        for k in range(self.e.tp):
            self._stmt("cap", ids, k, Ops.CLAMP, [f"{ids}@{k}"], clamped, r, max=str(r.experts // self.e.tp - 1))
        self.dispatched[ids] = clamped
        return clamped


__all__ = ["Dispatch", "Routing"]
