"""Check programs against their golden snapshots, or rewrite the snapshots (accept a change).

>>> golden = Golden()                                                   # doctest: +SKIP
>>> golden.program(Path("facts/megatron-mlp-tp2")).ok                     # doctest: +SKIP
True
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from ..paths import display_path
from .changes import Side, VerdictChange, verdict_changes
from .corpus import EXAMPLES_DIR, SNAPSHOTS_DIR, Target, targets
from .snapshot import RELATIONS, VERDICTS, RelationChange, compare, read, take, verdicts_of

# What happened to one snapshot. Checking: ok, changed, missing. Updating: ok, updated, written.
OK, CHANGED, MISSING, UPDATED, WRITTEN = "ok", "changed", "missing", "updated", "written"


@dataclass(frozen=True)
class SnapshotResult:
    target: Target
    status: str
    relations: tuple[RelationChange, ...] = ()  # lines added and removed, by relation
    verdicts: tuple[VerdictChange, ...] = ()  # the changed verdicts, explained by the rules now
    malformed: tuple[str, ...] = ()  # relation files missing, or not sorted one tuple a line
    sizes: tuple[tuple[str, int], ...] = ()  # lines per relation (of a snapshot written anew)

    @property
    def ok(self) -> bool:
        return self.status in (OK, UPDATED, WRITTEN)


@dataclass(frozen=True)
class Stale:
    """A file or folder among the snapshots that no program and shim accounts for."""

    path: Path
    why: str
    removed: bool = False


@dataclass(frozen=True)
class ProgramResult:
    program: Path
    snapshots: tuple[SnapshotResult, ...]
    stale: tuple[Stale, ...] = ()

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.snapshots) and all(s.removed for s in self.stale)


class Golden:
    """Golden snapshots in one folder, checked (or rewritten) with one rule set.

    With `update`, the rewrites and removals are only planned until `commit()`, so a
    program that does not load (exit 2) leaves every snapshot as it was.
    """

    def __init__(self, snapshots: Path | str = SNAPSHOTS_DIR, rules: Path | str | None = None,
                 engine: str = "fast", update: bool = False, include_dirs=()):
        from ..workspace import load_checked_rules

        self.snapshots = Path(snapshots)
        self.checked = load_checked_rules(Path(rules) if rules is not None else None, include_dirs)
        self.engine = engine
        self.update = update
        self._pending: list = []  # what commit() writes and removes

    def commit(self) -> None:
        """Write and remove what an update decided."""
        for action in self._pending:
            action()
        self._pending.clear()

    def program(self, program: Path | str) -> ProgramResult:
        """Check (or rewrite) every snapshot of one program, and find its stale ones."""
        program = Path(program)
        found = tuple(self._snapshot(t) for t in targets(program, self.snapshots))
        return ProgramResult(program, found, self._stale_in(program, found))

    def stale_programs(self, programs: list[Path], corpus: Path = EXAMPLES_DIR) -> tuple[Stale, ...]:
        """Snapshot folders of programs not among `programs`, the whole corpus (a folder of programs)."""
        names = {Path(p).name for p in programs}
        if not self.snapshots.is_dir():
            return ()
        out = []
        for entry in sorted(self.snapshots.iterdir()):
            if entry.is_dir() and entry.name not in names:
                gone = display_path(Path(corpus) / entry.name)
                out.append(self._drop(entry, f"snapshots of a program that no longer exists: no program {gone}"))
        return tuple(out)

    # -- one snapshot ---------------------------------------------------------------------

    def _snapshot(self, target: Target) -> SnapshotResult:
        from ..workspace import Workspace

        ws = Workspace(target.program, shim=target.shim, engine=self.engine, checked=self.checked)
        actual = take(ws)
        sizes = tuple((rel, len(actual.lines(rel))) for rel in RELATIONS)
        if not target.folder.is_dir():
            if self.update:
                self._pending.append(partial(actual.write, target.folder))
                return SnapshotResult(target, WRITTEN, sizes=sizes)
            return SnapshotResult(target, MISSING, sizes=sizes)
        stored = read(target.folder)
        malformed = tuple(rel for rel in RELATIONS if not _canonical(target.folder / f"{rel}.tsv", stored[rel]))
        relations = compare(stored, actual)
        verdicts: tuple[VerdictChange, ...] = ()
        if any(c.rel in VERDICTS for c in relations):
            before = verdicts_of(stored["legal"] or (), stored["refused"] or ())
            verdicts = verdict_changes(before, actual.verdicts(), None, Side(ws))
        if not relations and not malformed:
            return SnapshotResult(target, OK)
        if self.update:
            self._pending.append(partial(actual.write, target.folder))
        return SnapshotResult(target, UPDATED if self.update else CHANGED, relations, verdicts, malformed)

    # -- stale files ------------------------------------------------------------------

    def _stale_in(self, program: Path, found: tuple[SnapshotResult, ...]) -> tuple[Stale, ...]:
        folder = self.snapshots / program.name
        if not folder.is_dir():
            return ()
        wanted = {r.target.folder for r in found}
        shims = ", ".join(r.target.shim for r in found)
        out = []
        for entry in sorted(folder.iterdir()):
            if entry not in wanted:
                out.append(self._drop(entry, f"not a shim {program.name} is meant for: it is meant for {shims}"))
        for r in found:
            if not r.target.folder.is_dir():
                continue
            for entry in sorted(r.target.folder.iterdir()):
                if entry.name not in {f"{rel}.tsv" for rel in RELATIONS}:
                    out.append(self._drop(entry, f"not a snapshot relation: those are {', '.join(RELATIONS)}"))
        return tuple(out)

    def _drop(self, path: Path, why: str) -> Stale:
        if not self.update:
            return Stale(path, why)
        self._pending.append(partial(shutil.rmtree, path) if path.is_dir() else path.unlink)
        return Stale(path, why, removed=True)


def _canonical(path: Path, lines: tuple[str, ...] | None) -> bool:
    """The file holds exactly its sorted lines, one tuple a line, each ended by a newline."""
    return lines is not None and path.read_text() == "".join(line + "\n" for line in lines)

