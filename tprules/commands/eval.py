"""`tprules eval PROGRAM.dl|DIR [-F FACTS_DIR] [-D OUT_DIR|-] [--engine E]`: run any program of
the rule language with Soufflé's command-line shape.

Every `.input` relation is read from FACTS_DIR (default `.`), every `.output` relation is
written as OUT_DIR/<rel>.csv (default `.`; `-D -` prints them instead), and `.printsize`
prints a relation's size, as `souffle -F FACTS_DIR -D OUT_DIR PROGRAM.dl` would. A folder
is one program made of its `.dl` files.
"""

from __future__ import annotations

from pathlib import Path

from . import common


def add_parser(sub):
    p = sub.add_parser("eval", help="run a rule program as Soufflé would: read .input, write .output")
    p.add_argument("program", metavar="PROGRAM", help="a .dl file, or a folder of them (one program)")
    p.add_argument("-F", "--facts", dest="facts", metavar="FACTS_DIR", default=".",
                   help="where .input relations are read (default: .)")
    p.add_argument("-D", "--output", dest="output", metavar="OUT_DIR", default=".",
                   help="where .output relations are written as <rel>.csv (default: .); '-' prints them")
    common.add_include(p)
    p.add_argument("--magic-transform", metavar="RELATIONS", default="",
                   help="magic sets, as Soufflé's option (any value, e.g. '*'; the same as .pragma \"magic-transform\")")
    common.add_engine(p)
    common.add_show(p)
    return p


def load(program: str, magic: str = "", include_dirs=()):
    """Parse and check a .dl file or a folder of them (with magic sets when `magic` is given);
    `#include` searches `include_dirs` (the -I folders) after the including file's folder."""
    from ..datalog.analysis.checked import check_rules, load_rules
    from ..datalog.lang.parser import parse_file
    from ..errors import UsageError
    from ..paths import display_path

    path = Path(program)
    if magic:
        return _with_magic(path, magic, include_dirs)
    if path.is_dir():
        return load_rules(path, use_cache=False, include_dirs=include_dirs)
    if not path.is_file():
        raise UsageError(f"no such program: {program} (a .dl file or a folder of them)")
    return check_rules(parse_file(path, display_path(path), _folders(include_dirs)), display_path(path))


def _folders(include_dirs) -> tuple[Path, ...]:
    return tuple(Path(f) for f in include_dirs)


def _with_magic(path: Path, magic: str, include_dirs=()):
    from ..datalog.analysis.checked import check_rules
    from ..datalog.lang import ast
    from ..datalog.lang.parser import parse_file
    from ..errors import UsageError
    from ..paths import display_path
    from ..pos import Pos

    files = sorted(path.glob("*.dl")) if path.is_dir() else [path]
    if not files or not all(f.is_file() for f in files):
        raise UsageError(f"no such program: {path} (a .dl file or a folder of them)")
    items: list = []
    for f in files:
        items.extend(parse_file(f, display_path(f), _folders(include_dirs)).items)
    items.append(ast.Pragma("magic-transform", magic, Pos("--magic-transform", 0, 0)))
    return check_rules(ast.RuleSource(tuple(items)), display_path(path))


def run(args) -> int:
    from ..deep import on_large_stack

    return on_large_stack(_run, args)  # a deeply nested expression must not exhaust the stack


def _run(args) -> int:
    from ..datalog.facts import souffle_io
    from ..datalog.lang import values
    from ..workspace import make_engine

    checked = load(args.program, args.magic_transform, args.include_dirs)
    chans = souffle_io.channels(checked)
    facts_dir = Path(args.facts)
    read: dict[str, list[tuple]] = {}
    for chan in chans:
        if chan.kind == "input":
            rows = souffle_io.read_input(chan, checked.decls[chan.rel].types, facts_dir)
            read.setdefault(chan.rel, []).extend(souffle_io.records_read(checked, chan.rel, rows))
    facts = {rel: set(rows) for rel, rows in read.items()}
    if "strata" in args.show:
        for stratum in checked.strata:
            print(f"stratum {stratum.index} ({'recursive' if stratum.recursive else 'plain'}): "
                  f"{', '.join(stratum.relations)}")
    wanted = sorted({c.rel for c in chans if c.kind in ("output", "printsize")})
    with values.evaluation(souffle_io.symbols_in_order(checked, read)):  # ord's table and autoinc()'s counter
        model = make_engine(args.engine, checked).evaluate(facts, targets=wanted)
    souffle_io.write_outputs(model, checked, chans, args.output)
    return 0
