"""`tprules repl DIR`: the query REPL. On a terminal: prompt_toolkit with history and completion.
With stdin piped: one command per line, each echoed after the prompt with its answer."""

from __future__ import annotations

import sys

from . import common
from .why import NO_WRAP, add_explain_options, depth_of


def add_parser(sub):
    p = sub.add_parser("repl", help="open the query REPL (why, whynot, ?- queries, :reload)")
    p.add_argument("dir", metavar="DIR", help="program folder of .facts files")
    common.add_rules(p)
    common.add_shim(p)
    add_explain_options(p)
    common.add_show(p)
    return p


def run(args) -> int:
    from ..repl.session import Session
    from ..repl.terminal import run_piped, run_terminal

    session = Session(args.dir, args.rules, args.shim, depth_of(args.depth), args.include_dirs)
    if sys.stdin.isatty():
        run_terminal(session, args.width)
    else:
        run_piped(session, sys.stdin, sys.stdout.write, args.width or NO_WRAP, args.ascii)
    return 0
