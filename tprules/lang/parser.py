"""Parse rule files into the IR with lark (LALR), keeping file:line:col on every node."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from lark import Lark, Transformer, v_args
from lark.exceptions import UnexpectedInput, VisitError

from ..errors import RuleSyntaxError
from . import ast
from .syntax_errors import syntax_error

_GRAMMAR = Path(__file__).with_name("souffle.lark")

@lru_cache(maxsize=1)
def _patterns() -> dict[str, str]:
    """Terminal name → its literal text, for error messages ('.decl' rather than __ANON_0)."""
    return {t.name: t.pattern.value for t in _lark().terminals if t.pattern.type == "str"}


@lru_cache(maxsize=1)
def _lark() -> Lark:
    # Extra start symbols let a query (`body`) or one atom (`atom`) be parsed on its own.
    return Lark(_GRAMMAR.read_text(), parser="lalr", propagate_positions=True, maybe_placeholders=True, cache=True,
                start=["start", "body", "atom"])


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


class _ToAst(Transformer):
    def __init__(self, filename: str):
        super().__init__()
        self.filename = filename

    def _pos(self, meta_or_token) -> ast.Pos:
        line = getattr(meta_or_token, "line", 0) or 0
        col = getattr(meta_or_token, "column", 0) or 0
        return ast.Pos(self.filename, line, col)

    @v_args(meta=True)
    def start(self, meta, items):
        return ast.Program(tuple(items))

    @v_args(meta=True)
    def decl(self, meta, children):
        name, *attrs = children
        attrs = tuple(a for a in attrs if a is not None)
        return ast.Decl(str(name), attrs, self._pos(name))

    def attr(self, children):
        name, type_ = children
        return ast.Attribute(str(name), str(type_), self._pos(name))

    @v_args(meta=True)
    def input(self, meta, names):
        return ast.Directive("input", tuple(str(n) for n in names), self._pos(meta))

    @v_args(meta=True)
    def output(self, meta, names):
        return ast.Directive("output", tuple(str(n) for n in names), self._pos(meta))

    @v_args(meta=True)
    def fact(self, meta, children):
        (head,) = children
        return ast.Rule(head, (), head.pos)

    @v_args(meta=True)
    def rule(self, meta, children):
        head, body = children
        return ast.Rule(head, body, head.pos)

    def body(self, literals):
        return tuple(literals)

    def single_atom_body(self, children):
        return (children[0],)

    def atom(self, children):
        name, *args = children
        args = tuple(a for a in args if a is not None)
        return ast.Atom(str(name), args, self._pos(name))

    @v_args(meta=True)
    def negation(self, meta, children):
        return ast.Negation(children[0], self._pos(meta))

    @v_args(meta=True)
    def comparison(self, meta, children):
        left, op, right = children
        return ast.Comparison(str(op), left, right, self._pos(meta))

    def var(self, children):
        (tok,) = children
        return ast.Var(str(tok), self._pos(tok))

    @v_args(meta=True)
    def wildcard(self, meta, children):
        return ast.Wildcard(self._pos(meta))

    def number(self, children):
        (tok,) = children
        return ast.Num(int(tok), self._pos(tok))

    def string(self, children):
        (tok,) = children
        return ast.Str(_unescape(str(tok)), self._pos(tok))

    def _binop(op):  # noqa: N805 - a factory used in the class body
        @v_args(meta=True)
        def make(self, meta, children):
            left, right = children
            return ast.BinOp(op, left, right, self._pos(meta))

        return make

    add, sub, mul, div, mod = _binop("+"), _binop("-"), _binop("*"), _binop("/"), _binop("%")

    @v_args(meta=True)
    def negative(self, meta, children):
        (operand,) = children
        if isinstance(operand, ast.Num):  # a negative literal stays a literal
            return ast.Num(-operand.value, self._pos(meta))
        return ast.Negative(operand, self._pos(meta))

    @v_args(meta=True)
    def count(self, meta, children):
        (body,) = children
        return ast.Aggregate("count", None, body, self._pos(meta))

    def _aggregate(func):  # noqa: N805
        @v_args(meta=True)
        def make(self, meta, children):
            target, body = children
            return ast.Aggregate(func, target, body, self._pos(meta))

        return make

    sum, min, max = _aggregate("sum"), _aggregate("min"), _aggregate("max")


def parse_text(text: str, filename: str = "<text>") -> ast.Program:
    """Parse one rule file's text.

    >>> parse_text('.decl e(a: number)\\ne(1).').rules[0].head.args
    (Num(value=1),)
    """
    return _parse(text, filename, "start")


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
    return _parse(text, filename, "body")


def _parse(text: str, filename: str, start: str):
    try:
        tree = _lark().parse(text, start=start)
    except UnexpectedInput as err:
        raise syntax_error(err, text, filename, _patterns()) from None
    try:
        return _ToAst(filename).transform(tree)
    except VisitError as err:  # e.g. a number too large to be one
        raise RuleSyntaxError(str(err.orig_exc), ast.Pos(filename, 0, 0)) from None


def parse_file(path: Path, display: str | None = None) -> ast.Program:
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise RuleSyntaxError(f"cannot read rule file: {err}", ast.Pos(str(display or path), 0, 0)) from None
    return parse_text(text, display or str(path))
