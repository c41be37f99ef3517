"""Every verdict that differs between two rule sets over a corpus of programs (`tprules diff`).

>>> d = diff_rules("rules", "/tmp/rules-edit", [Path("facts/megatron-mlp-tp2")])   # doctest: +SKIP
>>> [c.fusion for j in d.judged for c in j.changes]                                # doctest: +SKIP
['allreduce_bias', 'mm2_allreduce']
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import BadInput, raise_all
from ..paths import display_path
from .changes import Side, VerdictChange, reason_counts, verdict_changes
from .corpus import meant_for

if TYPE_CHECKING:
    from ..datalog.analysis.checked import CheckedRules


@dataclass(frozen=True)
class Judged:
    """One program judged with one shim under both rule sets."""

    program: Path
    shim: str
    fusions: int
    changes: tuple[VerdictChange, ...]

    def to_json(self) -> dict:
        return {"program": display_path(self.program), "shim": self.shim, "fusions": self.fusions,
                "changed": len(self.changes)}


@dataclass(frozen=True)
class RuleDiff:
    old: str  # the rule folders, as the user named them
    new: str
    judged: tuple[Judged, ...]

    @property
    def changes(self) -> list[tuple[Judged, VerdictChange]]:
        return [(j, c) for j in self.judged for c in j.changes]

    def to_json(self) -> dict:
        counts = reason_counts(c for _, c in self.changes)
        return {
            "old": self.old, "new": self.new,
            "judged": [j.to_json() for j in self.judged],
            "changes": [{"program": display_path(j.program), "shim": j.shim, **c.to_json()} for j, c in self.changes],
            "reasons": {r: {"gone": gone, "new": new} for r, (gone, new) in counts.items()},
        }


def load_both(old: Path | str, new: Path | str):
    """Both rule sets, checked; the problems of both reported together."""
    from ..workspace import load_checked_rules

    loaded: list[CheckedRules] = []
    problems: list[BadInput] = []
    for rules in (old, new):
        try:
            loaded.append(load_checked_rules(Path(rules)))
        except BadInput as err:
            problems.extend(getattr(err, "problems", [err]))
    raise_all(problems)
    return loaded


def diff_rules(old: Path | str, new: Path | str, programs: list[Path], shims: list[str] | None = None,
               engine: str = "fast") -> RuleDiff:
    """Judge every program with each shim (`shims`, else the ones it is meant for) under both rule sets."""
    from ..workspace import Workspace

    old_checked, new_checked = load_both(old, new)
    judged = []
    for program in programs:
        program = Path(program)
        for shim in shims or meant_for(program):
            before = Workspace(program, shim=shim, engine=engine, checked=old_checked)
            after = Workspace(program, shim=shim, engine=engine, checked=new_checked)
            old_v = {v.fusion: v.reasons for v in before.verdicts()}
            new_v = {v.fusion: v.reasons for v in after.verdicts()}
            changes = verdict_changes(old_v, new_v, Side(before), Side(after))
            judged.append(Judged(program, shim, len(new_v), changes))
    return RuleDiff(display_path(old), display_path(new), tuple(judged))
