"""A code lens on every rule: "refuses 37 candidates of facts/llama-layer-tp4" for a
refusal rule, "derives 412 tuples" for any other, from the configured program's model."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types

from .program import ProgramView
from .ruleset import RuleSet
from .text import name_range


def title(verb: str, count: int, display: str) -> str:
    if verb == "refuses":
        return f"refuses {count} candidate{'' if count == 1 else 's'} of {display}"
    return f"derives {count} tuple{'' if count == 1 else 's'}"


def lenses(rs: RuleSet, path: Path, program: ProgramView) -> list[types.CodeLens]:
    """The lenses of one file, for the rules `program` was evaluated with (checked rules
    carry their source positions, so each lens sits on its rule's head)."""
    name = next((n for n, f in rs.files.items() if f.path == path.resolve()), None)
    out = []
    for rule in program.checked.program.rules:
        if rule.is_fact or rule.pos.file != name:
            continue
        verb, count = program.derived_by(rule)
        out.append(types.CodeLens(range=name_range(rule.head.pos, rule.head.rel),
                                  command=types.Command(title=title(verb, count, program.display), command="")))
    return out
