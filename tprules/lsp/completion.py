"""Completion: relation names with their arity; inside a string, the constants of that
column's domain in the configured program (as the REPL completes them) and the rules'
reason codes."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types

from ..datalog.analysis.domains import column_domains
from ..datalog.lang.ast import Str as _Str
from ..repl.complete import string_column
from .folder_model import FolderModel
from .ruleset import RuleSet
from .text import statement_before


def complete(rs: RuleSet, path: Path, position: types.Position, program: FolderModel | None) -> types.CompletionList:
    file = rs.file_of(path)
    assert file is not None  # asked in a file of the set
    before = statement_before(file.text, position.line, position.character)
    if before.count('"') % 2 == 1:
        return types.CompletionList(is_incomplete=False, items=_in_string(rs, before, program))
    items = []
    for name, decl in sorted(rs.decls.items()):
        columns = ", ".join(f"{a.name}: {a.type}" for a in decl.attrs)
        items.append(types.CompletionItem(label=name, kind=types.CompletionItemKind.Struct,
                                          detail=f"{name}/{decl.arity}  ({columns})"))
    return types.CompletionList(is_incomplete=False, items=items)


def _rules(n: int) -> str:
    return f"reason code ({n} rule{'' if n == 1 else 's'})"


def _in_string(rs: RuleSet, before: str, program: FolderModel | None) -> list[types.CompletionItem]:
    where = string_column(before)
    domains = column_domains(rs.rules)
    reasons = rs.reasons()
    constants: list[str] = []
    if where is not None and program is not None:
        constants = program.column_symbols(domains, *where) or []
    # reason codes: every head string of the column's domain (all of them where it is unknown)
    if where is not None and where in domains:
        domain = domains[where]
        codes = sorted({a.value for r in rs.rules for i, a in enumerate(r.head.args)
                        if (r.head.rel, i) in domain and isinstance(a, _Str)})
    else:
        codes = sorted(reasons)
    items = [types.CompletionItem(label=c, kind=types.CompletionItemKind.EnumMember,
                                  detail=_rules(len(reasons.get(c, [])))) for c in codes]
    shown = set(codes)
    source = f"constant of {where[0]}.{where[1]} in {program.display}" if where and program else ""
    items += [types.CompletionItem(label=c, kind=types.CompletionItemKind.Value, detail=source)
              for c in constants if c not in shown]
    return items

