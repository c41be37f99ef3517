"""The REPL's answers as rich tables (text) or JSON strings: queries, rules, facts, relations, plan."""

from __future__ import annotations

import json

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..explain.terms import show

ROWS_SHOWN = 50  # rows of a table printed as text; JSON gets them all
ANSWER_LIMIT = 100_000  # a query stops collecting answers here


def _table(*columns: str) -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, highlight=False)
    for column in columns:
        table.add_column(column, overflow="fold")
    return table


def _rows_note(shown: int, total: int, noun: str) -> Text:
    more = f"; the first {shown} are shown" if total > shown else ""
    return Text(f"{total} {noun}{'' if total == 1 else 's'}{more}")


def query(session, body, names: list[str]):
    """The distinct bindings of a query's named variables (`names`), sorted."""
    solver = session.explainer.solver
    rows: set = set()
    stopped = False
    for env, _ in solver.solutions(body, {}):
        rows.add(tuple(env[n] for n in names))
        if len(rows) >= ANSWER_LIMIT:
            stopped = True
            break
    ordered = sorted(rows)
    if session.module is not None and names:
        inside = _inside(session)
        ordered = [r for r in ordered if any(v in inside for v in r)]
    if session.format == "json":
        if not names:
            return json.dumps({"holds": bool(rows)})
        return json.dumps({"variables": names, "rows": [list(r) for r in ordered], "count": len(ordered),
                           "stopped": stopped})
    if not names:
        return Text("true." if rows else "false.")
    if not rows:
        return Text("no answers.")
    table = _table(*names)
    for row in ordered[:ROWS_SHOWN]:
        table.add_row(*(show(v) for v in row))
    note = _rows_note(min(ROWS_SHOWN, len(ordered)), len(ordered), "answer")
    if stopped:
        note.append(f" (stopped at {ANSWER_LIMIT})")
    return Group(table, note)


def _inside(session) -> set[str]:
    """The statements under `:module`, and the candidate fusions holding one."""
    from ..verdicts import MemberNotes, under

    facts = session.workspace.program.facts
    modules = MemberNotes.of(facts).modules
    statements = {o for o, m in modules.items() if under(m, session.module)}
    return statements | {f for f, o in facts.tuples("member") if o in statements}


def rules(session, rel: str):
    from ..datalog.lang.printer import print_rule_origin

    checked = session.workspace.checked
    found = checked.rules_for(rel)
    if session.format == "json":
        return json.dumps({"relation": rel, "rules": [{"file": r.pos.file, "line": r.pos.line, "text": print_rule_origin(r)}
                                                       for r in found]})
    if not found:
        kind = "an input relation" if rel in checked.inputs else "declared but never derived"
        return Text(f"{rel} has no rules: it is {kind} (:facts {rel} lists its tuples)")
    lines = Text()
    for i, rule in enumerate(found):
        if i:
            lines.append("\n")
        lines.append(f"{rule.pos.file}:{rule.pos.line}", style="cyan")
        lines.append(f"  {print_rule_origin(rule)}")
    return lines


def facts(session, rel: str, pattern):
    """Tuples of a relation (or those matching an atom); input facts with the file:line they come from."""
    from ..program.schema import SPEC

    ws = session.workspace
    origins = ws.program.facts
    if rel in ws.checked.decls:
        columns = [a.name for a in ws.checked.decls[rel].attrs]
        tuples = session.explainer.solver.matching(pattern) if pattern is not None else sorted(ws.model.tuples(rel))
    else:  # a SPEC §2 relation that no rule reads: only its facts
        columns = [name for name, _ in SPEC[rel].columns]
        tuples = sorted(origins.tuples(rel))
    if session.format == "json":
        return json.dumps({"relation": rel, "columns": columns, "count": len(tuples),
                           "tuples": [{"values": list(t), "at": _where(origins.where(rel, t))} for t in tuples]})
    if not tuples:
        return Text(f"no tuples of {rel}" + (" match" if pattern is not None else ""))
    table = _table(*columns, "from")
    for t in tuples[:ROWS_SHOWN]:
        table.add_row(*(show(v) for v in t), _where(origins.where(rel, t)) or "derived")
    return Group(table, _rows_note(min(ROWS_SHOWN, len(tuples)), len(tuples), "tuple"))


def _where(pos) -> str | None:
    return None if pos is None else f"{pos.file}:{pos.line}"


def relations(session):
    ws = session.workspace
    checked = ws.checked
    derived = set(checked.derived)
    rows = []
    for name, decl in sorted(checked.decls.items()):
        kind = "derived" if name in derived else "input"
        rows.append((name, kind, session.explainer.solver.read.count(name), f"{decl.pos.file}:{decl.pos.line}"))
    if session.format == "json":
        return json.dumps({"relations": [{"relation": n, "kind": k, "tuples": c, "declared": d} for n, k, c, d in rows]})
    table = _table("relation", "kind", "tuples", "declared")
    for name, kind, count, declared in rows:
        table.add_row(name, kind, str(count), declared)
    return table


def plan(session):
    from ..planner import plan as make_plan

    result = make_plan(session.workspace)
    groups = result.groups
    if session.module is not None:
        inside = _inside(session)
        groups = tuple(g for g in groups if any(o in inside for o in g.members))
    if session.format == "json":
        return json.dumps({**result.to_json(), "groups": [g.to_json() for g in groups]})
    table = _table("group", "place", "members")
    for group in groups:
        table.add_row(group.group, group.place, ", ".join(group.members))
    return Group(Text(f"plan for shim {result.shim}: {len(result.groups)} groups"), table)


def loaded(session):
    ws = session.workspace
    model = ws.model
    candidates = {f for f, _ in model.tuples("member")}
    legal = {t[0] for t in model.tuples("legal")} & candidates if "legal" in ws.checked.decls else set()
    rules_count = len(ws.checked.program.rules)
    text = (f"reloaded {ws.checked.source}: {rules_count} rules; {ws.program.display}: {len(candidates)} candidates, "
            f"{len(legal)} legal, {len(candidates) - len(legal)} refused")
    return json.dumps({"reloaded": text}) if session.format == "json" else Text(text)


def help_table(commands):
    table = _table("command", "does")
    for command in commands:
        table.add_row(f"{command.name} {command.args}".strip(), command.help)
    return table
