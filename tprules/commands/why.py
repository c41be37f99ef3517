"""`tprules why DIR 'ATOM'`: the proof tree of a tuple that holds, or why an atom does not hold.

The atom is written in rule syntax, e.g. `refused("mm2_bias", "cycle")`; variables and `_`
explain every matching tuple. Subtrees deeper than `--depth` are elided with an id that
`--subproof ID` expands.
"""

from __future__ import annotations

import sys
import time

from . import common

NO_WRAP = 1000  # the width used when the output is not a terminal: lines are never wrapped


def add_parser(sub):
    p = sub.add_parser("why", help="explain why a tuple holds (proof tree) or why it does not")
    p.add_argument("dir", metavar="DIR", help="program folder of .facts files")
    p.add_argument("atom", metavar="ATOM", help="an atom in rule syntax, e.g. 'refused(\"mm2_bias\", R)'")
    common.add_rules(p)
    common.add_shim(p)
    common.add_format(p)
    add_explain_options(p)
    p.add_argument("--subproof", metavar="ID", type=int, help="expand the elided subtree ID of this explanation")
    common.add_show(p)
    return p


def add_explain_options(p) -> None:
    p.add_argument("--depth", metavar="N", type=int, default=None,
                   help="levels of derived tuples shown before subtrees are elided (default 6; 0: no limit)")
    p.add_argument("--ascii", action="store_true", help="draw the tree with ASCII characters only")
    p.add_argument("--width", metavar="N", type=int, help="wrap lines at N columns (default: the terminal's; "
                                                          "no wrapping when not a terminal)")


def depth_of(value: int | None):
    from ..errors import UsageError
    from ..explain.prove import DEFAULT_DEPTH

    if value is None:
        return DEFAULT_DEPTH
    if value < 0:
        raise UsageError("--depth takes a number of levels, 0 for no limit")
    return value or None


def settle_after_loading() -> None:
    """The loaded model lives as long as the command: move it out of the cyclic collector's sight.

    A full collection would otherwise walk every loaded object (16 ms on the 70B/TP8
    program, 0.1 ms frozen) in the middle of an explanation. Refcounting still frees it.
    """
    import gc

    gc.freeze()


def print_renderable(renderable, args) -> None:
    """Print a rich renderable: colour and wrapping on a terminal, plain full lines otherwise."""
    from rich.console import Console

    from ..explain.render import to_text

    if sys.stdout.isatty() and not args.ascii:
        Console(highlight=False, emoji=False, width=args.width).print(renderable)
    else:
        sys.stdout.write(to_text(renderable, width=args.width or NO_WRAP, ascii=args.ascii))


def run(args) -> int:
    from ..errors import UsageError
    from ..explain.explainer import Explainer
    from ..explain.proof import Explanation, Proof, WhyNot, to_json
    from ..explain.query import read_atom
    from ..explain.render import Renderer
    from ..workspace import Workspace

    depth = depth_of(args.depth)
    ws = Workspace(args.dir, args.rules, args.shim, include_dirs=args.include_dirs)
    atom = read_atom(args.atom, ws.checked)
    _ = ws.model  # evaluated before the clock starts: `why` is timed after loading
    settle_after_loading()
    started = time.perf_counter()
    explainer = Explainer.of(ws, depth)
    answer: Explanation | Proof | WhyNot  # the whole answer, or the subtree asked for
    try:
        answer = explainer.explain(atom)
        if args.subproof is not None:
            if args.subproof not in explainer.prover.elided:
                given = len(explainer.prover.elided)
                known = f"ids 1..{given}" if given else "none was elided"
                raise UsageError(f"no elided subtree #{args.subproof} in this explanation ({known})")
            answer = explainer.subproof(args.subproof)
    except RecursionError:
        raise UsageError("this proof is too deep to build whole; give --depth N and expand with --subproof") from None
    if "timing" in args.show:
        print(f"[timing] why: {time.perf_counter() - started:.3f} s after loading", file=sys.stderr)
    if args.format == "json":  # indented: a tree is read as a tree (common.emit_json puts each element on one line)
        import json

        data = {"shim": ws.shim, "shim_source": ws.shim_source, **to_json(answer)}
        if args.subproof is not None:
            data = to_json(answer)
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
        return 0
    sys.stdout.write(ws.header("why") + "\n")
    print_renderable(Renderer("--subproof {id}").any(answer), args)
    return 0
