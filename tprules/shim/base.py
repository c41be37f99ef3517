"""A base chip described by shim facts (SPEC §2 `shim`, `supports`, `limit`, `quantized`; and `views`).

Its `fits` is answered by the base rules (`rules/base.dl`, `base_refused`) over the graph,
as one device: every tensor on the spine of a one-chip program.

>>> from tprules.shim import TensorGraph, Op
>>> base = FactShim.load("cuda-lane:rtx3060:TwoPassInt8")
>>> base.supports("softmax")
<Support.ALONE: 'alone'>
>>> g = TensorGraph()
>>> for t in ("x", "w", "h", "r"):
...     _ = g.add_tensor(t, "f32", (4, 4))
>>> mm = g.add_op(Op("mm", "matmul", ("x", "w"), "h"))
>>> relu = g.add_op(Op("relu", "relu", ("h",), "r"))
>>> base.fits(g.fuse("mm_relu", ["mm", "relu"]), g).ok
True
>>> str(base.activation(mm, 0, g))
'int8_two_pass'

A program folder may describe a shim itself; its description shadows the library's shim
of the same name as a whole (SPEC §2), and `load` with the folder answers from it:

>>> FactShim.load("cuda-lane:h100:Bf16").source
'library'
"""

from __future__ import annotations

from pathlib import Path

from ..datalog.facts.base import FactBase
from ..errors import UsageError
from ..program.shimsource import LIBRARY, SHIM_RELATIONS
from .graph import AnyOp, Op, TensorGraph
from .protocol import Fit, QuantFormat, Refusal, Support
from .session import SessionCache, open_session, rule_sources


class FactShim:
    """A base shim from shim facts, answered by the rules of `rules` (default: the project's)."""

    def __init__(self, name: str, facts: FactBase, rules: Path | str | None = None, engine: str = "fast",
                 checked=None, source: str = LIBRARY):
        known = [s for (s,) in facts.ordered("shim")]
        if name not in known:
            raise UsageError(f"unknown shim {name}; known shims: {', '.join(known)}")
        self._name = name
        self.source = source  # where the shim is described: "program" or "library"
        self._facts = facts
        self._rules, self._engine, self._checked = rules, engine, checked
        self._levels = {c: Support(level) for s, c, level in facts.tuples("supports") if s == name}
        self._quantized = {(c, i): QuantFormat(f) for s, c, i, f in facts.tuples("quantized") if s == name}
        self._sessions = SessionCache()

    @classmethod
    def load(cls, name: str, program_dir: Path | str | None = None, library: Path | str | None = None,
             **options) -> "FactShim":
        """A shim of the shim library (`facts/shims/` unless `library` names another folder), or
        the program's own when `program_dir` describes a shim of that name (which then shadows
        the library's as a whole)."""
        facts, sources = load_shims(program_dir, library)
        return cls(name, facts, source=sources.get(name, LIBRARY), **options)

    @property
    def checked(self):
        if self._checked is None:
            from ..workspace import load_checked_rules

            self._checked = load_checked_rules(self._rules)
        return self._checked

    # -- the Shim protocol -----------------------------------------------------------

    def name(self) -> str:
        return self._name

    def supports(self, cls: str) -> Support:
        if cls not in self._levels:
            raise ValueError(f"shim {self._name} does not answer class {cls} (not in the class registry)")
        return self._levels[cls]

    def activation(self, consumer: AnyOp, operand: int, g: TensorGraph) -> QuantFormat | None:
        if not isinstance(consumer, Op):
            return None
        return self._quantized.get((consumer.cls, operand))

    def fits(self, op: AnyOp, g: TensorGraph) -> Fit:
        return self.fits_all([op], g)[op.name]

    def fits_all(self, ops: list[AnyOp], g: TensorGraph) -> dict[str, Fit]:
        """`fits` for many ops in one evaluation of the base rules."""
        session = self._session(g)
        answers = session.ask({op.name: op.statements for op in ops}, relation="base_refused")
        sources = rule_sources(self.checked)
        return {op.name: _fit(op.name, answers[op.name], sources) for op in ops}

    # -- facts -------------------------------------------------------------------------

    def collective_kernels(self) -> tuple[str, ...]:
        """The collective kernels this shim declares it builds (SPEC §2 `collective_kernel`)."""
        return tuple(p for s, p in self._facts.ordered("collective_kernel") if s == self._name)

    def shim_facts(self) -> dict[str, list[tuple]]:
        """This shim's facts and the class registry, as fact tuples."""
        out = {rel: [t for t in self._facts.ordered(rel) if t[0] == self._name] for rel in SHIM_RELATIONS}
        out["registry"] = self._facts.ordered("registry")
        return out

    def _session(self, g: TensorGraph):
        session = self._sessions.get(g)
        if session is None:
            relations = g.to_facts()
            relations.update(self.shim_facts())
            relations["chips"] = [(1,)]
            relations["spine"] = [(t.name,) for t in g.tensors]  # one device: nothing is placed
            session = open_session(relations, self._name, self.checked, self._engine)
            self._sessions.put(g, session)
        return session


def _fit(name: str, reasons: tuple[str, ...], sources: dict) -> Fit:
    refusals = []
    for reason in reasons:
        owner, where, why = sources.get(reason, ("base", "rules", ""))
        refusals.append(Refusal(reason, owner, where, why))
    return Fit(name, tuple(refusals))


def load_library(library: Path | str | None = None) -> FactBase:
    """The shim library's facts (`facts/shims/` unless `library` names another folder), checked."""
    return load_shims(None, library)[0]


def load_shims(program_dir: Path | str | None = None,
               library: Path | str | None = None) -> tuple[FactBase, dict[str, str]]:
    """The shim library's facts with a program folder's own shims shadowing it, checked, and
    where each shim is described (program/shimsource.py)."""
    from ..config import shim_library_dir
    from ..datalog.facts.base import load_fact_dir
    from ..program.schema import SHIM
    from ..program.shimsource import shadow
    from ..program.wellformed import check_wellformed

    schema = {n: r.types for n, r in SHIM.items()}
    folder = Path(library) if library is not None else shim_library_dir()
    facts = load_fact_dir(folder, schema, strict=False)
    own = load_fact_dir(Path(program_dir), schema, strict=False) if program_dir is not None else FactBase()
    sources, shadowed = shadow(own, facts)
    facts = own.absorb(facts)
    check_wellformed(facts, shims_only=True, shadowed=shadowed)
    return facts, sources


def library_facts(library: Path | str | None = None) -> dict[str, list[tuple]]:
    """The shim library's facts by relation, in file order (e.g. `registry`, the class registry)."""
    facts = load_library(library)
    return {rel: facts.ordered(rel) for rel in (*SHIM_RELATIONS, "registry")}


def own_shim(builder, name: str, patterns: tuple[str, ...] = (), limits: dict[str, int] | None = None) -> None:
    """The program `builder` (program/builder.ProgramBuilder) describes its own shim `name`:
    every class of the library's registry fused, these limits, these collective kernels (SPEC §2)."""
    builder.add_facts("shim", [(name,)])
    builder.add_facts("supports", [(name, cls, "fused") for cls, *_ in library_facts()["registry"]])
    builder.add_facts("limit", [(name, k, v) for k, v in (limits or {}).items()])
    builder.add_facts("collective_kernel", [(name, p) for p in patterns])
