"""`tprules diff --old RULES_DIR --new RULES_DIR DIR...`: every verdict that differs between
two rule sets over the programs, each changed tuple explained under both rule sets.

Exit 0 when nothing differs, 1 when something does, 2 for bad input (a rule file that does
not load on either side, named with file:line).
"""

from __future__ import annotations

import sys
import time

from . import common


def add_parser(sub):
    p = sub.add_parser("diff", help="report every verdict that differs between two rule sets")
    p.add_argument("--old", metavar="RULES_DIR", required=True, help="the rule folder before the change")
    p.add_argument("--new", metavar="RULES_DIR", required=True, help="the rule folder after the change")
    p.add_argument("dirs", metavar="DIR", nargs="+",
                   help="program folders of .facts files, or folders of them (facts/: every example program)")
    p.add_argument("--shim", metavar="NAME", action="append",
                   help="judge with this shim (repeatable; default: each shim the program is meant for: "
                        "its own shim.facts, else cuda-lane:h100:Bf16)")
    common.add_format(p)
    common.add_engine(p)
    common.add_show(p)
    return p


def run(args) -> int:
    from ..golden.corpus import expand
    from ..golden.render import rule_diff_text
    from ..golden.rulediff import diff_rules

    started = time.perf_counter()
    diff = diff_rules(args.old, args.new, expand(args.dirs), args.shim, args.engine)
    if args.format == "json":
        import json

        sys.stdout.write(json.dumps(diff.to_json(), indent=2) + "\n")
    else:
        sys.stdout.write(rule_diff_text(diff))
    if "timing" in args.show:
        print(f"[timing] diff: {time.perf_counter() - started:.3f} s", file=sys.stderr)
    return 1 if diff.changes else 0
