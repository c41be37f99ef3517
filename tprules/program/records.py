"""The two records of the tensor program: a `Tensor` and a `Statement`, one class each.

The importer (frontends/), the loaded program (program/model.py) and the Shim API
(shim/graph.py, where `Op` is this `Statement`) make and read the same records: what
one stage writes the next reads, with no second spelling of a statement to keep equal.
Fields a stage does not know keep their defaults (a statement built by a compiler has no
quantized reads; a tensor of a fact file no importer role).

>>> s = Statement("mm", "matmul", ("x", "w"), "h", (("transpose_b", "1"),))
>>> s.attr("transpose_b"), s.statements, s.fold
('1', ('mm',), False)
>>> t = Tensor("h", (4, 8), "bf16")
>>> t.size, t.storage, t.buffer_shape, t.home
(32, dtype('float32'), (4, 8), None)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod

import numpy as np

INTEGER = {"i8": np.int8, "i32": np.int32, "i64": np.int64}  # how integer dtypes are stored


@dataclass(frozen=True)
class Tensor:
    """A tensor: its shape, dtype and home chip (None: on the spine, or not placed yet).
    An imported model's tensor also has its `role` (input, weight, folded, activation) and
    the `module` it belongs to (frontends/)."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    home: int | None = None  # the chip that owns it; None for a spine tensor
    role: str = field(default="", kw_only=True)
    module: str = field(default="", kw_only=True)

    @property
    def size(self) -> int:
        return prod(self.shape)

    @property
    def storage(self) -> np.dtype:
        """How values of this dtype are kept in buffers (f16 and bf16 as rounded f32)."""
        return np.dtype(INTEGER.get(self.dtype, np.float32))

    @property
    def buffer_shape(self) -> tuple[int, ...]:
        return self.shape or (1,)  # a scalar lives in a one-element buffer


@dataclass(frozen=True)
class Statement:
    """One statement: `writes = cls(*reads)` with its parameters (SPEC §2 `op`, `reads`,
    `writes`, `attr`), whether it is folded, the operands the chosen shim reads quantized,
    and for an imported one the module and ATen op it came from."""

    name: str
    cls: str
    reads: tuple[str, ...]
    writes: str
    attrs: tuple[tuple[str, str], ...] = ()
    fold: bool = False
    quantized: tuple[tuple[int, str], ...] = ()  # (operand, format) the shim reads quantized
    module: str = field(default="", kw_only=True)
    aten: str = field(default="", kw_only=True)

    @property
    def statements(self) -> tuple[str, ...]:
        """The statements it stands for (itself; a Shim API `FusedOp` has several)."""
        return (self.name,)

    def attr(self, key: str, default: str | None = None) -> str | None:
        return dict(self.attrs).get(key, default)

    def quant_format(self, operand: int) -> str | None:
        return dict(self.quantized).get(operand)
