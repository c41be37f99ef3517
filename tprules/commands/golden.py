"""`tprules golden [DIR...]`: check the programs' verdicts and plans against their golden
snapshots (tests/golden/); `--update` rewrites the snapshots after a deliberate change.

Exit 0 when every snapshot matches (or was rewritten), 1 when one differs, is missing or
is stale, 2 for bad input.
"""

from __future__ import annotations

import shlex
import sys
import time

from ..errors import UsageError
from ..paths import display_path
from . import common


def add_parser(sub):
    p = sub.add_parser("golden", help="check (or --update) the golden snapshots of verdicts and plans")
    p.add_argument("dirs", metavar="DIR", nargs="*",
                   help="program folders, or folders of them (default: every example program under "
                        "facts/, and then a snapshot of a program that no longer exists is stale)")
    common.add_rules(p)
    p.add_argument("--snapshots", metavar="SNAP_DIR", help="snapshot folder (default: the project's tests/golden/)")
    p.add_argument("--update", action="store_true",
                   help="rewrite the snapshots from the rules now, remove stale ones, print what changed")
    common.add_engine(p)
    common.add_show(p)
    return p


def run(args) -> int:
    from ..golden.check import Golden
    from ..golden.corpus import EXAMPLES_DIR, SNAPSHOTS_DIR, check_distinct, example_programs, expand
    from ..golden.render import golden_text

    started = time.perf_counter()
    whole = not args.dirs
    if whole:
        programs = example_programs(EXAMPLES_DIR) if EXAMPLES_DIR.is_dir() else []
        if not programs:  # nothing checked must not read as every snapshot matching
            raise UsageError(f"no example programs under {display_path(EXAMPLES_DIR)}: "
                             "nothing to check (name the program folders: tprules golden DIR...)")
    else:
        programs = expand(args.dirs)
    check_distinct(programs)
    golden = Golden(args.snapshots or SNAPSHOTS_DIR, args.rules, args.engine, args.update, args.include_dirs)
    results = [golden.program(p) for p in programs]
    stale = golden.stale_programs(programs) if whole else ()
    golden.commit()  # every program loaded: now write
    sys.stdout.write(golden_text(results, stale, args.update, accept_command(args), golden.snapshots))
    if "timing" in args.show:
        print(f"[timing] golden: {time.perf_counter() - started:.3f} s", file=sys.stderr)
    if args.update:
        return 0
    return 0 if all(r.ok for r in results) and not stale else 1


def accept_command(args) -> str:
    """The same command with --update: what rewrites exactly these snapshots."""
    words = ["tprules", "golden", "--update"]
    if args.rules:
        words += ["--rules", args.rules]
    if args.snapshots:
        words += ["--snapshots", args.snapshots]
    return shlex.join(words + list(args.dirs))
