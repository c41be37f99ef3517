"""Hover on a relation: its declaration, its columns with their types, the comment above
its `.decl`, where it is declared, and its tuple count in the configured program."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types

from ..lang import ast
from .program import ProgramView
from .ruleset import RuleSet
from .text import comment_above, word_at


def hover(rs: RuleSet, path: Path, position: types.Position, program: ProgramView | None) -> types.Hover | None:
    found = word_at(rs.file_of(path).text, position.line, position.character)
    if found is None or found[0] != "name":
        return None
    _, rel, where = found
    decl = rs.decls.get(rel)
    if decl is None:
        return None
    columns = ", ".join(f"{a.name}: {a.type}" for a in decl.attrs)
    parts = [f"```\n.decl {rel}({columns})\n```"]
    parts.append("columns: " + ", ".join(f"`{a.name}` {a.type}" + (f" ({a.kind})" if a.kind and a.kind != a.type else "")
                                         for a in decl.attrs) if decl.attrs else "no columns")
    comment = comment_above(rs.text_of(decl.pos.file), decl.pos.line)
    if comment:
        parts.append(comment)
    uses = rs.uses(rel)
    rules = len({id(u.rule) for u in uses if u.role == "head"})
    inputs = {n for item in rs.items if isinstance(item, ast.Directive) and item.kind == "input" for n in item.names}
    derived = f"derived by {rules} rule{'' if rules == 1 else 's'}"
    if rel in inputs:
        derived = "an input (its fact file)" + (f" and {derived}" if rules else "")
    line = f"declared at {decl.pos.file}:{decl.pos.line}; {derived}"
    if program is not None and (count := program.count(rel)) is not None:
        line += f"; {count} tuple{'' if count == 1 else 's'} in {program.display}"
    parts.append(line)
    return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value="\n\n".join(parts)),
                       range=where)
