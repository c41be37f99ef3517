"""Where the server finds the program folder beside the rules, in order: the client's
initialization option or setting `{"program": DIR, "shim": NAME}` (a `tprules` section),
else `tprules.toml` at the workspace root:

    program = "facts/llama-layer-tp4"   # relative to the workspace root
    shim = "cuda-lane:h100:Bf16"        # optional
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError
from ..pos import Pos


@dataclass(frozen=True)
class Settings:
    program: Path | None = None
    shim: str | None = None
    origin: str = ""  # where the program was named (for messages)


def from_options(options, root: Path | None) -> Settings | None:
    """Settings from an initialization option or a setting; None when they name no program."""
    if isinstance(options, dict) and isinstance(options.get("tprules"), dict):
        options = options["tprules"]
    if not isinstance(options, dict) or not options.get("program"):
        return None
    return Settings(_resolve(str(options["program"]), root), options.get("shim") or None, "the client's settings")


def from_toml(root: Path | None) -> Settings:
    """Settings from `tprules.toml` at the workspace root (none: no program). Raises UsageError
    naming the file for a file that is not TOML or a key of the wrong kind."""
    if root is None or not (root / "tprules.toml").is_file():
        return Settings()
    path = root / "tprules.toml"
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise UsageError(f"tprules.toml: {err}", Pos(str(path), 1)) from None
    program, shim = data.get("program"), data.get("shim")
    if program is not None and not isinstance(program, str) or shim is not None and not isinstance(shim, str):
        raise UsageError("tprules.toml: program and shim take a string", Pos(str(path), 1))
    return Settings(_resolve(program, root) if program else None, shim, str(path))


def _resolve(text: str, root: Path | None) -> Path:
    path = Path(text).expanduser()
    return path if path.is_absolute() or root is None else root / path
