"""Rule sessions over a graph: the facts a shim hands the rules, evaluated once per graph.

A session is a `Workspace` over facts built from a `TensorGraph` (plus a manifest and shim
facts) instead of a program folder. Its model without candidates is evaluated once; every
question after that only evaluates the strata that depend on candidates (`Workspace.ask`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..datalog.facts.base import FactBase
from ..errors import RuleError
from ..pos import Pos

GRAPH = "<graph>"  # where facts built from a graph say they come from, in error messages


def fact_base(relations: dict[str, list[tuple]], origin: str = GRAPH) -> FactBase:
    """Facts with a position for each tuple (`<graph>/op.facts:3`), so their order is kept."""
    facts = FactBase()
    for rel, tuples in relations.items():
        facts.relations.setdefault(rel, set())
        facts.files.setdefault(rel, []).append(f"{origin}/{rel}.facts")
        for i, tup in enumerate(tuples, 1):
            facts.add(rel, tup, Pos(f"{origin}/{rel}.facts", i))
    return facts


def open_session(relations: dict[str, list[tuple]], shim: str, checked, engine: str = "fast",
                 computed: dict[str, set[tuple]] | None = None):
    """A Workspace over these facts, asking `shim`."""
    from ..program.load import prepare_program
    from ..workspace import Workspace

    facts = fact_base(relations)
    program = prepare_program(facts, set(), shim, Path(GRAPH), GRAPH, computed)  # `shim` is named: no own shim needed
    return Workspace.from_program(program, checked, engine)


class SessionCache:
    """One session per graph version: a graph edited after a question gets a fresh session."""

    def __init__(self):
        self._entries: dict[int, tuple[Any, int, object]] = {}  # id → (graph, its version, session)

    def get(self, g):
        entry = self._entries.get(id(g))
        if entry is not None and entry[0] is g and entry[1] == g.version:
            return entry[2]
        return None

    def put(self, g, session) -> None:
        self._entries[id(g)] = (g, g.version, session)


def rule_sources(checked) -> dict[str, tuple[str, str, str]]:
    """reason → (owner, rule `file:line`, the rule's comment) for each reason a rule names.

    Owner is `base` for a `base_refused` rule, `tp` for a `refused` rule. The comment is the
    `//` block just above the rule, less its leading `reason:`.
    """
    found: dict[str, tuple[str, str, str]] = {}
    for rule in checked.program.rules:
        head = rule.head
        if head.rel not in ("refused", "base_refused") or len(head.args) != 2:
            continue
        reason = getattr(head.args[1], "value", None)
        if not isinstance(reason, str) or reason in found:
            continue
        owner = "base" if head.rel == "base_refused" else "tp"
        found[reason] = (owner, f"{rule.pos.file}:{rule.pos.line}", _comment_above(rule.pos, reason))
    return found


def _comment_above(pos: Pos, reason: str) -> str:
    try:
        lines = Path(pos.file).read_text().split("\n")
    except OSError:
        return ""
    block: list[str] = []
    i = pos.line - 2
    while i >= 0 and lines[i].lstrip().startswith("//"):
        block.insert(0, lines[i].lstrip()[2:].strip())
        i -= 1
    text = " ".join(block)
    prefix = f"{reason}:"
    return text[len(prefix):].strip() if text.startswith(prefix) else text


def require_inputs(checked, *relations: str) -> None:
    missing = [r for r in relations if r not in checked.inputs]
    if missing:
        raise RuleError(f"the rules in {checked.source} declare no input {', '.join(missing)} "
                        "(see rules/schema.dl); a Python base shim's answers cannot reach them")
