"""transformers' plan styles at a module's boundary, as their flags say (styles.py): a value
leaving a module gathered (`output` "gather") or folded ("reduce"); a replicated value
entering it sliced per chip (`split_input`), shared (`share_input`: 1 / N each) or routed to
each chip's experts (`dispatch`, dispatch.py); a partial kept through a module's linear
statements (`linear`). The Sharder reads them through the same calls as torch's ports
(ports.py, the Sharder's `Boundary`): `leaving`, `entering`, `kept`, `after`, `unsplit`.
"""

from __future__ import annotations

from typing import Callable

from ...ops import ELEMENTWISE, LAYOUT
from ..errors import ImportFailed
from ..graph import Statement, under
from .dispatch import Dispatch
from .emit import Emitter
from .placement import REPLICATE, Partial, Placement, Replicate, Shard
from .styles import Style
from .table import partial_through


class Flags:
    """The Sharder's boundaries where the plan's styles are transformers' (flags, not ports)."""

    def __init__(self, emit: Emitter, styled: Callable[[str], list[tuple[str, Style]]], dispatch: Dispatch,
                 writers: dict[str, Statement]):
        self.e = emit
        self.styled = styled
        self.dispatch = dispatch
        self.writers = writers

    def leaving(self, value: str, reader: str) -> str:
        """A module's value read outside it: gathered (`output` "gather") where it is split,
        folded ("reduce") where it is partial, at each styled module it leaves."""
        v = self.e.values[value]
        for prefix, s in self.styled(v.module):
            if under(reader, prefix):
                continue
            if s.output == "gather" and isinstance(self.e.place[value], Shard):
                self.e.gather(value, prefix, s)
            elif s.output == "reduce" and isinstance(self.e.place[value], Partial):
                self.e.fold(value)
        return value

    def entering(self, value: str, reader: str) -> str:
        """A value read inside a styled module it is not from: the routing slots of each chip
        (`dispatch`), each chip's share (`share_input`) or slice (`split_input`) of a
        replicated one; a value a split-input module computed, read whole outside it."""
        v = self.e.values[value]
        if v.role not in ("activation", "input") or self.e.tp == 1:
            return value  # on one chip every value is whole
        if isinstance(self.e.place[value], Shard) and self._left_split_input(v.module, reader):
            return self._whole(value, set())
        for prefix, s in self.styled(reader):
            if s.dispatch and not under(v.module, prefix) and isinstance(self.e.place[value], Replicate):
                return self.dispatch.enter(value, prefix, s)
            if s.share_input and not under(v.module, prefix) and isinstance(self.e.place[value], Replicate):
                return self.e.share(value, prefix, s)
            if not s.split_input or under(v.module, prefix):
                continue
            if isinstance(self.e.place[value], Partial):
                self.e.fold(value)
            if isinstance(self.e.place[value], Replicate):
                return self.e.split(value, prefix, s)
        return value

    def kept(self, st: Statement, reads: list[str]) -> tuple[list[str], bool]:
        """A statement's reads, and whether its result stays partial: linear in a partial
        inside a `linear` style (moe_tp_experts), or run on each chip's own experts (dispatch)."""
        keep = self.keeps_partial(st.module or "") and partial_through(st.cls, [self.e.place[r] for r in reads])
        if not keep and (own := self.dispatch.local_reads(st, reads)) is not None:
            keep, reads = True, own
        return reads, keep

    def after(self, writes: str, reads: list[str]) -> None:
        """Nothing to follow: a transformers style hands on plain local tensors only."""

    def unsplit(self, output: str, placement: Placement) -> str:
        return (f"the logits would stay split over the chips ({placement}): the plan gathers them nowhere "
                "(colwise_gather_output on lm_head would); leave lm_head out of the plan")

    def _left_split_input(self, module: str, reader: str) -> bool:
        """Whether `module` is in a split-input module that `reader` is outside of."""
        return any(s.split_input and not under(reader, prefix) for prefix, s in self.styled(module))

    def _whole(self, value: str, seen: set) -> str:
        """The whole value of one that a split-input module computed from its slices, for a
        reader outside the module: the statements from the module's input to it again, on the
        spine, from the whole input. transformers slices the input inside the module, so
        nothing split ever leaves it; a reader outside reads such a value only where the
        importer shares one statement between two modules (the same view of one tensor,
        lowering/walk.py's `computed`), as Qwen4-Exp's block_inject_weight shares the flattened
        input of its sibling input_mix_weight_down."""
        source = next((v for v, name in self.e.splits.items() if name == value and name == f"{v}_split"), None)
        if source is not None or isinstance(self.e.place[value], Replicate):
            return source or value
        twin = self.e.named("", value, "_whole")
        if twin in self.e.place:
            return twin
        writer = self.writers.get(value)
        if writer is None or writer.cls not in (LAYOUT | ELEMENTWISE) or value in seen:
            raise ImportFailed(f"{self.e.arch}: {self.e.values[value].module}: {value} is split inside a "
                               "rowwise_split_input module and read outside it, where it is whole; it is computed by "
                               f"{writer.aten if writer else 'no statement'}, which the spine cannot compute again")
        reads = [self._whole(r, seen | {value}) for r in writer.reads]
        v = self.e.values[value]
        self.e.add(twin, v, v.module, REPLICATE)
        self.e.b.stmt(self.e.named("", writer.name, "_whole"), writer.cls, reads, twin, **dict(writer.attrs),
                    module=writer.module, aten=writer.aten)
        return twin

    def keeps_partial(self, module: str) -> bool:
        return any(s.linear for _, s in self.styled(module))


__all__ = ["Flags"]
