"""The programs that have golden snapshots, the shims each is meant for, and where the snapshots live.

A program is meant for the shims its own `shim.facts` declares, in file order (a library
shim named there needs nothing else); a program without one is meant for the default shim.
Snapshots live in `<snapshots>/<program folder name>/<shim folder>/`, where the shim
folder is the shim's name with every character other than letters, digits, `.`, `_` and
`-` written `_` (`cuda-lane:h100:Bf16` → `cuda-lane_h100_Bf16`: a name every file
system takes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..config import DEFAULT_SHIM, PROJECT_ROOT
from ..errors import UsageError
from ..paths import display_path

EXAMPLES_DIR = PROJECT_ROOT / "facts"  # the example programs (and the shim library, facts/shims/)
SNAPSHOTS_DIR = PROJECT_ROOT / "tests" / "golden"
LIBRARY = "shims"  # facts/shims/ is the shim library, not a program


def example_programs(root: Path = EXAMPLES_DIR) -> list[Path]:
    """Every program folder under `root` (a folder with op.facts), the shim library excepted."""
    return sorted(p for p in Path(root).iterdir() if p.is_dir() and p.name != LIBRARY and (p / "op.facts").exists())


def expand(dirs: list[Path | str]) -> list[Path]:
    """Program folders from the command line: a folder of program folders (such as facts/)
    stands for its programs, the shim library excepted; anything else is taken as a program."""
    out = []
    for d in map(Path, dirs):
        inner = example_programs(d) if d.is_dir() and not (d / "op.facts").exists() else []
        out.extend(inner or [d])
    return out


def meant_for(program: Path) -> list[str]:
    """The shims a program is meant for: its own shim.facts, else the default shim."""
    from ..datalog.facts.base import FactBase, read_facts_file

    path = Path(program) / "shim.facts"
    if not path.exists():
        return [DEFAULT_SHIM]
    facts = FactBase()
    read_facts_file(path, "shim", ("symbol",), f"{display_path(program)}/shim.facts", facts)
    return [s for (s,) in facts.ordered("shim")] or [DEFAULT_SHIM]


def shim_folder(shim: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", shim)


@dataclass(frozen=True)
class Target:
    """One snapshot: a program judged with one shim."""

    program: Path
    shim: str
    folder: Path  # <snapshots>/<program>/<shim folder>

    @property
    def name(self) -> str:
        return f"{self.program.name} on {self.shim}"


def targets(program: Path, snapshots: Path) -> list[Target]:
    """The snapshots a program has: one per shim it is meant for."""
    program = Path(program)
    shims = meant_for(program)
    folders = [shim_folder(s) for s in shims]
    if len(set(folders)) < len(folders):
        raise UsageError(f"{display_path(program)}/shim.facts: shims {', '.join(shims)} need distinct "
                         "snapshot folders; rename one")
    base = Path(snapshots) / program.name
    return [Target(program, s, base / f) for s, f in zip(shims, folders)]


def check_distinct(programs: list[Path]) -> None:
    """Snapshots are filed by program folder name: two programs may not share one."""
    seen: dict[str, Path] = {}
    for p in programs:
        other = seen.setdefault(Path(p).name, Path(p))
        if other != Path(p):
            raise UsageError(f"{display_path(other)} and {display_path(p)} would share the snapshot folder "
                             f"{Path(p).name}; check them with separate --snapshots folders")
