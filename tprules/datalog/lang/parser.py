"""Parse rule files into the IR with lark (LALR), keeping file:line:col on every node."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedInput, VisitError

from ...deep import deep
from ...errors import BadInput, RuleSyntaxError
from ...pos import Pos
from . import ast
from .preprocess import SourceMap, needs_preprocessor, preprocess
from .syntax_errors import refusal, syntax_error

_GRAMMAR = Path(__file__).with_name("souffle.lark")

@lru_cache(maxsize=1)
def _patterns() -> dict[str, str]:
    """Terminal name → its literal text, for error messages ('.decl' rather than __ANON_0)."""
    return {t.name: t.pattern.value for t in _lark().terminals if t.pattern.type == "str"}


@lru_cache(maxsize=1)
def _lark() -> Lark:
    # Extra start symbols let a query (`body`) or one atom (`atom`) be parsed on its own.
    return Lark(_GRAMMAR.read_text(), parser="lalr", propagate_positions=True, maybe_placeholders=True, cache=True,
                start=["start", "body", "atom", "unsupported"])


def _unescape(text: str) -> str:
    body = text[1:-1]
    if "\\" not in body:
        return body
    out, i = [], 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            out.append({"n": "\n", "t": "\t", '"': '"', "\\": "\\"}.get(nxt, "\\" + nxt))
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


_FLIP = {"=": "!=", "!=": "=", "<": ">=", ">=": "<", ">": "<=", "<=": ">", "contains": "!contains",
         "!contains": "contains", "match": "!match", "!match": "match"}


def _negate_literal(lit: ast.Literal) -> ast.Literal:
    match lit:
        case ast.Atom():
            return ast.Negation(lit, lit.pos)
        case ast.Negation(atom):
            return atom
        case ast.Comparison(op, left, right):
            return ast.Comparison(_FLIP[op], left, right, lit.pos)
    raise TypeError(lit)


class _Alternatives(tuple):
    """A body in disjunctive normal form: alternatives, each a tuple of literals. `true` is
    one empty alternative, `false` none; a rule becomes one rule per alternative."""

    @staticmethod
    def of(lit) -> "_Alternatives":
        return lit if isinstance(lit, _Alternatives) else _Alternatives(((lit,),))

    def both(self, other: "_Alternatives") -> "_Alternatives":
        return _Alternatives(a + b for a in self for b in other)

    def negated(self) -> "_Alternatives":
        result = _Alternatives(((),))  # not (A1 or A2) = not A1 and not A2; not (l1 and l2) = not l1 or not l2
        for conjunction in self:
            result = result.both(_Alternatives((_negate_literal(lit),) for lit in conjunction))
        return result


def _number(text: str) -> int:
    if text.startswith("0x"):
        return int(text, 16)
    if text.startswith("0b"):
        return int(text[2:], 2)
    return int(text)


# Factories of _ToAst's methods, one per operator and aggregate (used in its class body).
def _binop(op: str):
    @v_args(meta=True)
    def make(self, meta, children):
        left, right = children
        return ast.BinOp(op, left, right, self._pos(meta))

    return make


def _aggregate(func: str):
    @v_args(meta=True)
    def make(self, meta, children):
        target, body = children
        return ast.Aggregate(func, target, self._agg_body(body, meta), self._pos(meta))

    return make


class _ToAst(Transformer):
    def __init__(self, filename: str, where: SourceMap | None = None):
        super().__init__()
        self.filename, self.where = filename, where

    def _pos(self, meta_or_token) -> Pos:
        line = getattr(meta_or_token, "line", 0) or 0
        col = getattr(meta_or_token, "column", 0) or 0
        if self.where is not None:  # preprocessed text: the original file, line and column
            return self.where.pos(line, col)
        return Pos(self.filename, line, col)

    @v_args(meta=True)
    def start(self, meta, items):
        flat: list[ast.Item] = []
        for item in items:
            flat.extend(item if isinstance(item, list) else [item])
        return ast.RuleSource(tuple(flat))

    # -- declarations ---------------------------------------------------------------

    @v_args(meta=True)
    def decl(self, meta, children):
        names = [c for c in children if isinstance(c, Token) and c.type in ("NAME", "QNAME")]
        attrs = tuple(c for c in children if isinstance(c, ast.Attribute))
        quals = [c for c in children if isinstance(c, tuple)]
        qualifiers = tuple(dict.fromkeys(q for q, _ in quals if q in ast.QUALIFIERS))
        choice = next((c for c in children if isinstance(c, ast.Choice)), None)
        keys = choice.keys if choice is not None else ()
        items: list[ast.Item] = [ast.Decl(str(n), attrs, self._pos(n), qualifiers, keys) for n in names]
        for kind, token in quals:  # the deprecated `.decl r(...) output` means `.output r`
            if kind in ("input", "output", "printsize"):
                items.append(ast.Directive(kind, tuple(str(n) for n in names), self._pos(token)))
        return items

    def choice(self, children):
        return ast.Choice(tuple(children[1:]))

    def choice_key(self, children):
        return tuple(str(c) for c in children)

    def attr(self, children):
        name, type_ = children
        return ast.Attribute(str(name), str(type_), self._pos(name))

    def qualifier(self, children):
        (token,) = children
        return (str(token), token)

    def subtype(self, children):
        name, base = children
        return ast.TypeDecl(str(name), "subtype", (str(base),), self._pos(name))

    def union(self, children):
        name, *bases = children
        return ast.TypeDecl(str(name), "union", tuple(str(b) for b in bases), self._pos(name))

    def record_type(self, children):
        name, *fields = children
        return ast.TypeDecl(str(name), "record", (), self._pos(name), fields=tuple(f for f in fields if f is not None))

    def adt_type(self, children):
        name, *branches = children
        return ast.TypeDecl(str(name), "adt", (), self._pos(name), branches=tuple(branches))

    def branch(self, children):
        name, *fields = children
        return (str(name), tuple(f for f in fields if f is not None))

    def number_type(self, children):
        return ast.TypeDecl(str(children[0]), "subtype", ("number",), self._pos(children[0]))

    def symbol_type(self, children):
        return ast.TypeDecl(str(children[0]), "subtype", ("symbol",), self._pos(children[0]))

    @v_args(meta=True)
    def directive(self, meta, children):
        kind, *rest = children
        params = next((c for c in rest if isinstance(c, tuple)), ())
        names = tuple(str(n) for n in rest if isinstance(n, Token))
        return ast.Directive(kind, names, self._pos(meta), params)

    def directive_kind(self, children):
        return str(children[0])[1:]

    def params(self, children):
        return tuple(c for c in children if c is not None)

    def param(self, children):
        key, _, value = children
        text = _unescape(str(value)) if value.type == "STRING" else str(value)
        return (str(key), text)

    @v_args(meta=True)
    def pragma(self, meta, children):
        key, value = children
        return ast.Pragma(_unescape(str(key)), _unescape(str(value)) if value is not None else "", self._pos(meta))

    # -- components -----------------------------------------------------------------

    @v_args(meta=True)
    def component(self, meta, children):
        own, *rest = children
        bases = tuple(c for c in rest if isinstance(c, ast.CompType))
        items: list[ast.Item] = []
        for c in rest:
            if c is None or isinstance(c, ast.CompType):
                continue
            items.extend(c if isinstance(c, list) else [c])
        return ast.Component(own, bases, tuple(items), self._pos(meta))

    def comp_type(self, children):
        name, params = children
        return ast.CompType(str(name), tuple(params or ()), self._pos(name))

    def type_params(self, children):
        return [str(c) for c in children]

    @v_args(meta=True)
    def init(self, meta, children):
        name, comp = children
        return ast.Init(str(name), comp, self._pos(name))

    def override(self, children):
        (name,) = children
        return ast.Override(str(name), self._pos(name))

    # -- clauses --------------------------------------------------------------------

    @v_args(meta=True)
    def fact(self, meta, children):
        (head,) = children
        return ast.Rule(head, (), head.pos)

    @v_args(meta=True)
    def rule(self, meta, children):
        heads, body = children[0], children[1]  # a `.plan` (children[2]) is ignored
        return [ast.Rule(head, alternative, head.pos) for head in heads for alternative in body]

    @v_args(meta=True)
    def subsumption(self, meta, children):
        dominated, op, dominating, body = children[:4]
        if str(op) != "<=":
            raise RuleSyntaxError(f"unexpected {str(op)!r}, expected '<=' between the two heads of a subsumptive "
                                  "clause", self._pos(op))
        return [ast.Rule(dominated, alternative, dominated.pos, dominating=dominating) for alternative in body]

    def heads(self, atoms):
        return list(atoms)

    def plan(self, children):
        return None

    def plan_step(self, children):
        return None

    def body(self, conjunctions):
        return _Alternatives(alt for conjunction in conjunctions for alt in conjunction)

    def conjunction(self, literals):
        result = _Alternatives(((),))
        for lit in literals:
            result = result.both(_Alternatives.of(lit))
        return result

    def group(self, children):
        return children[0]

    def true(self, children):
        return _Alternatives(((),))

    def false(self, children):
        return _Alternatives()

    def _agg_body(self, body, meta) -> tuple:
        if isinstance(body, tuple) and not isinstance(body, _Alternatives):
            return body
        if len(body) != 1:
            raise RuleSyntaxError("a disjunction ';' (or 'false') inside an aggregate's body is not supported "
                                  "(nor in Soufflé): write the aggregate over a relation that holds both",
                                  self._pos(meta))
        return body[0]

    def single_atom_body(self, children):
        return (children[0],)

    def atom(self, children):
        name, *args = children
        args = tuple(a for a in args if a is not None)
        return ast.Atom(str(name), args, self._pos(name))

    @v_args(meta=True)
    def negation(self, meta, children):
        (lit,) = children
        if isinstance(lit, ast.Atom):
            return ast.Negation(lit, self._pos(meta))
        return _Alternatives.of(lit).negated()

    @v_args(meta=True)
    def comparison(self, meta, children):
        left, op, right = children
        return ast.Comparison(str(op), left, right, self._pos(meta))

    @v_args(meta=True)
    def contains(self, meta, children):
        return ast.Comparison("contains", children[0], children[1], self._pos(meta))

    @v_args(meta=True)
    def match(self, meta, children):
        return ast.Comparison("match", children[0], children[1], self._pos(meta))

    # -- terms ----------------------------------------------------------------------

    def var(self, children):
        (tok,) = children
        if str(tok) == "autoinc":  # Soufflé's keyword for counters
            raise refusal("the counter autoinc()", self._pos(tok))
        return ast.Var(str(tok), self._pos(tok))

    @v_args(meta=True)
    def wildcard(self, meta, children):
        return ast.Wildcard(self._pos(meta))

    def number(self, children):
        (tok,) = children
        return ast.Num(_number(str(tok)), self._pos(tok))

    def unsigned(self, children):
        (tok,) = children
        return ast.Unsigned(_number(str(tok)[:-1]), self._pos(tok))

    def float(self, children):
        (tok,) = children
        return ast.Float(float(str(tok)), self._pos(tok))

    def string(self, children):
        (tok,) = children
        return ast.Str(_unescape(str(tok)), self._pos(tok))

    add, sub, mul, div, mod = _binop("+"), _binop("-"), _binop("*"), _binop("/"), _binop("%")
    power = _binop("^")
    lor, lxor, land = _binop("lor"), _binop("lxor"), _binop("land")
    bor, bxor, band = _binop("bor"), _binop("bxor"), _binop("band")
    bshl, bshr, bshru = _binop("bshl"), _binop("bshr"), _binop("bshru")

    @v_args(meta=True)
    def negative(self, meta, children):
        (operand,) = children
        if isinstance(operand, ast.Num):  # a negative literal stays a literal
            return ast.Num(-operand.value, self._pos(meta))
        if isinstance(operand, ast.Float):
            return ast.Float(-operand.value, self._pos(meta))
        return ast.Negative(operand, self._pos(meta))

    @v_args(meta=True)
    def bnot(self, meta, children):
        return ast.Functor("bnot", (children[0],), self._pos(meta))

    @v_args(meta=True)
    def lnot(self, meta, children):
        return ast.Functor("lnot", (children[0],), self._pos(meta))

    def functor_name(self, children):
        return children[0]

    @v_args(meta=True)
    def functor(self, meta, children):
        name, *args = children
        return ast.Functor(str(name), tuple(a for a in args if a is not None), self._pos(name))

    @v_args(meta=True)
    def min_functor(self, meta, children):
        return ast.Functor("min", tuple(children), self._pos(meta))

    @v_args(meta=True)
    def max_functor(self, meta, children):
        return ast.Functor("max", tuple(children), self._pos(meta))

    @v_args(meta=True)
    def cast(self, meta, children):
        term, to = children
        return ast.Cast(term, str(to), self._pos(meta))

    @v_args(meta=True)
    def record(self, meta, children):
        return ast.Record(tuple(c for c in children if c is not None), self._pos(meta))

    @v_args(meta=True)
    def nil(self, meta, children):
        return ast.Nil(self._pos(meta))

    @v_args(meta=True)
    def branch_init(self, meta, children):
        name, *args = children
        if (meta.end_line, meta.end_column) == (name.end_line, name.end_column):  # `$Mon`, no parentheses
            raise RuleSyntaxError(f"write ${name}() for a branch without fields, as Soufflé 2.5 reads it "
                                  f"(${name} is how it prints one)", self._pos(meta))
        return ast.Branch(str(name), tuple(a for a in args if a is not None), self._pos(meta))

    @v_args(meta=True)
    def count(self, meta, children):
        (body,) = children
        return ast.Aggregate("count", None, self._agg_body(body, meta), self._pos(meta))

    sum, min, max, mean = _aggregate("sum"), _aggregate("min"), _aggregate("max"), _aggregate("mean")


def parse_text(text: str, filename: str = "<text>", include_dirs=()) -> ast.RuleSource:
    """Parse one rule file's text (through the C preprocessor when it holds a directive;
    `#include` looks in the file's folder, then in `include_dirs`).

    >>> parse_text('.decl e(a: number)\\ne(1).').rules[0].head.args
    (Num(value=1),)
    """
    return parse_with_includes(text, filename, include_dirs)[0]


def parse_with_includes(text: str, filename: str = "<text>", include_dirs=()) -> tuple[ast.RuleSource, dict[str, Path]]:
    """`parse_text`, and each file an `#include` read for it: the name its positions give
    (as `Pos.file`) → its path (the language server opens them from there).

    >>> parse_with_includes('.decl e(a: number)')[1]
    {}
    """
    if needs_preprocessor(text):
        expanded, where = preprocess(text, filename, include_dirs)
        return _parse(expanded, filename, "start", where), {name: Path(path) for name, path in where.included}
    return _parse(text, filename, "start"), {}


def parse_atom(text: str, filename: str = "<atom>") -> ast.Atom:
    """Parse one atom written in rule syntax, e.g. a tuple to explain.

    >>> parse_atom('refused("f1", R)').args
    (Str(value='f1'), Var(name='R'))
    """
    return _parse(text, filename, "atom")


def parse_body(text: str, filename: str = "<query>") -> tuple[ast.Literal, ...]:
    """Parse a rule body (literals separated by commas, no final '.'), e.g. a query.

    >>> [type(lit).__name__ for lit in parse_body('member(F, O), !is_fold(O)')]
    ['Atom', 'Negation']
    """
    alternatives = _parse(text, filename, "body")
    if len(alternatives) != 1:
        raise RuleSyntaxError("a query is one conjunction: ask one alternative of the ';' at a time",
                              Pos(filename, 1, 1))
    return alternatives[0]


def _parse(text: str, filename: str, start: str, where: SourceMap | None = None):
    try:
        tree = _lark().parse(text, start=start)
    except UnexpectedInput as err:
        problem = syntax_error(err, text, filename, _patterns())
        if where is not None and problem.pos is not None:
            problem.pos = where.pos(problem.pos.line, problem.pos.col)
            problem.message = re.sub(r"end of line (\d+)", lambda m: f"end of line {where.pos(int(m[1]), 0).line}",
                                     problem.message)
        raise problem from None
    try:
        return deep(_ToAst(filename, where).transform, tree)
    except VisitError as err:
        if isinstance(err.orig_exc, BadInput):
            raise err.orig_exc from None
        raise RuleSyntaxError(str(err.orig_exc), Pos(filename, 0, 0)) from None


def parse_file(path: Path, display: str | None = None, include_dirs=()) -> ast.RuleSource:
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise RuleSyntaxError(f"cannot read rule file: {err}", Pos(str(display or path), 0, 0)) from None
    return parse_text(text, display or str(path), include_dirs)
