"""The op table's registry: each lowering registered by its ATen op's name with the
`lowering` decorator (Inductor's `@register_lowering(aten.add)`), a second registration of
an op an error unless it says `override=`; `OpTable`, the table `aten.build_table()` fills
from it (ATen op → lowering), and `Lowerings`, the read-only table a process shares.

    @lowering("aten.mm.default")
    def mm(ctx, n):
        a, b = n.args
        ...

Ops are named as torch prints them (`str(torch.ops.aten.mm.default)`), `operator.getitem`
by its Python name: registering imports no torch; `build_table` finds each op by its name.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable

# what the importer says of a node whose op has no lowering (walk.py, positions.py)
MISSING = "no registry class for it in the op table (tprules/frontends/lowering/aten.py)"

# torch dtype → tensor dtype; a boolean is kept as an i8 0 or 1
DTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "int64": "i64", "int32": "i32", "int8": "i8",
          "bool": "i8"}


@dataclass(frozen=True)
class Registration:
    """One op's lowering as registered: `optional` where this torch or transformers may lack
    the op (then it has no entry), `loads` a module whose import registers the op with torch,
    `reads_empty` where the op may read an empty tensor (a cat drops it)."""

    name: str
    fn: Callable
    optional: bool = False
    loads: str | None = None
    reads_empty: bool = False


class Registry:
    """ATen op name → its registration, filled as the op modules are imported."""

    def __init__(self) -> None:
        self.entries: dict[str, Registration] = {}

    def lowering(self, *names: str, override: bool = False, optional: bool = False, loads: str | None = None,
                 reads_empty: bool = False):
        """A decorator: the function lowers each op of `names`. An op registered already is an
        ImportError naming it and both places, unless `override=True` (which must replace one)."""
        def register(fn):
            for name in names:
                before = self.entries.get(name)
                if before is not None and not override:
                    raise ImportError(f"the op table registers {name} twice: {where(before.fn)} and {where(fn)} "
                                      "(override= says the second replaces the first)")
                if before is None and override:
                    raise ImportError(f"{where(fn)} overrides {name}, which has no lowering to replace")
                self.entries[name] = Registration(name, fn, optional, loads, reads_empty)
            return fn
        return register

    def names(self) -> list[str]:
        """The registered ops' names, sorted (what ops.txt lists)."""
        return sorted(self.entries)


REGISTRY = Registry()
lowering = REGISTRY.lowering
_ROOT = Path(__file__).resolve().parents[3]


def where(fn) -> str:
    """`file:line (name)` of a lowering, the file relative to the repository."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return repr(fn)
    path = Path(code.co_filename)
    shown = path.relative_to(_ROOT).as_posix() if path.is_relative_to(_ROOT) else str(path)
    return f"{shown}:{code.co_firstlineno} ({fn.__name__})"


def resolve(name: str, optional: bool = False, loads: str | None = None):
    """The op `name` names (torch's OpOverload, or `operator.getitem`), having imported
    `loads`; None where an optional op is absent."""
    import operator

    import torch

    space, rest = name.split(".", 1)
    if space == "operator":
        return getattr(operator, rest)
    try:
        if loads is not None:
            importlib.import_module(loads)
        packet, overload = rest.rsplit(".", 1)
        return getattr(getattr(getattr(torch.ops, space), packet), overload)
    except (ImportError, AttributeError, RuntimeError):
        if optional:
            return None
        raise


@dataclass
class OpTable:
    """ATen op → its lowering, and the ops the lowerer treats apart, as `aten.build_table()`
    fills it from the registry (a new table each time: one's own to change). `frozen()` is
    the read-only `Lowerings` a process shares and the lowerer reads."""

    ops: dict[object, Callable] = field(default_factory=dict)
    skip: set = field(default_factory=set)  # ops that compute nothing (assertions)
    cat: set = field(default_factory=set)  # ops that may read an empty tensor (they drop it)

    def frozen(self) -> "Lowerings":
        return Lowerings(MappingProxyType(dict(self.ops)), frozenset(self.skip), frozenset(self.cat))


@dataclass(frozen=True)
class Lowerings:
    """An op table, read-only (what `OpTable.frozen` gives)."""

    ops: Mapping[object, Callable]
    skip: frozenset
    cat: frozenset


def arg(n, i: int, key: str, default=None):
    """Argument `i` of a node, given by position or by name."""
    return n.args[i] if len(n.args) > i else n.kwargs.get(key, default)


class _Aten:
    """`torch.ops.aten`, imported on first use: the lowerings compare a node's op with
    `aten.lt.Scalar` as Inductor's do, and importing the op table imports no torch."""

    def __getattr__(self, name: str) -> Any:
        import torch

        return getattr(torch.ops.aten, name)


aten: Any = _Aten()
