"""`tprules export DIR OUT`: write what Soufflé needs to run the same rules on the same program.

OUT/rules.dl is every rule file of the folder, concatenated in order (the folder's other
files, which they may `#include`, are copied beside it); OUT/facts/ holds the
program's facts, the shim library's, and the computed inputs (`target`, `topo`). Then:
`souffle -F OUT/facts -D OUT/out OUT/rules.dl`.
"""

from __future__ import annotations

from pathlib import Path

from . import common


def add_parser(sub):
    p = sub.add_parser("export", help="write facts and rules ready for Soufflé")
    p.add_argument("dir", metavar="DIR", help="program folder")
    p.add_argument("out", metavar="OUT", help="folder to write")
    common.add_rules(p)
    common.add_shim(p)
    common.add_show(p)
    return p


def write_facts(facts, relations, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for rel in relations:
        lines = ["\t".join(str(c) for c in t) for t in facts.ordered(rel)]
        (out / f"{rel}.facts").write_text("".join(line + "\n" for line in lines))


def run(args) -> int:
    from ..program.load import load_program
    from ..rulefolder import rules_folder
    from ..workspace import load_checked_rules

    checked = load_checked_rules(args.rules, args.include_dirs)
    program = load_program(args.dir, checked, args.shim)
    out = Path(args.out)
    rules_dir = rules_folder(args.rules)
    texts = [f"// ---- {p.name}\n{p.read_text()}" for p in sorted(rules_dir.glob("*.dl"))]
    out.mkdir(parents=True, exist_ok=True)
    (out / "rules.dl").write_text("\n".join(texts))
    for path in sorted(rules_dir.iterdir()):  # what the rule files #include (decls.dlh, say), beside them
        if path.is_file() and path.suffix != ".dl":
            (out / path.name).write_bytes(path.read_bytes())
    write_facts(program.facts, [r for r in checked.inputs], out / "facts")
    (out / "out").mkdir(exist_ok=True)  # Soufflé writes there but does not create it
    print(f"wrote {out}/rules.dl and {len(checked.inputs)} fact files under {out}/facts "
          f"(shim {program.shim}); run: souffle -F {out}/facts -D {out}/out {out}/rules.dl")
    return 0
