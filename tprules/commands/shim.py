"""`tprules shim complete DIR --level fused|alone|none`: append the answers a program's own
shim misses (one `supports` line per registry class it does not answer) to DIR's own
supports.facts, and say what was added. Exit 0, or 2 for bad input."""

from __future__ import annotations

import sys

from ..program.schema import LEVELS


def add_parser(sub):
    p = sub.add_parser("shim", help="work on a program's own shim (complete: add the answers it misses)")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    c = actions.add_parser("complete", help="append the classes the program's own shim misses to its supports.facts")
    c.add_argument("program", metavar="DIR", help="program folder with a shim of its own")
    c.add_argument("--level", required=True, choices=LEVELS, help="the level every added answer gets")
    return p


def run(args) -> int:
    from ..shim.complete import complete, render

    done = complete(args.program, args.level)
    sys.stdout.write(render(done, args.program))
    return 0
