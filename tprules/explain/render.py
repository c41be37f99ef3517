"""Explanations as indented trees, rendered with rich (colour only on a terminal; ASCII guides
when the output cannot take Unicode or `ascii=True`).

Tests render with colour off at a fixed width (`to_text`) and compare exact text.
"""

from __future__ import annotations

import io
import json

from rich.console import Console, Group
from rich.text import Text
from rich.tree import Tree

from .proof import (
    AggregateValue,
    Attempt,
    Checked,
    Computed,
    Derived,
    Elided,
    Explanation,
    Fact,
    Fusion,
    Proof,
    Shown,
    Unproven,
    WhyNot,
    to_json,
    where,
)
from .terms import show

# Styles (dropped when colour is off).
TUPLE, WHERE, RULE, NOTE, BAD = "bold", "cyan", "green", "dim", "bold red"


def _bindings(pairs) -> str:
    return ", ".join(f"{name} = {show(value)}" for name, value in pairs)


def _line(*parts: tuple[str, str]) -> Text:
    text = Text()
    for content, style in parts:
        text.append(content, style=style)
    return text


class Renderer:
    """Turns the explanation IR into rich trees. `hint` says how to expand an elided id."""

    def __init__(self, hint: str = "subproof {id}"):
        self.hint = hint

    # -- proofs ----------------------------------------------------------------------

    def proof(self, node: Proof, parent: Tree | None = None) -> Tree:
        label, children = self._proof_label(node)
        tree = Tree(label) if parent is None else parent.add(label)
        for child in children:
            self.proof(child, tree)
        if isinstance(node, AggregateValue) and node.more:
            tree.add(Text(f"... and {node.more} more", style=NOTE))
        return tree

    def _proof_label(self, node: Proof):
        match node:
            case Fact(text, _, _, pos, in_rules):
                origin = "fact in rules" if in_rules else "fact"
                at = where(pos) or "(no file)"
                return _line((text, TUPLE), (f"  {origin} {at}", WHERE)), ()
            case Computed(text, _, _, meaning):
                return _line((text, TUPLE), (f"  computed by tprules: {meaning}", NOTE)), ()
            case Derived(text, _, _, pos, rule, pairs, children):
                label = _line((text, TUPLE), (f"  {where(pos)}", WHERE))
                label.append("\n")
                label.append(rule, style=RULE)
                if pairs:
                    label.append("\n")
                    label.append(f"with {_bindings(pairs)}", style=NOTE)
                return label, children
            case Checked(_, text, note):
                return _line((text, ""), (f"  {note}", NOTE)), ()
            case AggregateValue(text, value, children, _):
                return _line((text, ""), (f" = {show(value)}", TUPLE)), children
            case Elided(number, text, what):
                hint = self.hint.format(id=number)
                return _line((text, TUPLE), (f"  [{what} #{number} elided: {hint}]", NOTE)), ()
            case Shown(text, pos):
                return _line((text, TUPLE), (f"  {where(pos)}", WHERE), ("  (proved above)", NOTE)), ()
            case Unproven(text, note):
                return _line((text, TUPLE), (f"  {note}", BAD)), ()
        raise TypeError(node)

    # -- why-not ---------------------------------------------------------------------

    def why_not(self, node: WhyNot | Elided, parent: Tree | None = None) -> Tree:
        if isinstance(node, Elided):
            return self.proof(node, parent)
        label = _line((node.text, TUPLE), (" does not hold", BAD), (f": {node.note}", NOTE))
        tree = Tree(label) if parent is None else parent.add(label)
        for attempt in node.attempts:
            self._attempt(attempt, tree)
        return tree

    def _attempt(self, attempt: Attempt, parent: Tree) -> None:
        label = _line((where(attempt.pos), WHERE), ("  ", ""), (attempt.rule, RULE))
        if attempt.bindings:
            label.append("\n")
            label.append(f"with {_bindings(attempt.bindings)}", style=NOTE)
        label.append("\n")
        if attempt.failed is None:
            label.append(attempt.reason, style=BAD)
        else:
            label.append("fails at ", style=BAD)
            label.append(attempt.failed, style=TUPLE)
            label.append(f": {attempt.reason}", style=BAD)
            others = attempt.reached - 1
            if others:
                noun = "binding gets" if others == 1 else "bindings get"
                label.append(f" ({others} other {noun} this far and fail{'s' if others == 1 else ''} too)",
                             style=NOTE)
        node = parent.add(label)
        for proof in attempt.blocking:
            self.proof(proof, node)
        if attempt.blocking_more:
            node.add(Text(f"... and {attempt.blocking_more} more", style=NOTE))
        if attempt.nested is not None:
            self.why_not(attempt.nested, node)

    # -- whole answers ---------------------------------------------------------------

    def fusion(self, fusion: Fusion) -> Text:
        notes = fusion.notes or ("",) * len(fusion.members)
        members = ", ".join(f"{o} ({place})" + (f" {note}" if note else "")
                            for (o, place), note in zip(fusion.members, notes))
        verdict = "legal" if not fusion.reasons else f"refused: {', '.join(fusion.reasons)}"
        return _line((f"fusion {fusion.fusion}", TUPLE), (f": {members}; ", ""), (verdict, NOTE))

    def explanation(self, expl: Explanation) -> Group:
        parts: list = [self.fusion(f) for f in expl.fusions]
        if expl.holds:
            total = len(expl.proofs) + expl.more
            if total > 1:
                first = "the first is" if len(expl.proofs) == 1 else f"the first {len(expl.proofs)} are"
                shown = f"; {first} shown" if expl.more else ""
                parts.append(Text(f"{total} tuples match {expl.atom}{shown}", style=NOTE))
            for proof in expl.proofs:
                parts.append(self.proof(proof))
        else:
            assert expl.why_not is not None  # what does not hold is explained
            parts.append(self.why_not(expl.why_not))
        return Group(*parts)

    def any(self, node) -> object:
        """A renderable for any node of the IR (an expanded subproof, a why-not, a whole answer)."""
        if isinstance(node, Explanation):
            return self.explanation(node)
        if isinstance(node, WhyNot):
            return self.why_not(node)
        return self.proof(node)


# ---- consoles ----------------------------------------------------------------------


class _Buffer(io.StringIO):
    """A text buffer that tells rich which encoding it may use (ASCII guides or Unicode)."""

    def __init__(self, encoding: str):
        super().__init__()
        self._encoding = encoding

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._encoding


def to_text(renderable, width: int = 100, ascii: bool = False) -> str:
    """Render with colour off at a fixed width."""
    buffer = _Buffer("ascii" if ascii else "utf-8")
    console = Console(file=buffer, width=width, color_system=None, force_terminal=False, highlight=False,
                      soft_wrap=False, emoji=False)
    console.print(renderable)
    # Table cells are padded to their column's width; trailing blanks only get in the way of diffs.
    return "".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines())


def as_json(node) -> str:
    return json.dumps(to_json(node), indent=2)
