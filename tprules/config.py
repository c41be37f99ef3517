"""Settings read from the environment, in this one place: the cache folder, and which rules
and shim library a command reads when it is given no `--rules`.

The default rules and the shim library ship inside the package (`tprules/defaults/rules`
and `tprules/defaults/shims`, which the build maps from the repository's `rules/` and
`facts/shims/`, see setup.py); they are found through `importlib.resources`. In a checkout
(an editable install, or tprules on PYTHONPATH) the package has no such folders, and the
repository's own are read: the one copy there is.

A user's own rules folder (`tprules rules init DIR` writes one) is chosen, when a command
has no `--rules`, by the environment variable `TPRULES_RULES`, else by `rules = "DIR"` in
the `[tool.tprules]` table of the nearest pyproject.toml (from the working folder up),
relative to that file. A rules folder with a `shims/` folder of its own reads its shim
library from there.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
RULES_ENV = "TPRULES_RULES"
VERSION_FILE = "VERSION"  # in a rules folder `rules init` wrote: `tprules X.Y.Z` (rulefolder.py checks it)
_CHECKOUT = {"rules": ("rules",), "shims": ("facts", "shims")}
# [tool.tprules] (or tool.tprules.rules = ...), or a [tool] table that may hold `tprules = {...}`
_MENTIONS = re.compile(r"tool\s*\.\s*\"?tprules|^\s*\[\s*tool\s*\]", re.MULTILINE)


class SettingError(ValueError):
    """A setting that cannot be read: one line naming its file, exit status 2 (cli.py). (The
    floor imports no other unit of tprules, so this is not one of errors.py's BadInput.)"""

    def __init__(self, path: Path | str, message: str):
        super().__init__(f"{path}: usage: {message}")


def cache_dir() -> Path:
    """Where compiled rule programs and generated kernels are cached (never in the repository)."""
    explicit = os.environ.get("TPRULES_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tprules"


def packaged(name: str) -> tuple[Path, str]:
    """`rules` or `shims` as tprules ships them, and where from: `checkout` (run from the
    repository, where rules/ and facts/shims/ lie beside the package; an editable install)
    or `packaged` (the installed package's `defaults/`, read through importlib.resources).
    The checkout is looked at first only because it is cheaper: `resources.files` loads
    importlib's resource readers and zipfile, about 5 ms of every command."""
    if all(PROJECT_ROOT.joinpath(*parts).is_dir() for parts in _CHECKOUT.values()):
        return PROJECT_ROOT.joinpath(*_CHECKOUT[name]), "checkout"
    from importlib import resources

    shipped = resources.files("tprules").joinpath("defaults", name)
    if not (isinstance(shipped, Path) and shipped.is_dir()):
        raise SettingError(str(shipped), f"tprules is installed without its {name}: reinstall it from a wheel")
    return shipped, "packaged"


def rules_setting() -> tuple[Path, str]:
    """The rules folder a command reads when it has no `--rules`, and what chose it:
    `TPRULES_RULES`, a pyproject.toml's path, `packaged` or `checkout`."""
    given = os.environ.get(RULES_ENV)
    if given:
        return Path(given).expanduser(), RULES_ENV
    found = _pyproject_setting()
    return found if found is not None else packaged("rules")


def _pyproject_setting() -> tuple[Path, str] | None:
    """`[tool.tprules] rules = "DIR"` of the nearest pyproject.toml, relative to it; None
    when that file (or the nearest one) has no such setting."""
    here = Path.cwd()
    for folder in (here, *here.parents):
        path = folder / "pyproject.toml"
        if path.is_file():
            break
    else:
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise SettingError(path, f"cannot read it: {err}") from None
    if not _MENTIONS.search(text):  # most projects' pyproject.toml (tprules' own too): no TOML parser started
        return None
    import tomllib

    try:
        table = tomllib.loads(text).get("tool", {}).get("tprules", {})
    except tomllib.TOMLDecodeError as err:
        raise SettingError(path, f"not TOML: {err}") from None
    unknown = sorted(set(table) - {"rules"})
    if unknown or not isinstance(table.get("rules", ""), str):
        what = f"has no setting {unknown[0]!r}" if unknown else "rules must be a string (a folder)"
        raise SettingError(path, f"[tool.tprules] {what}; it takes: rules = \"RULES_DIR\"")
    if "rules" not in table:
        return None
    return Path(os.path.normpath(folder / Path(table["rules"]).expanduser())), str(path)


def default_rules_dir() -> Path:
    """The rules folder of a command given no `--rules` (see `rules_setting`)."""
    return rules_setting()[0]


def shim_library_dir(rules_dir: Path | str | None = None) -> Path:
    """The shim library: the rules folder's own `shims/` when it has one (a folder that
    `tprules rules init` wrote), else the one tprules ships. `rules_dir` is the rules
    folder in use (default: the setting's)."""
    own = (Path(rules_dir) if rules_dir else default_rules_dir()) / "shims"
    return own if own.is_dir() else packaged("shims")[0]


DEFAULT_SHIM = "cuda-lane:h100:Bf16"
