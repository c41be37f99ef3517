"""Changed verdicts between two sides (an old and a new rule set, or a snapshot and the
rules now), each changed tuple with its one-line explanation on every side that has a model.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from ..explain.oneline import Line, verdict_line
from ..explain.terms import atom_text

EXPLAIN_DEPTH = 4  # deep enough for a blocking refusal and the rule behind a pass-through

Verdicts = dict[str, tuple[str, ...]]  # fusion → sorted reasons, () when legal


@dataclass(frozen=True)
class TupleChange:
    """A verdict tuple that holds on one side only; `added` when it holds on the new side."""

    rel: str
    values: tuple
    added: bool
    old: Line | None  # None: that side has no model to explain (a snapshot)
    new: Line | None

    @property
    def atom(self) -> str:
        return atom_text(self.rel, self.values)

    def to_json(self) -> dict:
        return {"atom": self.atom, "relation": self.rel, "values": list(self.values),
                "change": "added" if self.added else "removed",
                "old": None if self.old is None else self.old.to_json(),
                "new": None if self.new is None else self.new.to_json()}


@dataclass(frozen=True)
class VerdictChange:
    fusion: str
    members: tuple[tuple[str, str], ...]  # (statement, place) in program order
    old: tuple[str, ...] | None  # reasons, () when legal, None when not a candidate
    new: tuple[str, ...] | None
    tuples: tuple[TupleChange, ...]

    def to_json(self) -> dict:
        def verdict(reasons):
            return None if reasons is None else {"legal": not reasons, "reasons": list(reasons)}

        return {"fusion": self.fusion, "members": [{"statement": o, "place": p} for o, p in self.members],
                "old": verdict(self.old), "new": verdict(self.new), "tuples": [t.to_json() for t in self.tuples]}


def verdict_text(reasons: tuple[str, ...] | None) -> str:
    if reasons is None:  # not a candidate on that side (or not in the snapshot)
        return "no verdict"
    return "legal" if not reasons else "refused " + ", ".join(reasons)


class Side:
    """One side's workspace, explained on demand (the model is evaluated only when a verdict changed)."""

    def __init__(self, workspace):
        self.workspace = workspace
        self._explainer = None

    @property
    def explainer(self):
        if self._explainer is None:
            from ..explain.explainer import Explainer

            ws = self.workspace
            if not ws.engine.capabilities.rounds:  # proofs need the rounds an engine records
                from ..workspace import Workspace

                ws = Workspace.from_program(ws.program, ws.checked, "fast")
            self._explainer = Explainer(ws.checked, ws.model, ws.program.facts, ws.program.position,
                                        depth=EXPLAIN_DEPTH)
        return self._explainer

    def line(self, rel: str, values: tuple) -> Line:
        return verdict_line(self.explainer, rel, values)

    def members(self, fusion: str) -> tuple[tuple[str, str], ...]:
        found = self.explainer.fusions([fusion])
        return found[0].members if found else ()


def _tuples(fusion: str, reasons: tuple[str, ...] | None) -> set[tuple[str, tuple]]:
    if reasons is None:
        return set()
    if not reasons:
        return {("legal", (fusion,))}
    return {("refused", (fusion, r)) for r in reasons}


def verdict_changes(old: Verdicts, new: Verdicts, old_side: Side | None,
                    new_side: Side | None) -> tuple[VerdictChange, ...]:
    """Every fusion whose verdict differs, sorted by id; `old_side`/`new_side` explain (None: no model)."""
    out = []
    for fusion in sorted(set(old) | set(new)):
        before, after = old.get(fusion), new.get(fusion)
        if before == after:
            continue
        was, now = _tuples(fusion, before), _tuples(fusion, after)
        tuples = []
        for rel, values in sorted(was ^ now, key=lambda t: (t[0] != "refused", t)):
            tuples.append(TupleChange(
                rel, values, (rel, values) in now,
                old_side.line(rel, values) if old_side is not None else None,
                new_side.line(rel, values) if new_side is not None else None))
        side = new_side if after is not None and new_side is not None else old_side
        members = side.members(fusion) if side is not None else ()
        out.append(VerdictChange(fusion, members, before, after, tuple(tuples)))
    return tuple(out)


def reason_counts(changes) -> dict[str, tuple[int, int]]:
    """reason → (refusals gone, refusals new) over verdict changes."""
    gone: Counter[str] = Counter()
    new: Counter[str] = Counter()
    for change in changes:
        for t in change.tuples:
            if t.rel == "refused":
                (new if t.added else gone)[t.values[1]] += 1
    return {r: (gone[r], new[r]) for r in sorted(set(gone) | set(new))}


def reasons_text(counts: dict[str, tuple[int, int]]) -> str:
    """`collective_fold -3, cycle +1`: refusals gone (-) and new (+) by reason."""
    parts = []
    for reason, (gone, new) in counts.items():
        signs = " ".join(s for s in (f"-{gone}" if gone else "", f"+{new}" if new else "") if s)
        parts.append(f"{reason} {signs}")
    return ", ".join(parts)
