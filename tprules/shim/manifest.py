"""The manifest: where each tensor lives, which statements are folds, which sections move.

>>> m = Manifest(chips=2, placed={"h_0": 0, "h_1": 1}, spine=frozenset({"x", "y"}),
...              folds={"allreduce": "mlp_out"})
>>> m.home("h_1"), m.home("x")
(1, None)
>>> sorted(m.to_facts()["fold"])
[('allreduce', 'mlp_out')]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Manifest:
    """SPEC §2's `chips`, `placed`, `spine`, `fold`, `collective`, `section` and `relocated` facts."""

    chips: int
    placed: dict[str, int] = field(default_factory=dict)  # tensor → its chip
    spine: frozenset[str] = frozenset()  # tensors replicated on every chip
    folds: dict[str, str] = field(default_factory=dict)  # statement → the collective it folds
    collectives: dict[str, str] = field(default_factory=dict)  # collective → its kind (absent: all_reduce)
    sections: dict[str, tuple[str, ...]] = field(default_factory=dict)  # section → statements
    relocated: dict[str, int] = field(default_factory=dict)  # section → the chip it runs on whole

    def home(self, tensor: str) -> int | None:
        """The chip whose own tensor this is, or None for a spine tensor."""
        if tensor in self.spine:
            return None
        return self.placed[tensor]

    def is_fold(self, statement: str) -> bool:
        return statement in self.folds

    @classmethod
    def from_facts(cls, facts) -> "Manifest":
        sections: dict[str, list[str]] = {}
        for s, o in facts.ordered("section"):
            sections.setdefault(s, []).append(o)
        chips = [n for (n,) in facts.ordered("chips")]
        return cls(
            chips=chips[0] if chips else 1,
            placed={t: c for t, c in facts.ordered("placed")},
            spine=frozenset(t for (t,) in facts.tuples("spine")),
            folds={o: c for o, c in facts.ordered("fold")},
            collectives={c: k for c, k in facts.ordered("collective")},
            sections={s: tuple(os) for s, os in sections.items()},
            relocated={s: c for s, c in facts.ordered("relocated")},
        )

    @classmethod
    def load(cls, directory: Path | str) -> "Manifest":
        """The manifest of a program folder's facts (SPEC §2)."""
        from ..datalog.facts.base import load_fact_dir
        from ..program.schema import PROGRAM

        return cls.from_facts(load_fact_dir(Path(directory), {n: r.types for n, r in PROGRAM.items()}, strict=False))

    def to_facts(self) -> dict[str, list[tuple]]:
        return {
            "chips": [(self.chips,)],
            "placed": sorted(self.placed.items()),
            "spine": [(t,) for t in sorted(self.spine)],
            "fold": sorted(self.folds.items()),
            "collective": sorted(self.collectives.items()),
            "section": [(s, o) for s, os in self.sections.items() for o in os],
            "relocated": sorted(self.relocated.items()),
        }
