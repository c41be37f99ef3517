"""The explanation IR: proof trees of tuples that hold, why-not trees of atoms that do not.

Frozen dataclasses joined by the `Proof` union, lowered to text by `render.py` and to
JSON by `to_json` here. Tuples are kept as the atom text the user would write
(`refused("mm2_bias", "cycle")`), with the relation and values beside it for tools.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union, overload

from ..pos import Pos


@overload
def where(pos: Pos) -> str: ...
@overload
def where(pos: Pos | None) -> str | None: ...
def where(pos: Pos | None) -> str | None:
    """`file:line` of a position (the column is noise in a proof)."""
    return None if pos is None else f"{pos.file}:{pos.line}"


# ---- proof nodes -----------------------------------------------------------------


@dataclass(frozen=True)
class Fact:
    """A leaf: a line of a fact file, or a fact written in a rule file."""

    text: str
    rel: str
    values: tuple
    pos: Pos | None
    in_rules: bool = False  # written in a rule file rather than a .facts file


@dataclass(frozen=True)
class Computed:
    """A leaf: an input tprules computes (`target`, `topo`)."""

    text: str
    rel: str
    values: tuple
    meaning: str


@dataclass(frozen=True)
class Derived:
    """A tuple derived by a rule: the rule, its bindings, one child per body literal."""

    text: str
    rel: str
    values: tuple
    pos: Pos
    rule: str
    bindings: tuple[tuple[str, object], ...]  # (variable, value)
    children: tuple["Proof", ...]


@dataclass(frozen=True)
class Checked:
    """A negated atom or a comparison, shown as checked with the bindings substituted."""

    kind: str  # "negation" | "comparison"
    text: str
    note: str  # "no such tuple", "true", ...


@dataclass(frozen=True)
class AggregateValue:
    """An aggregate with its value; children are the tuples it ran over."""

    text: str
    value: object
    children: tuple["Proof", ...]
    more: int = 0  # tuples left out


@dataclass(frozen=True)
class Elided:
    """A subtree cut by the depth limit; `subproof ID` expands it."""

    id: int
    text: str
    what: str  # "proof" | "why-not"


@dataclass(frozen=True)
class Shown:
    """A derived tuple already proven earlier in the same explanation (not expanded twice)."""

    text: str
    pos: Pos


@dataclass(frozen=True)
class Unproven:
    """A tuple in the model for which no rule instance was found (the model and rules disagree)."""

    text: str
    note: str


Proof = Union[Fact, Computed, Derived, Checked, AggregateValue, Elided, Shown, Unproven]

# ---- why-not ---------------------------------------------------------------------


@dataclass(frozen=True)
class Attempt:
    """One rule that could derive the atom, and where its body fails (evaluated in source order)."""

    pos: Pos
    rule: str
    bindings: tuple[tuple[str, object], ...]  # bound up to the failing literal
    failed: str | None  # the failing literal with the bindings substituted; None if the body holds
    reason: str
    blocking: tuple[Proof, ...] = ()  # tuples that make a negation fail, with their proofs
    blocking_more: int = 0
    nested: "WhyNot | Elided | None" = None  # why the failing positive atom does not hold
    reached: int = 1  # bindings that reach the failing literal (the first is shown)


@dataclass(frozen=True)
class WhyNot:
    text: str
    rel: str
    note: str  # one line: why no rule applies, or how many rules were tried
    attempts: tuple[Attempt, ...] = ()


# ---- a whole answer --------------------------------------------------------------


@dataclass(frozen=True)
class Fusion:
    """Context for a compiler engineer: a candidate fusion named in the atom."""

    fusion: str
    members: tuple[tuple[str, str], ...]  # (statement, place) in program order
    reasons: tuple[str, ...]  # empty when legal
    notes: tuple[str, ...] = ()  # per member: its collective's kind and its module path (verdicts.MemberNotes)


@dataclass(frozen=True)
class Explanation:
    atom: str
    holds: bool
    proofs: tuple[Proof, ...] = ()
    more: int = 0  # matching tuples left out
    why_not: WhyNot | None = None
    fusions: tuple[Fusion, ...] = ()


# ---- JSON ------------------------------------------------------------------------


@overload
def _at(pos: Pos) -> dict: ...
@overload
def _at(pos: Pos | None) -> dict | None: ...
def _at(pos: Pos | None) -> dict | None:
    return None if pos is None else {"file": pos.file, "line": pos.line}


def _bindings(pairs) -> dict:
    return dict(pairs)


def to_json(node) -> dict:
    """The same structure as the text tree, as plain JSON data."""
    match node:
        case Fact(text, rel, values, pos, in_rules):
            return {"kind": "fact", "tuple": text, "relation": rel, "values": list(values), "at": _at(pos),
                    "in_rules": in_rules}
        case Computed(text, rel, values, meaning):
            return {"kind": "computed", "tuple": text, "relation": rel, "values": list(values), "meaning": meaning}
        case Derived(text, rel, values, pos, rule, bindings, children):
            return {"kind": "rule", "tuple": text, "relation": rel, "values": list(values),
                    "rule": {**_at(pos), "text": rule}, "bindings": _bindings(bindings),
                    "children": [to_json(c) for c in children]}
        case Checked(kind, text, note):
            return {"kind": kind, "literal": text, "holds": True, "note": note}
        case AggregateValue(text, value, children, more):
            return {"kind": "aggregate", "literal": text, "value": value,
                    "children": [to_json(c) for c in children], "more": more}
        case Elided(id_, text, what):
            return {"kind": "elided", "id": id_, "tuple": text, "what": what}
        case Shown(text, pos):
            return {"kind": "shown-above", "tuple": text, "rule": _at(pos)}
        case Unproven(text, note):
            return {"kind": "unproven", "tuple": text, "note": note}
        case Attempt():
            return {"rule": {**_at(node.pos), "text": node.rule}, "bindings": _bindings(node.bindings),
                    "failed": node.failed, "reason": node.reason,
                    "blocking": [to_json(b) for b in node.blocking], "blocking_more": node.blocking_more,
                    "why_not": None if node.nested is None else to_json(node.nested), "reached": node.reached}
        case WhyNot(text, rel, note, attempts):
            return {"kind": "why-not", "atom": text, "relation": rel, "note": note,
                    "rules": [to_json(a) for a in attempts]}
        case Fusion(fusion, members, reasons, notes):
            shown = [{"statement": o, "place": p} for o, p in members]
            for m, note in zip(shown, notes):
                if note:
                    m["note"] = note
            return {"fusion": fusion, "members": shown, "legal": not reasons, "reasons": list(reasons)}
        case Explanation():
            return {"atom": node.atom, "holds": node.holds, "fusions": [to_json(f) for f in node.fusions],
                    "proofs": [to_json(p) for p in node.proofs], "more": node.more,
                    "why_not": None if node.why_not is None else to_json(node.why_not)}
    raise TypeError(node)
