"""The imported model before tensor parallelism: statements of registry classes over whole
tensors, as the op table writes them (lowering/), before the sharding table splits them.

The records are the program's own (program/records.py): a `Tensor` with its `role` and
`module`, a `Statement` with the ATen op and the module path it came from, so every later
error and the facts can name them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..program.records import Statement, Tensor

INPUT = "input_ids"
OUTPUT = "logits"


@dataclass
class Graph:
    """Statements in program order, the values they bind, and the folded constants' sources."""

    values: dict[str, Tensor] = field(default_factory=dict)
    stmts: list[Statement] = field(default_factory=list)
    folded: dict[str, object] = field(default_factory=dict)  # folded value → its fx node (to compute it)
    output: str = OUTPUT  # the forward's output (a causal LM's logits)

    def add_value(self, value: Tensor) -> str:
        self.values.setdefault(value.name, value)
        return value.name

    @property
    def inputs(self) -> list[Tensor]:
        return [v for v in self.values.values() if v.role != "activation"]


def under(module: str, prefix: str) -> bool:
    """Whether module path `module` is `prefix` or inside it."""
    return module == prefix or module.startswith(prefix + ".")


__all__ = ["INPUT", "OUTPUT", "Graph", "Statement", "Tensor", "under"]
