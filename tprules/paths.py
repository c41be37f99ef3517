"""How paths are shown to the user."""

from __future__ import annotations

from pathlib import Path


def display_path(path: Path | str) -> str:
    """A path as the user would type it: relative to the working folder when inside it."""
    path = Path(path)
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
