"""The unfused reference: numpy, statement by statement, exactly SPEC §4.

Chip tensors have one value on their own chip, spine tensors one value for every chip; a
fold sums its partials (one per chip) into the spine. Nothing is fused, nothing moves.

>>> from tprules.workspace import Workspace                        # doctest: +SKIP
>>> prog = Program.from_workspace(Workspace("facts/megatron-mlp-tp2"))
>>> values = reference(prog, program_inputs(prog))
>>> values.get("out").shape
(8, 16)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...errors import IllFormed
from ...program.model import Program, Statement
from .semantics import OutOfRange, apply


@dataclass
class Values:
    """Tensor values: `chips[k]` for chip k's own tensors, `spine` for replicated ones."""

    spine: dict[str, np.ndarray] = field(default_factory=dict)
    chips: list[dict[str, np.ndarray]] = field(default_factory=list)

    def get(self, tensor: str, home: int | None = None) -> np.ndarray:
        if tensor in self.spine:
            return self.spine[tensor]
        if home is not None:
            return self.chips[home][tensor]
        for chip in self.chips:
            if tensor in chip:
                return chip[tensor]
        raise KeyError(tensor)

    def put(self, tensor: str, home: int | None, value: np.ndarray) -> None:
        (self.spine if home is None else self.chips[home])[tensor] = value


def reference(prog: Program, inputs: dict[str, np.ndarray]) -> Values:
    """Every tensor's value from the program's inputs. A statement's destination given in
    `inputs` is taken as given (the import's check on several inputs computes what does not
    depend on them once: frontends/drivers/verify.py)."""
    values = Values(chips=[{} for _ in range(prog.chips)])
    for name, value in inputs.items():
        values.put(name, prog.tensors[name].home, value)
    for s in prog.statements:
        if s.writes in inputs:
            continue
        operands = [values.get(t, prog.tensors[t].home) for t in s.reads]
        out = prog.tensors[s.writes]
        result = statement_value(prog, s, operands)
        values.put(s.writes, out.home, result.reshape(out.shape).copy())
    return values


def statement_value(prog: Program, s: Statement, operands: list[np.ndarray]) -> np.ndarray:
    """What statement `s` computes from its operands; an id out of range is ill-formed at its line."""
    out = prog.tensors[s.writes]
    try:
        return apply(s.cls, dict(s.attrs), operands, dict(s.quantized), out.dtype, out.shape)
    except OutOfRange as err:
        raise IllFormed(f"{s.name} ({s.cls}) reads ids {s.reads[err.operand]}: {err}", prog.where.get(s.name)) from None
