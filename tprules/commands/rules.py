"""`tprules rules init DIR`: copy the rules and the shim library that tprules ships into a
folder of the user's, to edit (`DIR/*.dl`, `DIR/shims/*.facts`, and `DIR/VERSION`, the
tprules version they came with). Point commands at it with `--rules DIR`, `TPRULES_RULES=DIR`
or `[tool.tprules] rules = "DIR"` in pyproject.toml. Exit 0, or 2 (nothing written) when DIR
exists and is not an empty folder."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def add_parser(sub):
    p = sub.add_parser("rules", help="work on a rules folder of your own (init: copy the default rules to edit)")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    i = actions.add_parser("init", help="copy the default rules and the shim library into a new folder")
    i.add_argument("dir", metavar="DIR", help="the folder to write (new, or empty)")
    return p


def run(args) -> int:
    from ..config import RULES_ENV, VERSION_FILE, packaged
    from ..errors import UsageError
    from ..version import __version__

    target = Path(args.dir)
    if target.exists() and not target.is_dir():
        raise UsageError(f"rules init: {target} exists and is not a folder")
    if target.is_dir() and any(target.iterdir()):
        raise UsageError(f"rules init: {target} is not empty; give a new or an empty folder")
    rules = sorted(packaged("rules")[0].glob("*.dl"))
    shims = sorted(packaged("shims")[0].glob("*.facts"))
    (target / "shims").mkdir(parents=True, exist_ok=True)
    for path in rules:
        shutil.copyfile(path, target / path.name)
    for path in shims:
        shutil.copyfile(path, target / "shims" / path.name)
    (target / VERSION_FILE).write_text(f"tprules {__version__}\n")
    sys.stdout.write(f"wrote {len(rules)} rule files, the shim library ({len(shims)} files, shims/) and "
                     f"{VERSION_FILE} to {target}\n"
                     f"use them with --rules {target}, {RULES_ENV}={target}, or in pyproject.toml:\n"
                     f"  [tool.tprules]\n  rules = \"{target}\"\n")
    return 0
