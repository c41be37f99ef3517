"""Build TP programs in Python and write them as SPEC §2 fact directories.

The builder adds rows to a program's `Facts` (facts.py) a tensor or a statement at a time,
with the checks a hand-written program needs. Used by the Sharder, the example generator,
the benchmark generator and the randomized tests.

>>> b = ProgramBuilder(chips=2)
>>> x = b.tensor("x", [4, 8], spine=True)
>>> w = b.tensor("w0", [8, 8], chip=0)
>>> h = b.stmt("mm0", "matmul", [x, w], b.tensor("h0", [4, 8], chip=0))
>>> b.candidate("f", ["mm0", "mm0"])
Traceback (most recent call last):
...
ValueError: candidate f needs at least two distinct members
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..ops import Ops
from .facts import Facts


class ProgramBuilder:
    def __init__(self, chips: int):
        self.chips = chips
        self.facts = Facts()
        self.facts["chips"].append((chips,))
        self.shapes: dict[str, tuple[int, ...]] = {}
        self.dtypes: dict[str, str] = {}
        self.writer: dict[str, str] = {}
        self.data: dict[str, np.ndarray] = {}
        self._statements: set[str] = set()  # for the duplicate check (model-scale programs)

    # -- tensors and statements ----------------------------------------------------

    def tensor(self, name: str, shape, dtype: str = "f32", chip: int | None = None, spine: bool = False,
               data: np.ndarray | None = None) -> str:
        if (chip is None) == (not spine):
            raise ValueError(f"tensor {name}: give exactly one of chip= or spine=True")
        if name in self.shapes:
            raise ValueError(f"tensor {name} declared twice")
        self.shapes[name] = tuple(int(s) for s in shape)
        self.dtypes[name] = dtype
        self.facts["tensor"].append((name, dtype))
        for axis, size in enumerate(self.shapes[name]):
            self.facts["shape"].append((name, axis, size))
        if spine:
            self.facts["spine"].append((name,))
        else:
            self.facts["placed"].append((name, chip))
        if data is not None:
            self.data[name] = data
        return name

    def stmt(self, name: str, cls: str, reads: list[str], out: str, **attrs) -> str:
        """Add statement `name`: `out = cls(*reads)`; returns the tensor it writes."""
        if name in self._statements:
            raise ValueError(f"statement {name} declared twice")
        self._statements.add(name)
        self.facts["op"].append((name, str(cls)))
        for i, t in enumerate(reads):
            self.facts["reads"].append((name, i, t))
        self.facts["writes"].append((name, out))
        self.writer[out] = name
        for key, value in attrs.items():
            self.facts["attr"].append((name, key, str(value)))
        return out

    def fold(self, name: str, partials: list[str], out: str, collective: str) -> str:
        """An all-reduce: `out = sum(partials)` marked as the collective's fold."""
        self.stmt(name, Ops.SUM.value, partials, out)
        self.facts["fold"].append((name, collective))
        return out

    def gather(self, name: str, slices: list[str], out: str, collective: str, axis: int) -> str:
        """An all-gather: `out = cat(slices, axis)`, slice i chip i's, marked as the fold of
        an `all_gather` collective."""
        self.stmt(name, Ops.CAT, slices, out, axis=axis)
        self.facts["fold"].append((name, collective))
        self.facts["collective"].append((collective, "all_gather"))
        return out

    def reduce_scatter(self, name: str, partials: list[str], total: str, collective: str, axis: int,
                       blocks: list[str]) -> list[str]:
        """A reduce-scatter: `total = sum(partials)` marked as the fold of a `reduce_scatter`
        collective, read only by one `slice` per chip, `<name>_<k>` taking block k of `axis`
        into `blocks[k]` (chip k's). Returns the blocks."""
        self.stmt(name, Ops.SUM.value, partials, total, axis=axis)
        self.facts["fold"].append((name, collective))
        self.facts["collective"].append((collective, "reduce_scatter"))
        shape = self.shapes[total]
        size = shape[axis] // len(blocks)
        for k, block in enumerate(blocks):
            self.stmt(f"{name}_{k}", Ops.SLICE.value, [total], block, axis=axis, start=k * size, end=(k + 1) * size)
        return blocks

    def section(self, section: str, statements: list[str], relocated_to: int | None = None) -> None:
        for o in statements:
            self.facts["section"].append((section, o))
        if relocated_to is not None:
            self.facts["relocated"].append((section, relocated_to))

    def candidate(self, fusion: str, members: list[str]) -> None:
        if len(set(members)) < 2:
            raise ValueError(f"candidate {fusion} needs at least two distinct members")
        for o in dict.fromkeys(members):
            self.facts["member"].append((fusion, o))

    def add_facts(self, rel: str, tuples: list[tuple]) -> None:
        """Facts of other relations (e.g. a program's own shim)."""
        self.facts[rel].extend(tuples)

    @property
    def statements(self) -> list[str]:
        return [o for o, _ in self.facts["op"]]

    # -- output -------------------------------------------------------------------

    def write(self, directory: Path) -> Path:
        """Write `<rel>.facts` files (empty relations are left out) and `data/*.npy` inputs."""
        directory = self.facts.write(directory)
        if self.data:
            (directory / "data").mkdir(exist_ok=True)
            for name, array in self.data.items():
                np.save(directory / "data" / f"{name}.npy", array)
        return directory
