"""The chip interface a fusion optimizer asks before it fuses: the `Shim` protocol.

A shim answers for one chip and configuration (`name()`): what its backend does with a
class (`supports`), whether it builds an op, fused or not, as it stands in a graph
(`fits`), and in which quantized form a consumer reads an operand (`activation`).

Any object with these four methods is a shim, so a compiler's own backend can be one:

>>> class MyBackend:
...     def name(self): return "my-npu:v1"
...     def supports(self, cls): return Support.FUSED
...     def fits(self, op, g): return Fit.success(op.name)
...     def activation(self, consumer, operand, g): return None
>>> isinstance(MyBackend(), Shim)
True
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from .graph import AnyOp, TensorGraph


class Support(str, Enum):
    """What a chip's backend does with a class (SPEC §2 `supports` levels)."""

    FUSED = "fused"  # may be a member of a fused op
    ALONE = "alone"  # runs only as its own kernel
    NONE = "none"  # not built at all

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class QuantFormat:
    """A quantized form in which a consumer reads an operand, e.g. `int8_two_pass` (SPEC §4)."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Refusal:
    """One reason a chip does not build an op, with who says so and why.

    `owner` is `tp` (the tensor-parallel rules) or `base` (the base chip); `source` is the
    rule's `file:line` for an answer of the rules, or the base shim's name for an answer it
    gave itself; `why` is the rule's comment, or the base shim's own explanation.
    """

    reason: str
    owner: str
    source: str
    why: str = ""

    def __str__(self) -> str:
        why = f": {self.why}" if self.why else ""
        return f"{self.reason} ({self.owner}, {self.source}){why}"


@dataclass(frozen=True)
class Fit:
    """The answer of `fits`: success, or every reason why not together with the explanation.

    >>> Fit.success("f").ok
    True
    >>> bad = Fit("f", (Refusal("spans_chips", "tp", "rules/tp.dl:17", "a fused op runs on one chip"),))
    >>> bad.reasons, bool(bad)
    (('spans_chips',), False)
    >>> print(bad.explanation)
    f is refused:
      spans_chips (tp, rules/tp.dl:17): a fused op runs on one chip
    """

    op: str
    refusals: tuple[Refusal, ...] = ()

    @classmethod
    def success(cls, op: str) -> "Fit":
        return cls(op)

    @classmethod
    def refused(cls, op: str, *reasons: str, source: str = "", why: str = "") -> "Fit":
        """A base shim's refusal: `Fit.refused(op.name, "tile_too_big", why="...")`."""
        return cls(op, tuple(Refusal(r, "base", source, why) for r in reasons))

    @property
    def ok(self) -> bool:
        return not self.refusals

    def __bool__(self) -> bool:
        return self.ok

    @property
    def reasons(self) -> tuple[str, ...]:
        """The reasons, sorted and distinct (as `tprules check` reports them)."""
        return tuple(sorted({r.reason for r in self.refusals}))

    @property
    def explanation(self) -> str:
        if self.ok:
            return f"{self.op} fits"
        return "\n".join([f"{self.op} is refused:"] + [f"  {r}" for r in self.refusals])


@runtime_checkable
class Shim(Protocol):
    """A chip that a fusion optimizer asks (see the module docstring)."""

    def name(self) -> str:
        """The chip and the configuration it answers for, e.g. `cuda-lane:rtx3060:TwoPassInt8`."""
        ...

    def supports(self, cls: str) -> Support:
        """What the chip's backend does with statements of class `cls`."""
        ...

    def fits(self, op: "AnyOp", g: "TensorGraph") -> Fit:
        """Whether the chip builds `op` (a statement or a fused op) as it stands in `g`."""
        ...

    def activation(self, consumer: "AnyOp", operand: int, g: "TensorGraph") -> QuantFormat | None:
        """The quantized form in which `consumer` reads operand `operand`, or None for its values."""
        ...


def fits_all(shim: Shim, ops, g) -> dict[str, Fit]:
    """Ask `shim` about many ops at once: its own `fits_all` when it has one (one batched
    evaluation of the rules), else `fits` for each op."""
    batched = getattr(shim, "fits_all", None)
    if batched is not None:
        return batched(ops, g)
    return {op.name: shim.fits(op, g) for op in ops}
