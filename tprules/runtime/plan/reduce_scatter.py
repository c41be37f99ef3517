"""Reduce-scatters (SPEC §1): a `sum` fold whose spine sum is read only by one `slice` per
chip, chip k's taking block k of the fold's `axis`. The runtime lowers the fold and its
slices as one reduce-scatter: chip k receives block k of every other chip's partial and
adds them (in operand order, float32), so no chip ever holds the whole sum. The fold's
destination on chip k holds block k (the rest zeros, never read): chip k's slice, whatever
group it was planned into, reads only that block.

>>> b = Scatter("rs", axis=0, block=2)
>>> b.index(1, 2)
(slice(2, 4, None), slice(None, None, None))
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Scatter:
    fold: str
    axis: int  # of the fold's destination, non-negative
    block: int  # its size along `axis` over the chips

    def index(self, chip: int, ndim: int) -> tuple:
        """The index of chip `chip`'s block in the fold's destination."""
        at = [slice(None)] * ndim
        at[self.axis] = slice(chip * self.block, (chip + 1) * self.block)
        return tuple(at)

    def take(self, array: np.ndarray, chip: int) -> np.ndarray:
        return array[self.index(chip, array.ndim)]

    def holding(self, block: np.ndarray, chip: int, shape, dtype) -> np.ndarray:
        """The fold's destination as chip `chip` holds it: its block, zeros elsewhere."""
        out = np.zeros(shape, dtype)
        out[self.index(chip, len(shape))] = block
        return out


def reduce_scatters(prog) -> dict[str, Scatter]:
    """Each reduce-scatter's fold → its Scatter (well-formedness checked that its slices
    take its blocks)."""
    out = {}
    for o, kind in prog.folds.items():
        if kind != "reduce_scatter":
            continue
        s = prog.statement(o)
        shape = prog.tensors[s.writes].shape
        axis = int(dict(s.attrs)["axis"]) % len(shape)
        out[o] = Scatter(o, axis, shape[axis] // prog.chips)
    return out


@dataclass(frozen=True)
class Shown:
    """What `run --show kernels` heads a collective with (a kernel's group, members, kind, place)."""

    group: str
    members: tuple[str, ...]
    kind: str
    place: str


def shown(kernel, prog, scatter: Scatter, world) -> tuple[Shown, str]:
    """A reduce-scatter as `--show kernels` prints it: no kernel source, what each chip receives."""
    fold = prog.statement(scatter.fold)
    out = prog.tensors[fold.writes]
    dims = "x".join(map(str, out.shape))
    how = "the world's reduce-scatter (MPI) of each rank's partial sum" if world.collectives else \
        "chip k adds block k of every chip's partial (operand order, float32)"
    lines = [f"// reduce-scatter of {fold.writes} [{dims}] {out.dtype} = sum({', '.join(fold.reads)}) along axis "
             f"{scatter.axis}: {how}"]
    for k in range(prog.chips):
        lines.append(f"// chip {k} receives block {k}, {k * scatter.block}:{(k + 1) * scatter.block} of axis "
                     f"{scatter.axis}; no chip holds the whole sum")
    return Shown(kernel.group, tuple(kernel.members), "reduce-scatter", kernel.place), "\n".join(lines)

