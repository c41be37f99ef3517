"""`tprules check DIR`: judge every candidate fusion in DIR/member.facts."""

from __future__ import annotations

import sys
import time
from collections import Counter

from . import common


def add_parser(sub):
    p = sub.add_parser("check", help="judge every candidate fusion of a program")
    p.add_argument("dir", metavar="DIR", help="program folder of .facts files")
    common.add_rules(p)
    common.add_shim(p)
    common.add_format(p)
    common.add_engine(p)
    common.add_show(p)
    return p


def run(args) -> int:
    from ..workspace import Workspace

    started = time.perf_counter()
    ws = Workspace(args.dir, args.rules, args.shim, engine=args.engine)
    verdicts = ws.verdicts()
    if args.format == "json":
        common.emit_json_lines({"shim": ws.shim, "shim_source": ws.shim_source}, "fusions", [v.json_line() for v in verdicts])
    else:
        from ..verdicts import places

        sys.stdout.write(render_text(ws, verdicts, places(ws.verdict_model)))
    if "timing" in args.show:
        print(f"[timing] check: {time.perf_counter() - started:.3f} s", file=sys.stderr)
    return 0


def render_text(ws, verdicts, where: dict[str, str]) -> str:
    rows = [("fusion", "verdict", "reasons", "members")]
    for v in verdicts:
        members = ", ".join(f"{o} ({where.get(o, '?')})" for o in v.members)
        rows.append((v.fusion, "legal" if v.legal else "refused", ", ".join(v.reasons) or "-", members))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [ws.header("check"), ""]
    for r in rows:
        lines.append(f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]}".rstrip())
    legal = sum(v.legal for v in verdicts)
    counts = Counter(r for v in verdicts for r in v.reasons)
    summary = ", ".join(f"{reason} {n}" for reason, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    lines.append("")
    noun = "candidate" if len(verdicts) == 1 else "candidates"
    lines.append(f"{len(verdicts)} {noun}: {legal} legal, {len(verdicts) - legal} refused"
                 + (f" ({summary})" if summary else ""))
    return "\n".join(lines) + "\n"
