"""The TP program as the Sharder writes it: every value (the graph's and those the sharding
adds) with its placement, declared on the spine or on each chip, and the few rewrites a
boundary or a rule asks for, each the collective or the slices DTensor would insert:

- `fold`: a partial's all-reduce; `reduce_scatter`: a partial's sum, each chip keeping its block;
- `gather`: a split value's all-gather;
- `split`, `block`: each chip's slice (or block) of a replicated value (Replicate → Shard);
- `share`: each chip's 1 / N of a replicated value (a partial that sums back to it).

A name made from another (`allreduce_x`, `x_split`) is kept with its parts (`derived`), so that
stamp.py renames the source and keeps the rest.
"""

from __future__ import annotations

from ...ops import Ops
from ...program.builder import ProgramBuilder
from ..errors import ImportFailed
from ..graph import Tensor
from .placement import PARTIAL, REPLICATE, Placement, Replicate, Shard, local_shape, plain
from .styles import Style


class Emitter:
    """The program under construction: its builder, its values and their placements."""

    def __init__(self, values: dict[str, Tensor], tp: int, arch: str):
        self.values = values
        self.tp = tp
        self.arch = arch
        self.b = ProgramBuilder(chips=tp)
        self.place: dict[str, Placement] = {}
        self.folds: dict[str, str] = {}  # partial value → its fold statement
        self.splits: dict[str, str] = {}  # replicated value → its per-chip slices, shares or blocks
        # each name the sharding makes from one of the graph's: (prefix, that name, suffix)
        self.derived: dict[str, tuple[str, str, str]] = {}

    def add(self, name: str, like: Tensor, module: str, placement: Placement) -> None:
        """A value the sharding adds (a slice, share, block or whole twin of `like`): its
        shape and dtype, placed and declared on its chips or the spine."""
        self.values[name] = Tensor(name, like.shape, like.dtype, role="activation", module=module)
        self.place[name] = placement
        self.declare(self.values[name])

    def declare(self, v: Tensor) -> None:
        p = self.place[v.name]
        shape = local_shape(p, v.shape, self.tp)
        if isinstance(p, Replicate):
            self.b.tensor(v.name, shape, v.dtype, spine=True)
        else:
            for k in range(self.tp):
                self.b.tensor(f"{v.name}@{k}", shape, v.dtype, chip=k)

    def named(self, prefix: str, source: str, suffix: str = "") -> str:
        """A name made from `source` (a value or statement name), kept with its parts (stamp.py
        renames the source and keeps the rest)."""
        name = f"{prefix}{source}{suffix}"
        self.derived[name] = (prefix, source, suffix)
        return name

    def local(self, value: str, chip: int | None) -> str:
        return value if isinstance(self.place[value], Replicate) or chip is None else f"{value}@{chip}"

    def fold(self, value: str) -> None:
        """The all-reduce of a partial value: its spine tensor is the value's own name."""
        if value in self.folds:
            return
        v = self.values[value]
        partials = [f"{value}@{k}" for k in range(self.tp)]
        self.place[value] = REPLICATE
        self.b.tensor(value, v.shape, v.dtype, spine=True)
        name = self.named("allreduce_", value)
        self.b.fold(name, partials, value, collective=v.module or value)
        self.b.facts["attr"].append((name, "module", v.module or "(top)"))
        self.folds[value] = name

    def reduce_scatter(self, value: str, axis: int, module: str) -> str:
        """Partial → Shard(axis): the sum's fold, read only by chip k's slice of block k."""
        v = self.values[value]
        blocks = self.named("", value, "_scattered")
        self.add(blocks, v, module, Shard((plain(axis, self.tp, v.shape[axis]),)))
        self.place[value] = REPLICATE  # the spine's sum, read by the slices alone
        self.b.tensor(value, v.shape, v.dtype, spine=True)
        name = self.named("reducescatter_", value)
        self.b.reduce_scatter(name, [f"{value}@{k}" for k in range(self.tp)], value, collective=name, axis=axis,
                              blocks=[f"{blocks}@{k}" for k in range(self.tp)])
        for o in [name] + [self.named("", name, f"_{k}") for k in range(self.tp)]:
            self.b.facts["attr"].append((o, "module", module))
        self.folds[value] = name
        return blocks

    def gather(self, value: str, module: str, s: Style, out: str | None = None, what: str = "output") -> str:
        """The all-gather of a value split over the chips: its spine tensor is the value's own
        name, or `out` (a value gathered for the readers of one module only, its collective
        named by its fold)."""
        p = self.place[value]
        assert isinstance(p, Shard)  # gathered only when split (the Sharder's _leaving, a port)
        v = self.values[value]
        split = p.splits[0]
        if len(p.splits) != 1 or split.parts != self.tp or not split.plain(v.shape[split.axis]):
            raise ImportFailed(f"{self.arch}: {s.name} at {module}: its {what} {value} is placed {p}; an all-gather "
                               f"joins one contiguous block per chip (needs a redistribution first)")
        slices = [f"{value}@{k}" for k in range(self.tp)]
        name = self.named("allgather_", out or value)
        if out is None:
            self.place[value] = REPLICATE
            self.b.tensor(value, v.shape, v.dtype, spine=True)
        else:
            self.add(out, v, module, REPLICATE)
        self.b.gather(name, slices, out or value, collective=module if out is None else name, axis=split.axis)
        self.b.facts["attr"].append((name, "module", module))
        return out or value

    def split(self, value: str, module: str, s: Style, axis: int | None = None) -> str:
        """Each chip's slice of a replicated value on its last axis, or on `axis` (a `slice`
        per chip: DTensor's Replicate → Shard, no communication)."""
        v = self.values[value]
        last = len(v.shape) - 1
        axis = last if axis is None else axis
        key = value if axis == last else f"{value}:{axis}"
        if key in self.splits:
            return self.splits[key]
        size = v.shape[axis]
        if size % self.tp:
            where = "its last axis" if axis == last else f"axis {axis}"
            raise ImportFailed(f"{self.arch}: {s.name} at {module}: its input {value} has {size} on {where}, "
                               f"which does not split into {self.tp}")
        name = self.named("", value, "_split" if axis == last else f"_split{axis}")
        self.add(name, v, module, Shard((plain(axis, self.tp, size),)))
        width = size // self.tp
        for k in range(self.tp):
            stem = "split" if axis == last else f"split{axis}"
            self.b.stmt(self.named(f"{stem}_", value) + f"@{k}", Ops.SLICE, [value], f"{name}@{k}", axis=axis, start=k * width,
                        end=(k + 1) * width, step=1, module=module, aten=f"({s.name})")
        self.splits[key] = name
        return name

    def share(self, value: str, module: str, s: Style) -> str:
        """Each chip's 1 / N of a replicated value: a partial that sums back to it."""
        key = self.named("", value, "_share")
        if key in self.splits:
            return self.splits[key]
        v = self.values[value]
        self.add(key, v, module, PARTIAL)
        for k in range(self.tp):
            self.b.stmt(self.named("share_", value) + f"@{k}", Ops.SCALE, [value], f"{key}@{k}", factor=repr(1.0 / self.tp),
                        module=module, aten=f"({s.name})")
        self.splits[key] = key
        return key

    def block(self, value: str, placement: Shard, module: str) -> str:
        """Chip k's block of a replicated value under `placement` (plain splits): slices."""
        key = self.named("", value, f"_block_{'_'.join(f'{sp.axis}x{sp.parts}' for sp in placement.splits)}")
        if key in self.splits:
            return self.splits[key]
        v = self.values[value]
        self.add(key, v, module, placement)
        for k in range(self.tp):
            src, digits = value, placement.block(k, self.tp)
            for n, sp in enumerate(placement.splits):
                width = v.shape[sp.axis] // sp.parts
                last = n == len(placement.splits) - 1
                dst = f"{key}@{k}" if last else self.named("", key, f"_{n}") + f"@{k}"
                if not last:
                    shape = list(local_shape(Shard(placement.splits[:n + 1]), v.shape, self.tp))
                    self.b.tensor(dst, shape, v.dtype, chip=k)
                self.b.stmt(self.named("block_", value, f"_{n}") + f"@{k}", Ops.SLICE, [src], dst, axis=sp.axis,
                            start=digits[sp.axis] * width, end=(digits[sp.axis] + 1) * width, step=1,
                            module=module, aten="(local block)")
                src = dst
        self.splits[key] = key
        return key


__all__ = ["Emitter"]
