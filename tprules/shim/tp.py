"""The tensor-parallel chip: what a base chip allows, less any fused op over more than one chip.

`TensorParallelShim(base, manifest)` asks the rules (`rules/tp.dl` over `rules/place.dl`)
whether a fused op spans chips, mixes a chip with the spine, or holds a collective's fold,
and gives every other question to `base`. When `base` is a `FactShim` the base rules answer
in the same evaluation; when it is any other Python shim, its `fits` answers become
`base_refusal` facts that the rules read, so its refusals show up next to the TP ones.

>>> from tprules.shim import FactShim, Manifest, TensorGraph
>>> g = TensorGraph.load("facts/megatron-mlp-tp2")
>>> tp = TensorParallelShim(FactShim.load("cuda-lane:h100:Bf16"), Manifest.load("facts/megatron-mlp-tp2"))
>>> tp.name()
'tp2:cuda-lane:h100:Bf16'
>>> tp.fits(g.fuse("f", ["gelu_0", "gelu_1"]), g).reasons
('spans_chips',)
>>> tp.fits(g.fuse("f", ["mm1_0", "gelu_0"]), g).ok
True
"""

from __future__ import annotations

from pathlib import Path

from .base import FactShim, library_facts
from .graph import AnyOp, FusedOp, TensorGraph
from .manifest import Manifest
from .protocol import Fit, QuantFormat, Refusal, Shim, Support, fits_all
from .session import SessionCache, open_session, require_inputs, rule_sources


class TensorParallelShim:
    """A `Shim` for a TP program on `manifest.chips` chips of `base`."""

    def __init__(self, base: Shim, manifest: Manifest, rules: Path | str | None = None, engine: str = "fast",
                 checked=None):
        if not isinstance(base, Shim):
            raise TypeError(f"base must implement the Shim protocol (name, supports, fits, activation); got {base!r}")
        self.base = base
        self.manifest = manifest
        self._rules, self._engine, self._checked = rules, engine, checked
        self._sessions = SessionCache()
        self._sources: dict[str, Refusal] | None = None  # by reason, made on the first refusal

    @property
    def checked(self):
        if self._checked is None:
            from ..workspace import load_checked_rules

            self._checked = load_checked_rules(self._rules)
        return self._checked

    @property
    def answered_by_rules(self) -> bool:
        """Whether the base rules answer for base (a FactShim), rather than base's own `fits`."""
        return isinstance(self.base, FactShim)

    # -- the Shim protocol -----------------------------------------------------------

    def name(self) -> str:
        return f"tp{self.manifest.chips}:{self.base.name()}"

    def supports(self, cls: str) -> Support:
        return self.base.supports(cls)

    def activation(self, consumer: AnyOp, operand: int, g: TensorGraph) -> QuantFormat | None:
        return self.base.activation(consumer, operand, g)

    def fits(self, op: AnyOp, g: TensorGraph) -> Fit:
        return self.fits_all([op], g)[op.name]

    def fits_all(self, ops: list[AnyOp], g: TensorGraph) -> dict[str, Fit]:
        """`fits` for many ops at once: one evaluation of the rules for all fused ops.

        A single statement runs where it runs; its question goes to base.
        """
        if len({op.name for op in ops}) < len(ops):
            raise ValueError("ops asked about together need distinct names")
        fused = [op for op in ops if isinstance(op, FusedOp)]
        single = [op for op in ops if not isinstance(op, FusedOp)]
        answers: dict[str, Fit] = {}
        if single:
            if self.answered_by_rules:
                found = self.session(g).ask({op.name: op.statements for op in single}, relation="base_refused")
                answers.update({name: self._fit(name, reasons, None) for name, reasons in found.items()})
            else:
                answers.update(fits_all(self.base, single, g))
        if fused:
            answers.update(self._fits_fused(fused, g))
        return {op.name: answers[op.name] for op in ops}

    def collective_kernels(self) -> tuple[str, ...]:
        """The collective kernels base declares (none for a base that is not a FactShim): a
        planner forms them and keeps every fold out of its other merges (planner.plan_graph)."""
        declared = getattr(self.base, "collective_kernels", None)
        return tuple(declared()) if declared is not None else ()

    def places(self, g: TensorGraph) -> dict[str, str]:
        """Each statement's place by the rules (`chip:K`, `spine`, or `collective` for a fold)."""
        return self.session(g).places()

    # -- asking the rules ----------------------------------------------------------

    def _fits_fused(self, fused: list[FusedOp], g: TensorGraph) -> dict[str, Fit]:
        session = self.session(g)
        proposals = {op.name: op.statements for op in fused}
        if self.answered_by_rules:
            found = session.ask(proposals)
            return {name: self._fit(name, reasons, None) for name, reasons in found.items()}
        said = fits_all(self.base, fused, g)
        facts = {"base_refusal": {(name, r.reason) for name, fit in said.items() for r in fit.refusals}}
        found = session.ask(proposals, facts)
        return {name: self._fit(name, reasons, said[name]) for name, reasons in found.items()}

    def _fit(self, name: str, reasons: tuple[str, ...], base_said) -> Fit:
        """The rules' reasons, each explained by base's own refusal when base gave it, else by its rule."""
        if not reasons:
            return Fit(name)
        given = {r.reason: r for r in base_said.refusals} if base_said is not None else {}
        return Fit(name, tuple(given.get(reason) or self._refusal(reason) for reason in reasons))

    def _refusal(self, reason: str) -> Refusal:
        """The refusal of a rule's reason, with the rule's place and comment (built once per reason)."""
        if self._sources is None:
            self._sources = {}
            for r, (owner, where, why) in rule_sources(self.checked).items():
                self._sources[r] = Refusal(r, owner, where, why)
        found = self._sources.get(reason)
        if found is None:
            found = self._sources[reason] = Refusal(reason, "tp", str(self.checked.source), "")
        return found

    def session(self, g: TensorGraph):
        """The rules evaluated over `g`, this manifest and base (cached per graph version)."""
        session = self._sessions.get(g)
        if session is None:
            relations = g.to_facts()
            relations.update(self.manifest.to_facts())
            computed = None
            if isinstance(self.base, FactShim):  # answered_by_rules
                relations.update(self.base.shim_facts())
            else:
                require_inputs(self.checked, "base_answers", "base_refusal")
                relations.update(self._python_base_facts())
                computed = {"base_answers": {(self.base.name(),)}}
            session = open_session(relations, self.base.name(), self.checked, self._engine, computed)
            self._sessions.put(g, session)
        return session

    def bind(self, g: TensorGraph, workspace) -> None:
        """Answer questions about `g` with an already loaded workspace over the same facts
        (the planner's fast path: `g` was built from that workspace's program)."""
        self._sessions.put(g, workspace)

    def _python_base_facts(self) -> dict[str, list[tuple]]:
        """A Python base's `supports` answers for every registry class, as shim facts."""
        registry = library_facts()["registry"]
        name = self.base.name()
        supports = [(name, cls, str(Support(self.base.supports(cls)))) for cls, _, _ in registry]
        return {"shim": [(name,)], "supports": supports, "registry": registry}
