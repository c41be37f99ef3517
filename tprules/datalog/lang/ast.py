"""The rule-language IR: immutable, hashable, every node carrying its source position.

Positions never take part in equality, so a printed-and-reparsed program compares
equal to the original (tested as a round trip).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from ...pos import Pos

NOWHERE = Pos("<generated>", 0, 0)


def _pos() -> Pos:
    return field(default=NOWHERE, compare=False, repr=False)


def _kind() -> str:
    """A term's primitive type (number, unsigned, float, symbol), filled in by the type
    checker; "" before it ran. Not part of equality: it follows from the program."""
    return field(default="", compare=False, repr=False)


PRIMITIVES = ("number", "unsigned", "float", "symbol")
NUMERIC = ("number", "unsigned", "float")


# ---- terms -------------------------------------------------------------------


@dataclass(frozen=True)
class Var:
    name: str
    pos: Pos = _pos()
    type: str = _kind()


@dataclass(frozen=True)
class Wildcard:
    pos: Pos = _pos()
    type: str = _kind()


@dataclass(frozen=True)
class Num:
    """An integer literal: a number, or an unsigned or float where the context wants one."""

    value: int
    pos: Pos = _pos()
    type: str = _kind()


@dataclass(frozen=True)
class Unsigned:
    """An unsigned literal, `7u`."""

    value: int
    pos: Pos = _pos()
    type: str = _kind()


@dataclass(frozen=True)
class Float:
    """A float literal, `1.5`."""

    value: float
    pos: Pos = _pos()
    type: str = _kind()


@dataclass(frozen=True)
class Str:
    value: str
    pos: Pos = _pos()
    type: str = _kind()


# Infix operators, loosest first (Soufflé's precedence); `^` is power, right-associative.
ARITH_OPS = ("+", "-", "*", "/", "%")
BINARY_OPS = ("lor", "lxor", "land", "bor", "bxor", "band", "bshl", "bshr", "bshru") + ARITH_OPS + ("^",)


@dataclass(frozen=True)
class BinOp:
    op: str  # one of BINARY_OPS
    left: Term
    right: Term
    pos: Pos = _pos()
    type: str = _kind()


@dataclass(frozen=True)
class Negative:
    operand: Term
    pos: Pos = _pos()
    type: str = _kind()


# Functors written `name(args)`, and the prefix operators `bnot x`, `lnot x`.
MATH = ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "log", "exp")
FUNCTORS = ("cat", "ord", "strlen", "substr", "to_float", "to_number", "to_string", "to_unsigned", "min", "max",
            "range", "bnot", "lnot", "autoinc") + MATH


@dataclass(frozen=True)
class Functor:
    name: str  # one of FUNCTORS
    args: tuple[Term, ...]
    pos: Pos = _pos()
    type: str = _kind()


@dataclass(frozen=True)
class Cast:
    """`as(term, Type)`: the same value seen as another type of the same primitive."""

    term: Term
    to: str
    pos: Pos = _pos()
    type: str = _kind()


AGGREGATES = ("count", "sum", "min", "max", "mean")


@dataclass(frozen=True)
class Aggregate:
    func: str  # one of AGGREGATES
    target: Term | None  # None for count
    body: tuple[Literal, ...]
    pos: Pos = _pos()
    type: str = _kind()


@dataclass(frozen=True)
class Record:
    """A record `[a, b]` (its type comes from where it is used)."""

    args: tuple[Term, ...]
    pos: Pos = _pos()
    type: str = _kind()


@dataclass(frozen=True)
class Nil:
    """The empty record `nil`."""

    pos: Pos = _pos()
    type: str = _kind()


@dataclass(frozen=True)
class Branch:
    """A value of an algebraic data type: `$Int(1)`, `$Mon`."""

    name: str
    args: tuple[Term, ...]
    pos: Pos = _pos()
    type: str = _kind()


Term = Union[Var, Wildcard, Num, Unsigned, Float, Str, BinOp, Negative, Functor, Cast, Aggregate, Record, Nil, Branch]
Constant = Union[Num, Unsigned, Float, Str]
CONSTANTS = (Num, Unsigned, Float, Str)

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
# The string tests `contains(sub, s)` and `match(pattern, s)`, and their negations.
TESTS = ("contains", "!contains", "match", "!match")


@dataclass(frozen=True)
class Comparison:
    op: str  # one of COMPARISONS or TESTS
    left: Term
    right: Term
    pos: Pos = _pos()
    type: str = _kind()  # the type both sides are compared as


Literal = Union[Atom, Negation, Comparison]

# ---- items -------------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    """A rule `head :- body.`; a fact is a rule with an empty body. A rule of a component
    says which instance it belongs to (`origin`, e.g. `instance shimA of component Shim (.init at r.dl:9:7)`)."""

    head: Atom
    body: tuple[Literal, ...]
    pos: Pos = _pos()
    origin: str = field(default="", compare=False)
    written: str = field(default="", compare=False)  # its text before records were desugared
    # A subsumptive clause `head <= dominating :- body.` deletes the tuple `head` wherever
    # `dominating` (another tuple of the same relation) exists and the body holds; it derives nothing.
    dominating: Atom | None = None

    @property
    def is_fact(self) -> bool:
        return not self.body and self.dominating is None


@dataclass(frozen=True)
class Attribute:
    name: str
    type: str  # as declared: a primitive or a `.type` name
    pos: Pos = _pos()
    kind: str = _kind()  # the primitive it resolves to (the checker fills it in)


# Relation qualifiers tprules accepts: `eqrel` is honoured; the others only steer how
# Soufflé stores or inlines a relation, not what it holds, so they are ignored.
QUALIFIERS = ("eqrel", "inline", "no_inline", "magic", "no_magic", "brie", "btree", "btree_delete", "overridable")


@dataclass(frozen=True)
class Decl:
    name: str
    attrs: tuple[Attribute, ...]
    pos: Pos = _pos()
    qualifiers: tuple[str, ...] = ()
    choice: tuple[tuple[str, ...], ...] = ()  # choice-domain keys: at most one tuple for each

    @property
    def arity(self) -> int:
        return len(self.attrs)

    @property
    def types(self) -> tuple[str, ...]:
        """The primitive type of each column (the declared name before the checker ran)."""
        return tuple(a.kind or a.type for a in self.attrs)


@dataclass(frozen=True)
class Choice:
    """A declaration's `choice-domain` keys (the parser's; kept on the Decl)."""

    keys: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Directive:
    kind: str  # "input", "output" or "printsize"
    names: tuple[str, ...]
    pos: Pos = _pos()
    params: tuple[tuple[str, str], ...] = ()  # `(IO=file, filename="x.csv", delimiter=",")`


@dataclass(frozen=True)
class TypeDecl:
    """`.type T <: number` (a subtype), `.type T = A` (an alias) or `.type T = A | B` (a union)."""

    name: str
    kind: str  # "subtype", "union", "record" or "adt"
    bases: tuple[str, ...]
    pos: Pos = _pos()
    fields: tuple[Attribute, ...] = ()  # a record's: `.type R = [x: number, next: R]`
    branches: tuple[tuple[str, tuple[Attribute, ...]], ...] = ()  # an ADT's: `A {x: number} | B {}`


@dataclass(frozen=True)
class Pragma:
    """`.pragma "key" "value"`: accepted and ignored (Soufflé's command-line options)."""

    key: str
    value: str
    pos: Pos = _pos()


@dataclass(frozen=True)
class CompType:
    """A component's name with its type parameters: `Graph<N>`."""

    name: str
    params: tuple[str, ...] = ()
    pos: Pos = _pos()

    def __str__(self) -> str:
        return self.name + (f"<{', '.join(self.params)}>" if self.params else "")


@dataclass(frozen=True)
class Component:
    """`.comp Name<T> : Base<T> { items }`."""

    type: CompType
    bases: tuple[CompType, ...]
    items: tuple["Item", ...]
    pos: Pos = _pos()


@dataclass(frozen=True)
class Init:
    """`.init instance = Component<args>`."""

    instance: str
    comp: CompType
    pos: Pos = _pos()


@dataclass(frozen=True)
class Override:
    """`.override rel` inside a component: the base's own rules for rel are dropped."""

    rel: str
    pos: Pos = _pos()


Item = Union[Decl, Directive, TypeDecl, Pragma, Rule, Component, Init, Override]


@dataclass(frozen=True)
class RuleSource:
    """The parsed rule text (one file, or a folder's files in name order): its items in order."""

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

    @property
    def types(self) -> tuple[TypeDecl, ...]:
        return tuple(i for i in self.items if isinstance(i, TypeDecl))


# ---- traversal helpers ---------------------------------------------------------


def subterms(term: Term) -> tuple[Term, ...]:
    """The terms a term is made of (an aggregate's target and body are its own scope)."""
    match term:
        case BinOp(_, left, right):
            return (left, right)
        case Negative(operand) | Cast(operand):
            return (operand,)
        case Functor(_, args) | Record(args) | Branch(_, args):
            return args
    return ()


def term_vars(term: Term) -> set[str]:
    """Named variables of a term; an aggregate contributes none (its body is its own scope)."""
    if isinstance(term, Var):
        return {term.name}
    found: set[str] = set()
    stack = list(subterms(term))
    while stack:  # iterative: a 5,000-term sum must not exhaust Python's stack
        t = stack.pop()
        if isinstance(t, Var):
            found.add(t.name)
        else:
            stack.extend(subterms(t))
    return found


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
    found: list[Aggregate] = []
    stack = [term]
    while stack:
        t = stack.pop()
        if isinstance(t, Aggregate):
            found.append(t)
        else:
            stack.extend(reversed(subterms(t)))
    return found


def functors_in(term: Term, name: str) -> list[Functor]:
    """Every functor of that name inside a term (not inside aggregates)."""
    found: list[Functor] = []
    stack = [term]
    while stack:
        t = stack.pop()
        if isinstance(t, Functor) and t.name == name:
            found.append(t)
        stack.extend(reversed(subterms(t)))
    return found


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
        case Comparison(_, left, right):
            return string_constants(left) | string_constants(right)
        case Aggregate(_, target, body):
            found = string_constants(target) if target is not None else set()
            return found.union(*(string_constants(lit) for lit in body))
    found = set()
    for part in subterms(node):
        found |= string_constants(part)
    return found


def replace_term(term: Term, old: Term, new: Term) -> Term:
    """The term with one sub-term (found by identity: an aggregate, say) replaced."""
    import dataclasses

    if term is old:
        return new
    match term:
        case BinOp(_, left, right):
            return dataclasses.replace(term, left=replace_term(left, old, new), right=replace_term(right, old, new))
        case Negative(operand):
            return dataclasses.replace(term, operand=replace_term(operand, old, new))
        case Cast(operand):
            return dataclasses.replace(term, term=replace_term(operand, old, new))
        case Functor(_, args):
            return dataclasses.replace(term, args=tuple(replace_term(a, old, new) for a in args))
    return term
