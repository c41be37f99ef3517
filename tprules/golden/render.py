"""Golden results and rule-set diffs as text: tuples added (+) and removed (-), each with its
one-line explanation, grouped by fusion; what to run to accept a change."""

from __future__ import annotations

from pathlib import Path

from ..paths import display_path
from .changes import VerdictChange, reason_counts, reasons_text, verdict_text
from .check import CHANGED, MISSING, OK, UPDATED, WRITTEN, ProgramResult, SnapshotResult, Stale
from .rulediff import RuleDiff

LABEL = {OK: "ok", CHANGED: "FAIL", MISSING: "MISSING", UPDATED: "updated", WRITTEN: "wrote"}


# ---- one changed verdict ------------------------------------------------------------


def verdict_lines(change: VerdictChange, sides: tuple[str, ...]) -> list[str]:
    """A fusion's changed verdict. `sides` names the explained sides: ("now",) for a snapshot
    against the rules now (one line per tuple), ("old", "new") for two rule sets."""
    members = ", ".join(f"{o} ({p})" for o, p in change.members)
    out = [f"  {change.fusion}: {verdict_text(change.old)} → {verdict_text(change.new)}"
           + (f"; members {members}" if members else "")]
    width = max(len(t.atom) for t in change.tuples)
    for t in change.tuples:
        sign = "+" if t.added else "-"
        if sides == ("now",):
            line = t.new if t.new is not None else t.old
            out.append(f"    {sign} {t.atom:<{width}}  {line.text if line else ''}".rstrip())
            continue
        out.append(f"    {sign} {t.atom}")
        for name, line in zip(sides, (t.old, t.new)):
            if line is not None:
                state = "holds" if line.holds else "does not hold"
                out.append(f"        {name}: {state}: {line.text}")
    return out


def _refusals(changes) -> list[str]:
    counts = reason_counts(changes)
    return [f"  refusals changed: {reasons_text(counts)}"] if counts else []


# ---- golden --------------------------------------------------------------------------


def snapshot_lines(result: SnapshotResult) -> list[str]:
    t = result.target
    head = f"{LABEL[result.status]:<8} {t.program.name} on {t.shim}"
    folder = display_path(t.folder)
    if result.status == OK:
        return [head]
    if result.status == MISSING:
        return [f"{head}: no snapshot at {folder}"]
    if result.status == WRITTEN:
        sizes = ", ".join(f"{rel} {n}" for rel, n in result.sizes)
        return [f"{head}: new snapshot {folder} ({sizes} lines)"]
    summary = ", ".join(f"{c.rel} {_signs(c)}" for c in result.relations)
    out = [f"{head}: {summary or 'format'} ({folder})"]
    for rel in result.malformed:
        out.append(f"  {rel}.tsv is missing or not sorted one tuple a line")
    out += _refusals(result.verdicts)
    for change in result.verdicts:
        out += verdict_lines(change, ("now",))
    for c in result.relations:
        if c.rel == "groups":
            out.append("  plan groups (place, members):")
            out += [f"    - {line.replace(chr(9), '  ')}" for line in c.removed]
            out += [f"    + {line.replace(chr(9), '  ')}" for line in c.added]
    return out


def _signs(change) -> str:
    return " ".join(s for s in (f"+{len(change.added)}" if change.added else "",
                                f"-{len(change.removed)}" if change.removed else "") if s)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' if n != 1 else ''}"


def stale_line(stale: Stale) -> str:
    if stale.removed:
        return f"removed  {display_path(stale.path)}: {stale.why}"
    return f"STALE    {display_path(stale.path)}: {stale.why}"


def golden_text(results: list[ProgramResult], stale: tuple[Stale, ...], update: bool, accept: str,
                snapshots: Path) -> str:
    """The whole report; `accept` is the command that would rewrite these snapshots."""
    lines = []
    for result in results:
        for snap in result.snapshots:
            lines += snapshot_lines(snap)
        lines += [stale_line(s) for s in result.stale]
    lines += [stale_line(s) for s in stale]
    lines.append("")
    lines.append(summary(results, stale, update))
    failed = not update and (any(not r.ok for r in results) or stale)
    if failed:
        lines.append(f"to accept the outputs of the rules now: {accept}")
        lines.append(f"then review and commit: git diff {display_path(snapshots)}")
    return "\n".join(lines) + "\n"


def summary(results: list[ProgramResult], stale: tuple[Stale, ...], update: bool) -> str:
    snaps = [s for r in results for s in r.snapshots]
    stale_all = [s for r in results for s in r.stale] + list(stale)
    counts = {status: sum(s.status == status for s in snaps) for status in LABEL}
    if not results:
        return f"{len(stale_all)} stale" + (" (removed)" if update else "")
    programs = f"{_count(len(results), 'program')}, {_count(len(snaps), 'snapshot')}"
    if update:
        parts = [f"{counts[UPDATED]} updated", f"{counts[WRITTEN]} new", f"{counts[OK]} unchanged",
                 f"{sum(s.removed for s in stale_all)} stale removed"]
    else:
        parts = [f"{counts[OK]} match", f"{counts[CHANGED]} differ", f"{counts[MISSING]} missing",
                 f"{len(stale_all)} stale"]
    return f"{programs}: {', '.join(parts)}"


# ---- tprules diff --------------------------------------------------------------------


def rule_diff_text(diff: RuleDiff) -> str:
    programs = len({j.program for j in diff.judged})
    lines = [f"diff {diff.old} → {diff.new}   {programs} program{'s' if programs != 1 else ''}, "
             f"{len(diff.judged)} judged (program × shim)"]
    for judged in diff.judged:
        if not judged.changes:
            continue
        lines.append("")
        lines.append(f"{display_path(judged.program)}  shim {judged.shim}")
        for change in judged.changes:
            lines += verdict_lines(change, ("old", "new"))
    changes = diff.changes
    lines.append("")
    if not changes:
        lines.append(f"no verdict differs ({sum(j.fusions for j in diff.judged)} verdicts compared)")
    else:
        where = len({(j.program, j.shim) for j, _ in changes})
        counts = reason_counts(c for _, c in changes)
        lines.append(f"{len(changes)} verdict{'s' if len(changes) != 1 else ''} differ in {where} of "
                     f"{len(diff.judged)} judged" + (f"; refusals: {reasons_text(counts)}" if counts else ""))
    return "\n".join(lines) + "\n"
