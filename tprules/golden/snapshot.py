"""A snapshot of a program's output relations for one shim, as sorted TSV files.

Three relations, one `<relation>.tsv` file each, written the way Soufflé writes its
`.output` relations (one tuple per line, columns separated by a TAB) and sorted by
character code (`LC_ALL=C sort`):

- `legal.tsv`    fusion
- `refused.tsv`  fusion, reason
- `groups.tsv`   place, members (the plan's groups: members in program order, separated
                 by a space; the group ids are left out, as they renumber when one
                 group changes)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

RELATIONS = ("legal", "refused", "groups")
VERDICTS = ("legal", "refused")


@dataclass(frozen=True)
class Snapshot:
    legal: tuple[str, ...]
    refused: tuple[str, ...]
    groups: tuple[str, ...]

    def lines(self, rel: str) -> tuple[str, ...]:
        return getattr(self, rel)

    def verdicts(self) -> dict[str, tuple[str, ...]]:
        """fusion → its sorted reasons (empty when legal)."""
        return verdicts_of(self.legal, self.refused)

    def write(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        for rel in RELATIONS:
            lines = self.lines(rel)
            (folder / f"{rel}.tsv").write_text("".join(line + "\n" for line in lines))


def tsv(rows) -> tuple[str, ...]:
    """Rows as sorted TSV lines."""
    return tuple(sorted("\t".join(str(c) for c in row) for row in rows))


def verdicts_of(legal, refused) -> dict[str, tuple[str, ...]]:
    out: dict[str, list[str]] = {line: [] for line in legal}
    for line in refused:
        fusion, _, reason = line.partition("\t")
        out.setdefault(fusion, []).append(reason)
    return {f: tuple(sorted(rs)) for f, rs in out.items()}


def take(workspace) -> Snapshot:
    """The snapshot of a workspace: its verdicts and its plan's groups."""
    from ..planner import plan

    verdicts = workspace.verdicts()
    groups = plan(workspace).groups
    return Snapshot(
        legal=tsv((v.fusion,) for v in verdicts if v.legal),
        refused=tsv((v.fusion, r) for v in verdicts for r in v.reasons),
        groups=tsv((g.place, " ".join(g.members)) for g in groups),
    )


def read(folder: Path) -> dict[str, tuple[str, ...] | None]:
    """Each relation's lines as stored (sorted), None for a file that is not there."""
    found: dict[str, tuple[str, ...] | None] = {}
    for rel in RELATIONS:
        path = folder / f"{rel}.tsv"
        found[rel] = tuple(sorted({line for line in path.read_text().split("\n") if line})) if path.is_file() else None
    return found


@dataclass(frozen=True)
class RelationChange:
    """Lines of one relation that the new output adds to, or removes from, the old one."""

    rel: str
    added: tuple[str, ...]
    removed: tuple[str, ...]

    def __bool__(self) -> bool:
        return bool(self.added or self.removed)


def compare(old: dict[str, tuple[str, ...] | None], new: Snapshot) -> tuple[RelationChange, ...]:
    """Every relation whose lines differ (a missing file counts as empty)."""
    changes = []
    for rel in RELATIONS:
        before, after = set(old.get(rel) or ()), set(new.lines(rel))
        change = RelationChange(rel, tuple(sorted(after - before)), tuple(sorted(before - after)))
        if change:
            changes.append(change)
    return tuple(changes)
