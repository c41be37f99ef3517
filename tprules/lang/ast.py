"""The rule-language IR: immutable, hashable, every node carrying its source position.

Positions never take part in equality, so a printed-and-reparsed program compares
equal to the original (tested as a round trip).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union


@dataclass(frozen=True, order=True)
class Pos:
    file: str
    line: int
    col: int = 0

    def __str__(self) -> str:
        if not self.line:  # a whole file (one that is missing, or unreadable)
            return self.file
        return f"{self.file}:{self.line}:{self.col}" if self.col else f"{self.file}:{self.line}"


NOWHERE = Pos("<generated>", 0, 0)


def _pos() -> Pos:
    return field(default=NOWHERE, compare=False, repr=False)


# ---- terms -------------------------------------------------------------------


@dataclass(frozen=True)
class Var:
    name: str
    pos: Pos = _pos()


@dataclass(frozen=True)
class Wildcard:
    pos: Pos = _pos()


@dataclass(frozen=True)
class Num:
    value: int
    pos: Pos = _pos()


@dataclass(frozen=True)
class Str:
    value: str
    pos: Pos = _pos()


ARITH_OPS = ("+", "-", "*", "/", "%")


@dataclass(frozen=True)
class BinOp:
    op: str  # one of ARITH_OPS
    left: Term
    right: Term
    pos: Pos = _pos()


@dataclass(frozen=True)
class Negative:
    operand: Term
    pos: Pos = _pos()


AGGREGATES = ("count", "sum", "min", "max")


@dataclass(frozen=True)
class Aggregate:
    func: str  # one of AGGREGATES
    target: Term | None  # None for count
    body: tuple[Literal, ...]
    pos: Pos = _pos()


Term = Union[Var, Wildcard, Num, Str, BinOp, Negative, Aggregate]
Constant = Union[Num, Str]

# ---- literals ----------------------------------------------------------------


@dataclass(frozen=True)
class Atom:
    rel: str
    args: tuple[Term, ...]
    pos: Pos = _pos()

    @property
    def arity(self) -> int:
        return len(self.args)


@dataclass(frozen=True)
class Negation:
    atom: Atom
    pos: Pos = _pos()


COMPARISONS = ("=", "!=", "<", "<=", ">", ">=")


@dataclass(frozen=True)
class Comparison:
    op: str  # one of COMPARISONS
    left: Term
    right: Term
    pos: Pos = _pos()


Literal = Union[Atom, Negation, Comparison]

# ---- items -------------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    """A rule `head :- body.`; a fact is a rule with an empty body."""

    head: Atom
    body: tuple[Literal, ...]
    pos: Pos = _pos()

    @property
    def is_fact(self) -> bool:
        return not self.body


@dataclass(frozen=True)
class Attribute:
    name: str
    type: str
    pos: Pos = _pos()


@dataclass(frozen=True)
class Decl:
    name: str
    attrs: tuple[Attribute, ...]
    pos: Pos = _pos()

    @property
    def arity(self) -> int:
        return len(self.attrs)

    @property
    def types(self) -> tuple[str, ...]:
        return tuple(a.type for a in self.attrs)


@dataclass(frozen=True)
class Directive:
    kind: str  # "input" or "output"
    names: tuple[str, ...]
    pos: Pos = _pos()


Item = Union[Decl, Directive, Rule]


@dataclass(frozen=True)
class Program:
    items: tuple[Item, ...]

    @property
    def decls(self) -> tuple[Decl, ...]:
        return tuple(i for i in self.items if isinstance(i, Decl))

    @property
    def rules(self) -> tuple[Rule, ...]:
        return tuple(i for i in self.items if isinstance(i, Rule))

    @property
    def directives(self) -> tuple[Directive, ...]:
        return tuple(i for i in self.items if isinstance(i, Directive))


# ---- traversal helpers ---------------------------------------------------------


def term_vars(term: Term) -> set[str]:
    """Named variables of a term; an aggregate contributes none (its body is its own scope)."""
    match term:
        case Var(name):
            return {name}
        case BinOp(_, left, right):
            return term_vars(left) | term_vars(right)
        case Negative(operand):
            return term_vars(operand)
        case _:
            return set()


def literal_vars(lit: Literal) -> set[str]:
    match lit:
        case Atom(_, args):
            return set().union(*(term_vars(a) for a in args)) if args else set()
        case Negation(atom):
            return literal_vars(atom)
        case Comparison(_, left, right):
            return term_vars(left) | term_vars(right)
    raise TypeError(lit)


def aggregates_in(term: Term) -> list[Aggregate]:
    match term:
        case Aggregate():
            return [term]
        case BinOp(_, left, right):
            return aggregates_in(left) + aggregates_in(right)
        case Negative(operand):
            return aggregates_in(operand)
        case _:
            return []


def literal_aggregates(lit: Literal) -> list[Aggregate]:
    match lit:
        case Comparison(_, left, right):
            return aggregates_in(left) + aggregates_in(right)
        case Atom(_, args):
            return [a for t in args for a in aggregates_in(t)]
        case _:
            return []


def aggregate_vars(agg: Aggregate) -> set[str]:
    """Every named variable mentioned inside an aggregate (body and target)."""
    found = set().union(*(literal_vars(lit) for lit in agg.body)) if agg.body else set()
    if agg.target is not None:
        found |= term_vars(agg.target)
    for lit in agg.body:
        for inner in literal_aggregates(lit):
            found |= aggregate_vars(inner)
    return found


def body_atoms(body: tuple[Literal, ...], inside: bool = False) -> list[tuple[Atom, str]]:
    """Every atom of a body, nested aggregate bodies included, with how it is used:
    "positive", "negative", or "aggregate" (anywhere inside an aggregate's body)."""
    found: list[tuple[Atom, str]] = []
    for lit in body:
        match lit:
            case Atom():
                found.append((lit, "aggregate" if inside else "positive"))
            case Negation(atom):
                found.append((atom, "aggregate" if inside else "negative"))
        for agg in literal_aggregates(lit):
            found.extend(body_atoms(agg.body, inside=True))
    return found


def string_constants(node) -> set[str]:
    """Every string constant anywhere in a rule (head, body, comparisons, aggregates)."""
    match node:
        case Str(value):
            return {value}
        case Rule(head, body):
            return string_constants(head).union(*(string_constants(lit) for lit in body))
        case Atom(_, args):
            return set().union(*(string_constants(t) for t in args))
        case Negation(atom):
            return string_constants(atom)
        case Comparison(_, left, right) | BinOp(_, left, right):
            return string_constants(left) | string_constants(right)
        case Negative(operand):
            return string_constants(operand)
        case Aggregate(_, target, body):
            found = string_constants(target) if target is not None else set()
            return found.union(*(string_constants(lit) for lit in body))
    return set()
