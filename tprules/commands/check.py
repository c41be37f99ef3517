"""`tprules check DIR`: judge every candidate fusion in DIR/member.facts."""

from __future__ import annotations

import sys
import time

from . import common


def add_parser(sub):
    p = sub.add_parser("check", help="judge every candidate fusion of a program")
    p.add_argument("dir", metavar="DIR", help="program folder of .facts files")
    common.add_rules(p)
    common.add_shim(p)
    common.add_format(p)
    common.add_engine(p)
    common.add_show(p)
    common.add_module(p)
    return p


def run(args) -> int:
    from ..workspace import Workspace

    started = time.perf_counter()
    ws = Workspace(args.dir, args.rules, args.shim, engine=args.engine, one_pass=True, include_dirs=args.include_dirs)
    verdicts = ws.verdict_table()
    from ..verdicts import MemberNotes, known_module, place_ids

    notes = MemberNotes.of(ws.program.facts)
    if args.module is not None:
        verdicts = verdicts.keep(verdicts.under_module(known_module(notes.modules, args.module), args.module))
    if args.format == "json":
        common.emit_json_lines({"shim": ws.shim, "shim_source": ws.shim_source}, "fusions",
                               verdicts.json_chunks(notes))
    else:
        sys.stdout.write(render_text(ws, verdicts, place_ids(ws.verdict_model, verdicts.symbols), notes))
    if "timing" in args.show:
        print(f"[timing] check: {time.perf_counter() - started:.3f} s", file=sys.stderr)
    return 0


def render_text(ws, verdicts, place_of: dict[int, str], notes=None) -> str:
    """The table of verdicts (a `VerdictTable`) and a summary line."""
    from ..verdicts import NO_NOTES

    fusions, reasons, members = verdicts.text_columns(place_of, notes or NO_NOTES)
    shown = ["legal" if legal else "refused" for legal in verdicts.legal.tolist()]
    widths = [max(map(len, [head, *column])) for head, column in
              (("fusion", fusions), ("verdict", shown), ("reasons", reasons))]
    row = f"{{:<{widths[0]}}}  {{:<{widths[1]}}}  {{:<{widths[2]}}}  {{}}".format
    lines = [ws.header("check"), "",
             row("fusion", "verdict", "reasons", "members").rstrip()]
    lines += map(row, fusions, shown, reasons, members)
    legal = int(verdicts.legal.sum())
    counts = verdicts.reason_counts()
    summary = ", ".join(f"{reason} {n}" for reason, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    noun = "candidate" if len(verdicts) == 1 else "candidates"
    lines += ["", f"{len(verdicts)} {noun}: {legal} legal, {len(verdicts) - legal} refused"
              + (f" ({summary})" if summary else "")]
    return "\n".join(lines) + "\n"
