"""Lark's parse errors as one line a rule author can act on: what was found, what fits there.

The expected words come from the parser's own state (`accepts()`: exactly the tokens that
could continue), with hints for the usual slips: a missing '.', an unclosed string or
comment, a float, a ';' disjunction.
"""

from __future__ import annotations

from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from ..errors import RuleSyntaxError
from .ast import Pos

_WORDS = {"NAME": "a name", "NUMBER": "a number", "STRING": "a string", "CMP": "a comparison",
          "$END": "end of file"}
_AGGREGATES = {"COUNT", "SUM", "MIN", "MAX"}
_FIRST = ("DOT", "COMMA", "RPAR", "RBRACE")  # the tokens that close something, shown first


def _word(name: str, patterns: dict[str, str]) -> str:
    if name in _WORDS:
        return _WORDS[name]
    return repr(patterns.get(name, name))


def expected_words(names, patterns: dict[str, str]) -> str:
    """`',' or '.'`, `a name, a number or an aggregate`, ...: what may come here."""
    names = set(names)
    order = sorted(names - _AGGREGATES, key=lambda n: (_FIRST.index(n) if n in _FIRST else len(_FIRST), n))
    words = list(dict.fromkeys(_word(n, patterns) for n in order))
    if names & _AGGREGATES:
        words.append("an aggregate")
    if len(words) > 8:
        words = words[:7] + ["..."]
    if not words:  # a complete atom or query (parse_atom, parse_body): only the end may follow
        return "end of file"
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def _found(token) -> str:
    if token.type == "$END":
        return "end of file"
    return repr(str(token))


def _line(text: str, line: int) -> str:
    lines = text.split("\n")
    return lines[line - 1] if 0 < line <= len(lines) else ""


def _hint(err: UnexpectedInput, text: str, accepts: set[str]) -> str:
    line = _line(text, err.line)
    before, here = line[: err.column - 1], line[err.column - 1:]
    if "DOT" in accepts and not before.strip():  # the first token of its line
        previous = next((n for n in range(err.line - 1, 0, -1) if _line(text, n).strip()), None)
        if previous is not None:
            return f" (is a '.' missing at the end of line {previous}?)"
    if here.startswith(".") and here[1:2].isdigit() and before[-1:].isdigit():
        return "; numbers are integers (floats are not supported)"
    return ""


def syntax_error(err: UnexpectedInput, text: str, filename: str, patterns: dict[str, str]) -> RuleSyntaxError:
    """One `RuleSyntaxError` at the offending line:column."""
    pos = Pos(filename, getattr(err, "line", 0) or 0, getattr(err, "column", 0) or 0)
    if _line(text, err.line)[err.column - 1:].startswith("/*"):
        return RuleSyntaxError("this '/*' comment is never closed with '*/'", pos)
    if isinstance(err, UnexpectedCharacters):
        char = err.char
        if char == '"':
            return RuleSyntaxError('this string is not closed with \'"\' on its line', pos)
        if char == ";":
            return RuleSyntaxError("';' (disjunction) is not supported: write one rule per alternative", pos)
        return RuleSyntaxError(f"unexpected character {char!r}", pos)
    parser = getattr(err, "interactive_parser", None)
    accepts = set(parser.accepts()) if parser is not None else set(getattr(err, "expected", ()))
    if isinstance(err, UnexpectedToken):
        found = _found(err.token)
        return RuleSyntaxError(f"unexpected {found}, expected {expected_words(accepts, patterns)}"
                               + _hint(err, text, accepts), pos)
    if isinstance(err, UnexpectedEOF):
        return RuleSyntaxError(f"unexpected end of file, expected {expected_words(accepts, patterns)}", pos)
    return RuleSyntaxError(str(err).splitlines()[0], pos)
