"""`tprules lint [--rules RULES_DIR] [DIR]`: check rule files (and a program's facts) without judging."""

from __future__ import annotations

from . import common


def add_parser(sub):
    p = sub.add_parser("lint", help="check rule files and facts without judging")
    p.add_argument("dir", metavar="DIR", nargs="?", help="also check this program folder's facts")
    common.add_rules(p)
    common.add_shim(p)
    common.add_show(p)
    return p


def run(args) -> int:
    from ..datalog.analysis.checked import load_rules
    from ..program.load import check_rule_schema, load_program
    from ..rulefolder import rules_folder

    rules_dir = rules_folder(args.rules)
    checked = load_rules(rules_dir, use_cache=False, include_dirs=args.include_dirs)
    check_rule_schema(checked)
    if "strata" in args.show:
        for stratum in checked.strata:
            kind = "recursive" if stratum.recursive else "plain"
            print(f"stratum {stratum.index} ({kind}): {', '.join(stratum.relations)}")
    if "ast" in args.show:
        from ..datalog.lang.printer import print_rules

        print(print_rules(checked.program), end="")
    if "code" in args.show:
        from ..datalog.engine.compiled import Evaluator

        print(Evaluator(checked).source())
    rules = len(checked.program.rules)
    message = f"ok: {checked.source}: {len(checked.decls)} relations, {rules} rules, {len(checked.strata)} strata"
    if args.dir:
        program = load_program(args.dir, checked, args.shim)
        facts = sum(map(program.facts.count, program.facts.names()))
        message += f"; {program.display}: {len(program.order)} statements, {facts} facts"
    print(message)
    return 0
