"""A code lens on every rule: "refuses 37 candidates of facts/llama-layer-tp4" for a
refusal rule, "derives 412 tuples" for any other, from the configured program's model."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types

from ..pos import Pos
from .folder_model import FolderModel
from .ruleset import RuleSet
from .text import name_range


def title(verb: str, count: int, display: str) -> str:
    if verb == "refuses":
        return f"refuses {count} candidate{'' if count == 1 else 's'} of {display}"
    return f"derives {count} tuple{'' if count == 1 else 's'}"


def lenses(rs: RuleSet, path: Path, program: FolderModel) -> list[types.CodeLens]:
    """The lenses of one file, for the rules `program` was evaluated with (checked rules
    carry their source positions, so each lens sits on its rule's head). A rule of a
    component is one rule for each instance: its lens names each instance's relation."""
    name = next((n for n, f in rs.files.items() if f.path == path.resolve()), None)
    heads: dict[Pos, list] = {}
    for rule in program.checked.program.rules:
        if rule.is_fact or rule.pos.file != name:
            continue
        heads.setdefault(rule.head.pos, []).append((rule.head.rel, *program.derived_by(rule)))
    out = []
    for pos, found in heads.items():
        written = rs.index.at(pos.file, pos.line - 1, pos.col - 1)
        length = written[0].length if written else len(found[0][0])
        text = (title(found[0][1], found[0][2], program.display) if len(found) == 1 else
                " · ".join(f"{rel}: {title(verb, count, program.display)}" for rel, verb, count in found))
        out.append(types.CodeLens(range=name_range(pos, length), command=types.Command(title=text, command="")))
    return out
