"""Where a whole tensor's values live on N chips, as DTensor says it:

- `Replicate`: every chip has all of it (the spine);
- `Shard(splits)`: chip k has one block; `splits` are (axis, parts) pairs, major first, and
  chip k's block index on each split axis is a digit of k // r in that mixed radix, where
  r = N / (product of parts) chips hold each block (r > 1: a block replicated, as Megatron
  replicates key/value heads when there are fewer than chips);
- `Partial`: every chip has a partial sum of the same shape; a fold adds them.

>>> s = Shard(((1, 2), (2, 2)))
>>> s.block(3, tp=4), s.local((1, 4, 2, 8), tp=4)
({1: 1, 2: 1}, (1, 2, 1, 8))
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod


@dataclass(frozen=True)
class Replicate:
    def __str__(self) -> str:
        return "Replicate"


@dataclass(frozen=True)
class Partial:
    def __str__(self) -> str:
        return "Partial"


@dataclass(frozen=True)
class Shard:
    splits: tuple[tuple[int, int], ...]

    @property
    def parts(self) -> int:
        return prod(p for _, p in self.splits)

    def replication(self, tp: int) -> int:
        return tp // self.parts

    def axes(self) -> dict[int, int]:
        return dict(self.splits)

    def block(self, chip: int, tp: int) -> dict[int, int]:
        """Chip `chip`'s block index on each split axis."""
        q = chip // self.replication(tp)
        out = {}
        for axis, parts in reversed(self.splits):
            out[axis] = q % parts
            q //= parts
        return out

    def local(self, shape: tuple[int, ...], tp: int) -> tuple[int, ...]:
        parts = self.axes()
        return tuple(s // parts.get(a, 1) for a, s in enumerate(shape))

    def slice_of(self, value, chip: int, tp: int):
        """Chip `chip`'s block of a whole array (numpy or torch)."""
        index = [slice(None)] * len(value.shape)
        parts = self.axes()
        for axis, digit in self.block(chip, tp).items():
            size = value.shape[axis] // parts[axis]
            index[axis] = slice(digit * size, (digit + 1) * size)
        return value[tuple(index)]

    def __str__(self) -> str:
        return "Shard(" + ", ".join(f"axis {a} in {p}" for a, p in self.splits) + ")"


Placement = Replicate | Shard | Partial
REPLICATE = Replicate()
PARTIAL = Partial()


def local_shape(p: Placement, shape: tuple[int, ...], tp: int) -> tuple[int, ...]:
    return p.local(shape, tp) if isinstance(p, Shard) else shape
