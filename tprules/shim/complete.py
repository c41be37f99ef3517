"""`tprules shim complete`: give a program's own shim the answers it misses.

SPEC §2's totality rule refuses a program whose own shim does not answer every class of
the class registry (tprules/ops). `complete` appends one `supports` line per missing
class, at the level asked, to the program's own `supports.facts`, and says what it added;
a shim that misses nothing is left as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import FactError, UsageError
from ..ops import CLASSES
from ..program.schema import LEVELS
from ..program.shimsource import DESCRIBING

FILES = {rel: f"{rel}.facts" for rel in DESCRIBING}


@dataclass(frozen=True)
class Completion:
    path: Path  # the program's supports.facts
    added: tuple[tuple[str, str, str], ...]  # (shim, class, level) lines appended
    shims: tuple[str, ...]  # the program's own shims


def _rows(path: Path) -> list[list[str]]:
    if not path.is_file():
        return []
    return [line.split("\t") for line in path.read_text().splitlines() if line.strip()]


def own_shims(directory: Path) -> list[str]:
    """The shims the program's own supports, limit, quantized, views and collective_kernel facts
    describe, in order."""
    names = [row[0] for rel in DESCRIBING for row in _rows(directory / FILES[rel])]
    return list(dict.fromkeys(names))


def complete(directory: Path | str, level: str, display: str | None = None) -> Completion:
    """Append the answers the program's own shims miss, at `level`, to its supports.facts."""
    directory = Path(directory)
    shown = display or str(directory)
    if level not in LEVELS:
        raise UsageError(f"--level {level}: expected {', '.join(LEVELS[:-1])} or {LEVELS[-1]}")
    if not directory.is_dir():
        raise FactError(f"no such program folder: {shown}")
    shims = own_shims(directory)
    if not shims:
        raise UsageError(f"{shown} has no shim of its own (its {', '.join(FILES.values())} name none): there is "
                         "nothing to complete; the shim library's shims answer every class")
    path = directory / FILES["supports"]
    answered = {(row[0], row[1]) for row in _rows(path) if len(row) >= 2}
    added = tuple((s, str(c), level) for s in shims for c in CLASSES if (s, str(c)) not in answered)
    if added:
        text = path.read_text() if path.is_file() else ""
        if text and not text.endswith("\n"):
            text += "\n"
        path.write_text(text + "".join("\t".join(row) + "\n" for row in added))
    return Completion(path, added, tuple(shims))


def render(done: Completion, display: str) -> str:
    """What `complete` did, for the command line."""
    if not done.added:
        return (f"{display}: shim {', '.join(done.shims)} answers every class of the class registry; "
                "nothing added\n")
    lines = [f"{display}: added {len(done.added)} answer{'s' * (len(done.added) != 1)}:"]
    lines += [f"  {s}\t{c}\t{level}" for s, c, level in done.added]
    return "\n".join(lines) + "\n"
