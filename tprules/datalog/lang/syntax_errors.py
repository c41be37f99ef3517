"""Lark's parse errors as one line a rule author can act on: what was found, what fits there.

The expected words come from the parser's own state (`accepts()`: exactly the tokens that
could continue), with hints for the usual slips: a missing '.', an unclosed string or
comment, a float, a ';' disjunction.
"""

from __future__ import annotations

import re

from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from ...errors import RuleSyntaxError, Unsupported
from ...pos import Pos

# Soufflé constructs tprules refuses, by the token that starts them.
_REFUSED = {
    ".comp": "components (.comp)", ".init": "components (.init)", ".override": "components (.override)",
    ".functor": "user-defined functors (.functor)", "@": "user-defined functors (@name)",
    ".lattice": "lattices (.lattice)", ".limitsize": ".limitsize", ".include": ".include",
    ".once": ".once", "[": "records ([...])", "]": "records ([...])", "nil": "records (nil)",
    "autoinc": "the counter autoinc()", "recursive_iteration_cnt": "recursive_iteration_cnt()",
    "debug_delta": "debug_delta relations", "stateful": "stateful functors",
}


def _last_keyword(text: str) -> str | None:
    found = re.findall(r"(?<![\w.])\.(?:type|decl|input|output|printsize|pragma|plan|number_type|symbol_type)\b", text)
    return found[-1] if found else None


def refusal(construct: str, pos: Pos) -> Unsupported:
    """The one line that refuses a Soufflé construct tprules does not evaluate."""
    return Unsupported(f"tprules does not support {construct}", pos)


def _refused(err: UnexpectedInput, text: str, pos: Pos) -> Unsupported | None:
    token = getattr(err, "token", None)
    if token is None:
        return None
    value, line = str(token), _line(text, err.line)
    if "choice-domain" in line:
        return refusal("choice-domain", pos)
    if value in _REFUSED:
        return refusal(_REFUSED[value], pos)
    if value == "$":
        rest = line[err.column:].lstrip()
        return refusal("algebraic data types ($Branch(...))" if rest[:1].isalpha() else "the counter $", pos)
    if value.startswith("#"):
        return refusal(f"the C preprocessor ({value.split()[0]})", pos)
    offset = getattr(token, "start_pos", None)
    before = text[:offset] if offset is not None else line[: err.column - 1]
    on_line = line[: err.column - 1].rstrip()
    if on_line.endswith("$") and not value[:1].isalpha():  # `$` alone: Soufflé's old counter
        return refusal("the counter $", Pos(pos.file, pos.line, len(on_line)))
    if value == "{" and _last_keyword(before) == ".type":
        return refusal("algebraic data types (.type T = A {...} | ...)", pos)
    if value == "(" and re.search(r"\bautoinc\s*$", before):
        return refusal("the counter autoinc()", pos)
    return None

_WORDS = {"NAME": "a name", "QNAME": "a name", "NUMBER": "a number", "STRING": "a string", "CMP": "a comparison",
          "FLOAT": "a float", "UNSIGNED": "an unsigned", "$END": "end of file"}
_AGGREGATES = {"COUNT", "SUM", "MIN", "MAX", "MEAN"}
_FUNCTORS = {"CAT", "ORD", "RANGE", "STRLEN", "SUBSTR", "TO_FLOAT", "TO_NUMBER", "TO_STRING", "TO_UNSIGNED", "AS",
             "BNOT", "LNOT", "AUTOINC", "SIN", "COS", "TAN", "ASIN", "ACOS", "ATAN", "SINH", "COSH", "TANH", "ASINH",
             "ACOSH", "ATANH", "LOG", "EXP"}
_NUMBERS = {"FLOAT", "UNSIGNED"}  # said as "a number"
_QUIET = {"TRUE", "FALSE", "CONTAINS", "MATCH", "NIL", "DOLLAR", "LSQB"}  # would only make the list longer
_FIRST = ("DOT", "COMMA", "RPAR", "RBRACE")  # the tokens that close something, shown first


def _word(name: str, patterns: dict[str, str]) -> str:
    if name in _WORDS:
        return _WORDS[name]
    return repr(patterns.get(name, name))


def expected_words(names, patterns: dict[str, str]) -> str:
    """`',' or '.'`, `a name, a number or an aggregate`, ...: what may come here."""
    names = set(names) - _QUIET
    if names & _NUMBERS:
        names = (names - _NUMBERS) | {"NUMBER"}
    order = sorted(names - _AGGREGATES - _FUNCTORS,
                   key=lambda n: (_FIRST.index(n) if n in _FIRST else len(_FIRST), n))
    words = list(dict.fromkeys(_word(n, patterns) for n in order))
    if names & _FUNCTORS:
        words.append("a functor")
    if names & _AGGREGATES:
        words.append("an aggregate")
    if len(words) > 9:
        words = words[:8] + ["..."]
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
    before = line[: err.column - 1]
    if "DOT" in accepts and not before.strip():  # the first token of its line
        previous = next((n for n in range(err.line - 1, 0, -1) if _line(text, n).strip()), None)
        if previous is not None:
            return f" (is a '.' missing at the end of line {previous}?)"
    return ""


def syntax_error(err: UnexpectedInput, text: str, filename: str, patterns: dict[str, str]) -> RuleSyntaxError | Unsupported:
    """One `RuleSyntaxError` at the offending line:column."""
    pos = Pos(filename, getattr(err, "line", 0) or 0, getattr(err, "column", 0) or 0)
    if _line(text, err.line)[err.column - 1:].startswith("/*"):
        return RuleSyntaxError("this '/*' comment is never closed with '*/'", pos)
    refused = _refused(err, text, pos)
    if refused is not None:
        return refused
    if isinstance(err, UnexpectedCharacters):
        char = err.char
        if char == '"':
            return RuleSyntaxError('this string is not closed with \'"\' on its line', pos)
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
