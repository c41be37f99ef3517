"""Go to definition (a relation's `.decl`; a reason string's deriving rules), find
references (every rule using a relation, across the folder) and document symbols."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types

from ..lang import ast
from ..lang.printer import print_term
from .ruleset import RuleSet
from .text import lines_of, name_range, word_at


def _location(rs: RuleSet, pos: ast.Pos, name: str) -> types.Location | None:
    path = rs.path_of(pos.file)
    if path is None:
        return None
    return types.Location(uri=path.as_uri(), range=name_range(pos, name))


def definition(rs: RuleSet, path: Path, position: types.Position) -> list[types.Location]:
    """The `.decl` of the relation under the cursor; for a string (a reason code such as
    "spans_chips"), every rule whose head derives it."""
    found = word_at(rs.file_of(path).text, position.line, position.character)
    if found is None:
        return []
    kind, word, _ = found
    if kind == "string":
        return [loc for r in rs.deriving(word) if (loc := _location(rs, r.head.pos, r.head.rel))]
    decl = rs.decls.get(word)
    if decl is None:
        return []
    loc = _location(rs, decl.pos, decl.name)
    return [loc] if loc else []


def references(rs: RuleSet, path: Path, position: types.Position, with_decl: bool) -> list[types.Location]:
    """Every atom that names the relation under the cursor, in every rule file of the folder."""
    found = word_at(rs.file_of(path).text, position.line, position.character)
    if found is None or found[0] != "name":
        return []
    rel = found[1]
    locations = []
    decl = rs.decls.get(rel)
    if with_decl and decl is not None:
        locations.append(_location(rs, decl.pos, rel))
    locations.extend(_location(rs, use.atom.pos, rel) for use in rs.uses(rel))
    return [loc for loc in locations if loc is not None]


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


def _symbol(name, detail, kind, pos: ast.Pos, last: int, selection: types.Range, lines) -> types.DocumentSymbol:
    end = len(lines[last - 1]) if 0 < last <= len(lines) else 0
    whole = types.Range(types.Position(pos.line - 1, 0), types.Position(last - 1, end))
    return types.DocumentSymbol(name=name, detail=detail, kind=kind, range=whole, selection_range=selection)
