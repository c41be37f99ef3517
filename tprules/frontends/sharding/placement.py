"""Where a whole tensor's values live on N chips, as DTensor says it:

- `Replicate`: every chip has all of it (the spine);
- `Shard(splits)`: chip k has one block. Each `Split` cuts one axis: the axis is seen as
  [outer, factor, inner] (a plain split: outer = inner = 1) and its `factor` is cut into
  `parts` blocks. Splits are major first; chip k's block on each is a digit of k // r in
  that mixed radix, where r = N / (product of parts) chips hold each block (r > 1: a block
  replicated, as Megatron replicates key/value heads when there are fewer than chips). A
  factor with an outer part is what merging a batch axis with split heads makes;
- `Partial`: every chip has a partial sum of the same shape; a fold adds them.

>>> s = Shard((Split(1, 2, 2), Split(2, 2, 2)))
>>> sorted(s.block(3, tp=4).items()), s.local((1, 2, 2, 8), tp=4)
([(1, 1), (2, 1)], (1, 1, 1, 8))
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
class Split:
    axis: int
    parts: int
    factor: int  # the size of the cut factor of the axis
    inner: int = 1  # the size of what lies below it in the axis

    def moved(self, axis: int) -> "Split":
        return Split(axis, self.parts, self.factor, self.inner)

    def plain(self, size: int) -> bool:
        return self.factor == size and self.inner == 1

    def __str__(self) -> str:
        shape = f" (factor {self.factor}, inner {self.inner})" if self.inner != 1 else ""
        return f"axis {self.axis} in {self.parts}{shape}"


def plain(axis: int, parts: int, size: int) -> Split:
    """A split of a whole axis into contiguous blocks."""
    return Split(axis, parts, size)


@dataclass(frozen=True)
class Shard:
    splits: tuple[Split, ...]

    @property
    def parts(self) -> int:
        return prod(s.parts for s in self.splits)

    def replication(self, tp: int) -> int:
        return tp // self.parts

    def axes(self) -> dict[int, int]:
        return {s.axis: s.parts for s in self.splits}

    def on(self, axis: int) -> Split | None:
        return next((s for s in self.splits if s.axis == axis), None)

    def at(self, axis: int) -> Split:
        """The split of an axis that is split."""
        found = self.on(axis)
        assert found is not None, (self, axis)
        return found

    def block(self, chip: int, tp: int) -> dict[int, int]:
        """Chip `chip`'s block index on each split axis."""
        q = chip // self.replication(tp)
        out = {}
        for split in reversed(self.splits):
            out[split.axis] = q % split.parts
            q //= split.parts
        return out

    def local(self, shape: tuple[int, ...], tp: int) -> tuple[int, ...]:
        parts = self.axes()
        return tuple(s // parts.get(a, 1) for a, s in enumerate(shape))

    def slice_of(self, value, chip: int, tp: int):
        """Chip `chip`'s block of a whole array (numpy or torch): on each split axis, seen as
        [outer, factor, inner], its block of the factor (a packed weight's slice of each part)."""
        for axis, digit in self.block(chip, tp).items():
            split = self.at(axis)
            shape = tuple(value.shape)
            outer = shape[axis] // (split.factor * split.inner)
            size = split.factor // split.parts
            view = value.reshape(shape[:axis] + (outer, split.factor, split.inner) + shape[axis + 1:])
            index = [slice(None)] * len(view.shape)
            index[axis + 1] = slice(digit * size, (digit + 1) * size)
            value = view[tuple(index)].reshape(shape[:axis] + (outer * size * split.inner,) + shape[axis + 1:])
        return value

    def __str__(self) -> str:
        return "Shard(" + ", ".join(map(str, self.splits)) + ")"


Placement = Replicate | Shard | Partial
REPLICATE = Replicate()
PARTIAL = Partial()


def local_shape(p: Placement, shape: tuple[int, ...], tp: int) -> tuple[int, ...]:
    return p.local(shape, tp) if isinstance(p, Shard) else shape
