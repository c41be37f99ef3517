"""Go to definition (a relation's `.decl`; a component's `.comp`; a reason string's deriving
rules), find references (every rule using a relation, across the folder and the files it
includes) and document symbols. A name means what the checks take it to mean (index.py):
`cuda.refused` is the relation declared in the component that `.init cuda` instantiates."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types

from ..datalog.lang import ast
from ..datalog.lang.printer import print_term
from ..pos import Pos
from .index import COMPONENT_ROLES, USE_ROLES, Occurrence
from .ruleset import RuleSet
from .text import lines_of, name_range, qualified_at, token_range, word_at


def _location(rs: RuleSet, pos: Pos, name: str | int) -> types.Location | None:
    path = rs.path_of(pos.file)
    if path is None:
        return None
    return types.Location(uri=path.as_uri(), range=name_range(pos, name))


def _at(rs: RuleSet, o: Occurrence) -> types.Location | None:
    """Where an occurrence is written: its name, or (a name a macro wrote) the line of the
    macro's use."""
    if o.length:
        return _location(rs, o.pos, o.length)
    path = rs.path_of(o.pos.file)
    line = Pos(o.pos.file, o.pos.line, 0)
    return types.Location(uri=path.as_uri(), range=token_range(rs.text_of(o.pos.file), line)) if path else None


def _distinct(locations) -> list[types.Location]:
    """In order, each place once (a component's rule is one use per instance, at one place)."""
    seen, out = set(), []
    for loc in locations:
        key = (loc.uri, loc.range.start.line, loc.range.start.character) if loc is not None else None
        if key is not None and key not in seen:
            seen.add(key)
            out.append(loc)
    return out


def resolve(rs: RuleSet, path: Path, position: types.Position) -> tuple[str, list[str], types.Range] | None:
    """What the name under the cursor stands for: ("relation", its relations, the name's
    range), several where a name in a component stands for one relation per instance;
    ("component", [name], range); ("string", [value], range) for a reason code; or None."""
    rf = rs.file_of(path)
    if rf is None:
        return None
    found = rs.index.at(rf.name, position.line, position.character)
    if found:
        kind = "component" if found[0].role in COMPONENT_ROLES else "relation"
        o = found[0]
        where = name_range(o.pos, o.length)
        return kind, list(dict.fromkeys(o.name for o in found if (o.role in COMPONENT_ROLES) == (kind == "component"))), where
    word = word_at(rf.text, position.line, position.character)
    if word is not None and word[0] == "string":
        return "string", [word[1]], word[2]
    named = qualified_at(rf.text, position.line, position.character)
    if named is None:
        return None
    name, where = named
    if name in rs.decls:  # a name no atom writes (`.output cuda.refused`, say)
        return "relation", [name], where
    if rs.index.named(name) and any(o.role == "component" for o in rs.index.named(name)):
        return "component", [name], where
    return None


def definition(rs: RuleSet, path: Path, position: types.Position) -> list[types.Location]:
    """The `.decl` of the relation under the cursor (of each instance's, inside a component);
    for a component's name, its `.comp`; for a string (a reason code such as "spans_chips"),
    every rule whose head derives it."""
    found = resolve(rs, path, position)
    if found is None:
        return []
    kind, names, _ = found
    if kind == "string":
        rules = {id(r) for r in rs.deriving(names[0])}
        return _distinct(_at(rs, o) for o in rs.index.occurrences if o.role == "head" and id(o.rule) in rules)
    if kind == "component":
        return _distinct(_at(rs, o) for o in rs.index.named(names[0]) if o.role == "component")
    return _distinct(_at(rs, o) for name in names for o in rs.index.named(name) if o.role == "decl"
                     and o.pos == rs.decls[name].pos)


def references(rs: RuleSet, path: Path, position: types.Position, with_decl: bool) -> list[types.Location]:
    """Every atom that names the relation under the cursor, in every rule file of the folder
    (for a component's name: every `.init` and base naming it)."""
    found = resolve(rs, path, position)
    if found is None or found[0] == "string":
        return []
    kind, names, _ = found
    wanted = ({"component use"} | ({"component"} if with_decl else set()) if kind == "component"
              else set(USE_ROLES) | ({"decl"} if with_decl else set()))
    return _distinct(_at(rs, o) for name in names for o in rs.index.named(name) if o.role in wanted)


def symbols(rs: RuleSet, path: Path) -> list[types.DocumentSymbol]:
    """The file's relations (each `.decl`) and rules (named by their head), in source order."""
    rf = rs.file_of(path)
    if rf is None or not rf.items:
        return []
    lines = lines_of(rf.text)
    out = []
    for item in rf.items:
        if isinstance(item, ast.Decl):
            columns = ", ".join(f"{a.name}: {a.type}" for a in item.attrs)
            out.append(_symbol(item.name, f"({columns})", types.SymbolKind.Struct, item.pos, item.pos.line,
                               name_range(item.pos, item.name), lines))
        elif isinstance(item, ast.Rule):
            head = f"{item.head.rel}({', '.join(print_term(a) for a in item.head.args)})"
            kind = types.SymbolKind.Constant if item.is_fact else types.SymbolKind.Function
            last = max([item.pos.line] + [lit.pos.line for lit in item.body])
            out.append(_symbol(head, "fact" if item.is_fact else "rule", kind, item.pos, last,
                               name_range(item.head.pos, item.head.rel), lines))
    return out


def _symbol(name, detail, kind, pos: Pos, last: int, selection: types.Range, lines) -> types.DocumentSymbol:
    end = len(lines[last - 1]) if 0 < last <= len(lines) else 0
    whole = types.Range(types.Position(pos.line - 1, 0), types.Position(last - 1, end))
    return types.DocumentSymbol(name=name, detail=detail, kind=kind, range=whole, selection_range=selection)
