"""Hover on a relation: its declaration, its columns with their types, the comment above
its `.decl`, where it is declared, and its tuple count in the configured program. A name
in a component stands for one relation per instance (each listed); an instance's relation
(`cuda.refused`) says which `.init` made it. Hover on a component's name: its `.comp`
line and the instances of it."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types

from ..datalog.lang import ast
from .folder_model import FolderModel
from .navigation import resolve
from .ruleset import RuleSet
from .text import comment_above


def hover(rs: RuleSet, path: Path, position: types.Position, program: FolderModel | None) -> types.Hover | None:
    found = resolve(rs, path, position)
    if found is None or found[0] == "string":
        return None
    kind, names, where = found
    parts = _component(rs, names[0]) if kind == "component" else _relations(rs, names, program)
    if not parts:
        return None
    return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value="\n\n".join(parts)),
                       range=where)


def _relations(rs: RuleSet, names: list[str], program: FolderModel | None) -> list[str]:
    names = [n for n in names if n in rs.decls]
    if not names:
        return []
    decl = rs.decls[names[0]]
    shown = names[0] if len(names) == 1 else names[0].rsplit(".", 1)[-1]
    columns = ", ".join(f"{a.name}: {a.type}" for a in decl.attrs)
    parts = [f"```\n.decl {shown}({columns})\n```"]
    parts.append("columns: " + ", ".join(f"`{a.name}` {a.type}" + (f" ({a.kind})" if a.kind and a.kind != a.type else "")
                                         for a in decl.attrs) if decl.attrs else "no columns")
    comment = comment_above(rs.text_of(decl.pos.file), decl.pos.line)
    if comment:
        parts.append(comment)
    if len(names) == 1:
        line = f"declared at {decl.pos.file}:{decl.pos.line}; {_derived(rs, names[0], program)}"
        parts.append(line + _instance(rs, names[0]))
    else:
        parts.append(f"declared at {decl.pos.file}:{decl.pos.line}, in a component: one relation for each instance")
        parts.extend(f"- `{name}`: {_derived(rs, name, program)}" for name in names)
    return parts


def _derived(rs: RuleSet, rel: str, program: FolderModel | None) -> str:
    """How a relation gets its tuples: its rules, its fact file, its subsumptive clauses."""
    heads = [u.rule for u in rs.uses(rel) if u.role == "head" and u.rule is not None]  # a head has its rule
    rules = len({id(r) for r in heads if r.dominating is None})
    clauses = len({id(r) for r in heads if r.dominating is not None})
    inputs = {n for item in rs.index.items if isinstance(item, ast.Directive) and item.kind == "input"
              for n in item.names}
    derived = f"derived by {rules} rule{'' if rules == 1 else 's'}"
    if rel in inputs:
        derived = "an input (its fact file)" + (f" and {derived}" if rules else "")
    if clauses:
        derived += f"; {clauses} subsumptive clause{'' if clauses == 1 else 's'} delete{'s' if clauses == 1 else ''} " \
                   "its dominated tuples"
    if program is not None and (count := program.count(rel)) is not None:
        derived += f"; {count} tuple{'' if count == 1 else 's'} in {program.display}"
    return derived


def _instance(rs: RuleSet, rel: str) -> str:
    """For an instance's relation: the `.init` that made it."""
    if "." not in rel:
        return ""
    instance = rel.split(".")[0]
    init = next((i for i in rs.items if isinstance(i, ast.Init) and i.instance == instance), None)
    return f"; of instance `{instance}` (`.init {instance} = {init.comp}` at {init.pos.file}:{init.pos.line})" \
        if init is not None else ""


def _component(rs: RuleSet, name: str) -> list[str]:
    comps = [o for o in rs.index.named(name) if o.role == "component"]
    if not comps:
        return []
    comp = _find_component(rs.items, name)
    bases = f" : {', '.join(str(b) for b in comp.bases)}" if comp is not None and comp.bases else ""
    own = str(comp.type) if comp is not None else name
    parts = [f"```\n.comp {own}{bases}\n```", f"declared at {comps[0].pos.file}:{comps[0].pos.line}"]
    inits = [i for i in rs.items if isinstance(i, ast.Init) and i.comp.name == name]
    if inits:
        parts.append("instances: " + ", ".join(f"`{i.instance}` ({i.pos.file}:{i.pos.line})" for i in inits))
    heirs = [c.type.name for c in _components(rs.items) if any(b.name == name for b in c.bases)]
    if heirs:
        parts.append("the base of: " + ", ".join(f"`{h}`" for h in heirs))
    return parts


def _components(items) -> list[ast.Component]:
    found = []
    for item in items:
        if isinstance(item, ast.Component):
            found += [item, *_components(item.items)]
    return found


def _find_component(items, name: str) -> ast.Component | None:
    return next((c for c in _components(items) if c.type.name == name), None)
