"""The imported model before tensor parallelism: statements of registry classes over whole
tensors, as the op table writes them (aten.py), before the sharding table splits them.

Frozen and hashable like the rest of tprules' IR; each statement keeps the ATen op and the
module path it came from, so every later error and the facts can name them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

INPUT = "input_ids"
OUTPUT = "logits"


@dataclass(frozen=True)
class Value:
    """A whole tensor. role: `input` (input_ids), `weight` (a parameter or buffer, named by
    its path), `folded` (a constant subgraph computed at import), `activation`."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    role: str
    module: str = ""


@dataclass(frozen=True)
class Stmt:
    name: str
    cls: str
    reads: tuple[str, ...]
    writes: str
    attrs: tuple[tuple[str, str], ...]
    module: str
    aten: str

    def attr(self, key: str, default: str | None = None) -> str | None:
        return dict(self.attrs).get(key, default)


@dataclass
class Graph:
    """Statements in program order, the values they bind, and the folded constants' sources."""

    values: dict[str, Value] = field(default_factory=dict)
    stmts: list[Stmt] = field(default_factory=list)
    folded: dict[str, object] = field(default_factory=dict)  # folded value → its fx node (to compute it)

    def add_value(self, value: Value) -> str:
        self.values.setdefault(value.name, value)
        return value.name

    @property
    def inputs(self) -> list[Value]:
        return [v for v in self.values.values() if v.role != "activation"]
