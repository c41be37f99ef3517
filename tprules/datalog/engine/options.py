"""How the engines are chosen and what they are asked: one explicit interface.

Every engine has the same `evaluate(facts, targets=None, base=None, only=None)` and says
what it can do in a `Capabilities`; callers ask the capabilities, never the engine's name.
`EngineOptions` is what one evaluation is asked (targets, and for an incremental engine a
base model and the relations whose strata are run again).

>>> ENGINE_TABLE["compiled"].capabilities.incremental, ENGINE_TABLE["pydatalog"].capabilities.incremental
(True, False)
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import Iterable


@dataclass(frozen=True)
class Capabilities:
    incremental: bool  # evaluates from a base model, running again only the strata `only` touches
    rounds: bool  # its models record the round each tuple was derived in (proofs need them)


@dataclass(frozen=True)
class EngineOptions:
    """What one evaluation is asked."""

    targets: tuple[str, ...] | None = None  # the relations wanted (None: all)
    base: object | None = None  # a model to start from (incremental engines)
    only: frozenset[str] | None = None  # with base: run again only strata holding one of these

    @classmethod
    def of(cls, targets: Iterable[str] | None = None, base=None, only=None) -> "EngineOptions":
        return cls(tuple(targets) if targets is not None else None, base, frozenset(only) if only is not None else None)

    def require(self, capabilities: Capabilities, engine: str) -> None:
        """ValueError when these options ask what the engine cannot do."""
        if (self.base is not None or self.only is not None) and not capabilities.incremental:
            raise ValueError(f"the {engine} engine does not evaluate incrementally (base/only)")


@dataclass(frozen=True)
class EngineKind:
    name: str
    module: str
    cls: str
    capabilities: Capabilities
    shares_symbols: bool = False  # built over a loaded program's symbol table

    def make(self, checked, program=None):
        engine = getattr(import_module(self.module), self.cls)
        if self.shares_symbols:
            return engine(checked, program.facts.symbols if program is not None else None)
        return engine(checked)


ENGINE_TABLE = {e.name: e for e in (
    EngineKind("fast", "tprules.datalog.engine.fast", "ColumnarEngine", Capabilities(incremental=True, rounds=True),
               shares_symbols=True),
    EngineKind("compiled", "tprules.datalog.engine.compiled", "Evaluator", Capabilities(incremental=True, rounds=True)),
    EngineKind("pydatalog", "tprules.datalog.engine.pydatalog_backend", "PyDatalogEngine",
               Capabilities(incremental=False, rounds=False)),
)}
