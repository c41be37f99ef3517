"""Source text as the editor sees it: LSP positions (0-based) from the IR's (1-based), the
extent of the token at a position, and the comment written above a line."""

from __future__ import annotations

import re

from lsprotocol import types

from ..pos import Pos

NAME = re.compile(r"[A-Za-z_?][A-Za-z0-9_?]*")
QNAME = re.compile(r"[A-Za-z_?][A-Za-z0-9_?]*(?:\.[A-Za-z_?][A-Za-z0-9_?]*)*")  # `cuda.refused`: an instance's
_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"?')


def lines_of(text: str) -> list[str]:
    return text.split("\n")


def token_range(text: str, pos: Pos) -> types.Range:
    """The range of the token that starts at `pos` (a name, a string, or one character);
    the whole line when `pos` has no column, the file's first line when it has no line."""
    lines = lines_of(text)
    line = max(pos.line - 1, 0)
    row = lines[line] if line < len(lines) else ""
    if not pos.line or not pos.col:
        start = len(row) - len(row.lstrip())
        return _range(line, start, line, max(len(row.rstrip()), start + 1))
    col = min(pos.col - 1, len(row))
    found = NAME.match(row, col) or _STRING.match(row, col)
    end = found.end() if found else min(col + 1, max(len(row), col + 1))
    return _range(line, col, line, end)


def name_range(pos: Pos, name: str | int) -> types.Range:
    """The range of a relation's name (or of that many characters) written at `pos`."""
    line, col = max(pos.line - 1, 0), max(pos.col - 1, 0)
    return _range(line, col, line, col + (name if isinstance(name, int) else len(name)))


def _range(l1: int, c1: int, l2: int, c2: int) -> types.Range:
    return types.Range(types.Position(l1, c1), types.Position(l2, c2))


def word_at(text: str, line: int, character: int) -> tuple[str, str, types.Range] | None:
    """("name" | "string", the word, its range) under an LSP position, or None."""
    lines = lines_of(text)
    if line >= len(lines):
        return None
    row = lines[line]
    for m in _STRING.finditer(row):  # strings first: a reason code is a word inside quotes
        if m.start() <= character < m.end() or (m.end() == character and not m.group(0).endswith('"')):
            value = m.group(0)[1:-1] if m.group(0).endswith('"') and len(m.group(0)) > 1 else m.group(0)[1:]
            return "string", value, _range(line, m.start(), line, m.end())
        if m.start() > character:
            break
    for m in NAME.finditer(row):
        if m.start() <= character <= m.end():
            return "name", m.group(0), _range(line, m.start(), line, m.end())
    return None


def qualified_at(text: str, line: int, character: int) -> tuple[str, types.Range] | None:
    """The name under an LSP position with its instance prefix (`cuda.refused`), or None."""
    lines = lines_of(text)
    if line >= len(lines):
        return None
    for m in QNAME.finditer(lines[line]):
        if m.start() <= character <= m.end():
            return m.group(0), _range(line, m.start(), line, m.end())
    return None


def comment_above(text: str, line: int) -> str:
    """The `//` comment lines right above 1-based `line`, and one trailing on it, as text."""
    lines = lines_of(text)
    found: list[str] = []
    i = line - 2
    while 0 <= i < len(lines) and lines[i].strip().startswith("//"):
        found.append(lines[i].strip()[2:].strip())
        i -= 1
    found.reverse()
    if 0 < line <= len(lines):
        row = lines[line - 1]
        code = _STRING.sub(lambda m: " " * len(m.group(0)), row)  # a '//' inside a string is no comment
        if "//" in code:
            found.append(row[code.index("//") + 2:].strip())
    return "\n".join(found)


def statement_before(text: str, line: int, character: int) -> str:
    """The text of the statement the cursor is in, up to the cursor (from the line after the
    last one that ends a statement with '.')."""
    lines = lines_of(text)
    line = min(line, len(lines) - 1)
    start = line
    while start > 0 and not lines[start - 1].rstrip().endswith(".") and lines[start - 1].strip():
        start -= 1
    return "\n".join(lines[start:line] + [lines[line][:character]])
