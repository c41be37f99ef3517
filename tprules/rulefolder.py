"""A rules folder: the one a command reads (`--rules`, else config.py's setting), checked
before it is read; and what `tprules --version` says about the defaults. `tprules rules init`
(commands/rules.py) writes a folder with a VERSION file, which is checked here."""

from __future__ import annotations

import os
from pathlib import Path

from .config import VERSION_FILE, rules_setting, shim_library_dir
from .errors import RuleError
from .pos import Pos
from .version import __version__


def rules_folder(given: Path | str | None) -> Path:
    """The rules folder a command reads: `--rules` when given, else the setting; checked to
    exist, to be readable and (when it has a VERSION file) to be of this tprules' version."""
    folder, source = (Path(given), "--rules") if given is not None else rules_setting()
    via = "" if source in ("--rules", "packaged", "checkout") else f" (set by {source})"
    if not folder.is_dir():
        raise RuleError(f"no such rules folder: {folder}{via}")
    if not os.access(folder, os.R_OK | os.X_OK):
        raise RuleError(f"cannot read the rules folder {folder}{via}: permission denied")
    check_version(folder)
    return folder


def check_version(folder: Path) -> None:
    """A rules folder's VERSION, when it has one, must name a tprules of this major.minor
    version (0.1.x reads the folders of 0.1.x): the rules and the code that feeds them
    facts change together."""
    path = folder / VERSION_FILE
    if not path.exists():
        return
    try:
        words = path.read_text(encoding="utf-8").split()
    except (OSError, UnicodeDecodeError) as err:
        raise RuleError(f"cannot read it: {err}", Pos(str(path), 1)) from None
    if len(words) != 2 or words[0] != "tprules" or len(words[1].split(".")) < 2:
        raise RuleError("not a rules folder's version: it holds one line 'tprules X.Y.Z' (what `tprules rules init` "
                        "writes)", Pos(str(path), 1))
    if words[1].split(".")[:2] != __version__.split(".")[:2]:
        raise RuleError(f"this rules folder is for tprules {words[1]}; this is tprules {__version__}: run "
                        f"`tprules rules init NEW_DIR` and carry your edits over", Pos(str(path), 1))


def describe() -> str:
    """What `tprules --version` prints: the version, and where the default rules and the
    shim library come from."""
    rules, source = rules_setting()
    said = {"packaged": "packaged with tprules", "checkout": "the checkout tprules runs from"}.get(source,
                                                                                               f"set by {source}")
    missing = "" if rules.is_dir() else "; no such folder"
    return (f"tprules {__version__}\n"
            f"default rules: {rules} ({said}{missing})\n"
            f"shim library: {shim_library_dir(rules)}\n")
