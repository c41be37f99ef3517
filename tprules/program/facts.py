"""Read fact directories in Soufflé's layout, typed by the relation's declaration.

One `<relation>.facts` file per relation, one tuple per line, TAB-separated, no header,
symbols unquoted, numbers in decimal. A missing file is an empty relation; empty lines
are ignored. Every tuple remembers the file and line it came from, for error messages
and proof leaves.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import FactError
from ..lang.ast import Pos
from ..paths import display_path


@dataclass
class FactBase:
    """Facts by relation, with the file:line of each tuple's first occurrence."""

    relations: dict[str, set[tuple]] = field(default_factory=dict)
    origins: dict[str, dict[tuple, Pos]] = field(default_factory=dict)
    files: dict[str, list[str]] = field(default_factory=dict)  # relation → files read

    def tuples(self, rel: str) -> set[tuple]:
        return self.relations.get(rel, set())

    def where(self, rel: str, tup: tuple) -> Pos | None:
        return self.origins.get(rel, {}).get(tup)

    def ordered(self, rel: str) -> list[tuple]:
        """Tuples in file order (first occurrence), then any added without a position."""
        origins = self.origins.get(rel, {})
        tuples = self.relations.get(rel, set())
        if len(origins) == len(tuples):
            return list(origins)
        return list(origins) + sorted(t for t in tuples if t not in origins)

    def add(self, rel: str, tup: tuple, pos: Pos | None = None) -> None:
        self.relations.setdefault(rel, set()).add(tup)
        if pos is not None:
            self.origins.setdefault(rel, {}).setdefault(tup, pos)

    def merged(self, other: "FactBase") -> "FactBase":
        out = FactBase({k: set(v) for k, v in self.relations.items()}, {k: dict(v) for k, v in self.origins.items()},
                       {k: list(v) for k, v in self.files.items()})
        for rel, tuples in other.relations.items():
            out.relations.setdefault(rel, set()).update(tuples)
            mine = out.origins.setdefault(rel, {})
            for tup, pos in other.origins.get(rel, {}).items():
                mine.setdefault(tup, pos)
            out.files.setdefault(rel, []).extend(other.files.get(rel, []))
        return out


_DECIMAL = re.compile(r"\s*[+-]?[0-9]+")  # what Soufflé 2.5 reads as a number; int() also takes "1_0", "1 "


def _columns(n: int) -> str:
    return f"{n} column" if n == 1 else f"{n} columns"


def read_facts_file(path: Path, rel: str, types: tuple[str, ...], display: str, into: FactBase) -> None:
    """Read one fact file into `into`, checking widths and number columns."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise FactError(f"cannot read fact file: {err}", Pos(display, 0)) from None
    arity = len(types)
    numbers = [i for i, t in enumerate(types) if t == "number"]
    tuples = into.relations.setdefault(rel, set())
    origins = into.origins.setdefault(rel, {})
    into.files.setdefault(rel, []).append(display)
    for lineno, line in enumerate(text.split("\n"), 1):
        if line.endswith("\r"):
            line = line[:-1]
        if not line.strip():
            continue
        cols = line.split("\t") if arity != 1 else [line]
        if len(cols) != arity:
            spaces = "; this line separates with spaces" if " " in line and len(cols) < arity else ""
            raise FactError(f"{rel} has {_columns(arity)} but this line has {len(cols)} "
                            f"(columns are separated by one TAB{spaces})", Pos(display, lineno))
        for i in numbers:
            if not _DECIMAL.fullmatch(cols[i]):
                raise FactError(f"column {i + 1} of {rel} must be a number (a decimal integer), got {cols[i]!r}",
                                Pos(display, lineno))
            cols[i] = int(cols[i])
        tup = tuple(cols)
        if tup not in origins:
            origins[tup] = Pos(display, lineno)
            tuples.add(tup)


def load_fact_dir(directory: Path, schema: dict[str, tuple[str, ...]], display_root: str | None = None,
                  strict: bool = True) -> FactBase:
    """Load every `<rel>.facts` of a directory whose relation the schema knows.

    With `strict`, a `.facts` file of a relation nobody declares is an error.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise FactError(f"no such program folder: {directory}")
    root = display_root if display_root is not None else display_path(directory)
    base = FactBase()
    for path in sorted(directory.glob("*.facts")):
        rel = path.stem
        display = f"{root}/{path.name}"
        if rel not in schema:
            if strict:
                raise FactError(f"unknown relation {rel}: no rule file declares it and SPEC §2 has no such relation",
                                Pos(display, 1))
            continue
        read_facts_file(path, rel, schema[rel], display, base)
    return base
