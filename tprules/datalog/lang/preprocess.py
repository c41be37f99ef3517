"""The C preprocessor Soufflé runs before parsing (`#include`, `#define`, `#if`, `#line`), by pcpp.

Soufflé hands every program to a C preprocessor; tprules does the same with pcpp (a C99
preprocessor in Python), only for text that holds a directive, so every other file is
parsed exactly as written. The expanded text comes with a `SourceMap` from each of its
lines and columns back to the file, line and column it came from (`#line` included), so
every diagnostic and proof names the original place, never the expanded text.

`#include "f"` looks in the including file's folder, then in the `-I` folders, in order;
`#include <f>` in the `-I` folders only (as cpp does). No system folder is ever searched.

>>> text, where = preprocess('#define N 3\\n\\np(N).', 'a.dl')
>>> text, str(where.pos(1, 3))
('p(3).\\n', 'a.dl:3:3')
"""

from __future__ import annotations

import bisect
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ...errors import RuleSyntaxError
from ...pos import Pos

_DIRECTIVE = re.compile(r"^[ \t]*#", re.MULTILINE)


def needs_preprocessor(text: str) -> bool:
    """Does the text hold a preprocessor directive (a line starting with '#')?"""
    return _DIRECTIVE.search(text) is not None


@dataclass(frozen=True)
class _Line:
    file: str
    line: int
    starts: tuple[int, ...]  # output columns (0-based) where a token taken from the source starts
    cols: tuple[int, ...]  # the source column (1-based) of each


@dataclass(frozen=True)
class SourceMap:
    """Where each line (and column) of preprocessed text came from."""

    lines: tuple[_Line, ...]
    included: tuple[tuple[str, str], ...] = ()  # (the name positions give, its absolute path) of each file included

    def pos(self, line: int, col: int) -> Pos:
        """The original position of 1-based `line`:`col` of the expanded text."""
        if not 0 < line <= len(self.lines):
            last = self.lines[-1] if self.lines else _Line("<preprocessed>", 0, (), ())
            return Pos(last.file, last.line, 0)
        entry = self.lines[line - 1]
        if not col or not entry.starts:
            return Pos(entry.file, entry.line, col)
        i = max(bisect.bisect_right(entry.starts, col - 1) - 1, 0)
        return Pos(entry.file, entry.line, entry.cols[i] + max(col - 1 - entry.starts[i], 0))

    def file_of(self, line: int) -> str:
        return self.pos(line, 0).file


def _display(name: str) -> str:
    from ...paths import display_path

    return display_path(name) if name and not name.startswith("<") else name


def _preprocessor_class():
    from pcpp import Preprocessor

    class _Cpp(Preprocessor):
        """pcpp with its diagnostics as tprules errors, and its file reads recorded."""

        def __init__(self, include_dirs):
            super().__init__()
            self.line_directive = None
            self.texts: dict[str, str] = {}
            self._directive = None
            for folder in include_dirs:
                self.add_path(str(folder))

        def on_file_open(self, is_system_include, includepath):
            handle = super().on_file_open(is_system_include, includepath)
            data = handle.read()
            handle.close()
            self.texts[os.path.abspath(includepath)] = data
            import io

            return io.StringIO(data)

        def include(self, tokens, original_line):
            self._directive = original_line[0] if original_line else None
            yield from super().include(tokens, original_line)

        def on_include_not_found(self, is_malformed, is_system_include, curdir, includepath):
            at = self._where(self._directive)
            if is_malformed:
                raise RuleSyntaxError(f"malformed #include {includepath}: write #include \"file\" or <file>", at)
            folders = ([_display(curdir) or "."] if not is_system_include else []) + [_display(p) for p in self.path]
            raise RuleSyntaxError(f"#include {'<' if is_system_include else chr(34)}{includepath}"
                                  f"{'>' if is_system_include else chr(34)}: no such file in "
                                  f"{', '.join(folders) if folders else 'any -I folder (none given)'}", at)

        def on_error(self, file, line, msg):
            raise RuleSyntaxError(f"preprocessor: {msg}", Pos(_display(file or ""), line or 0, 0))

        def on_directive_unknown(self, directive, toks, ifpassthru, precedingtoks):
            if directive.value == "line":
                return None  # kept in the output: the source map reads it
            raise RuleSyntaxError(f"unknown preprocessor directive #{directive.value}", self._where(directive))

        def on_comment(self, tok):
            return False  # comments are dropped, as cpp does

        def _where(self, tok) -> Pos:
            if tok is None:
                return Pos("<preprocessed>", 0, 0)
            return Pos(_display(tok.source or ""), tok.lineno, self.column(tok))

        def column(self, tok) -> int:
            text = self.texts.get(os.path.abspath(tok.source or ""), "")
            if not text or tok.lexpos > len(text):
                return 0
            return tok.lexpos - text.rfind("\n", 0, tok.lexpos)

    return _Cpp


def preprocess(text: str, filename: str, include_dirs=()) -> tuple[str, SourceMap]:
    """The text after the C preprocessor, and where each of its lines came from."""
    cpp = _preprocessor_class()(include_dirs)
    cpp.texts[os.path.abspath(filename)] = text
    cpp.parse(text, filename)
    out: list[str] = []
    lines: list[_Line] = []
    current: list[str] = []
    starts: list[int] = []
    cols: list[int] = []
    key = None  # (source, line) of the output line being written
    renames: dict[str, tuple[str, int]] = {}  # source -> (file, lines to add) after a #line
    pending_line: list = []

    def flush():
        nonlocal current, starts, cols
        if key is not None and "".join(current).strip():
            source, line = key
            file, shift = renames.get(source, (_display(source or filename), 0))
            out.append("".join(current))
            lines.append(_Line(file, line + shift, tuple(starts), tuple(cols)))
        current, starts, cols = [], [], []

    last_pos: dict[str, int] = {}
    while True:
        tok = cpp.token()
        if tok is None:
            break
        source = tok.source or filename
        if tok.value.startswith("\n") or tok.value == "\n":
            if pending_line:
                _apply_line(pending_line, renames, source, tok.lineno)
                pending_line = []
                current, starts, cols = [], [], []
                key = None
                continue
            flush()
            key = None
            continue
        if key is None:
            if tok.type in cpp.t_WS and not current:
                pass
            key = (source, tok.lineno)
        if not current and tok.value == "#":
            pending_line = [tok]
            continue
        if pending_line:
            pending_line.append(tok)
            continue
        expanded = last_pos.get(source, -1) > tok.lexpos and tok.type not in cpp.t_WS
        if tok.type not in cpp.t_WS and not expanded:
            starts.append(sum(len(c) for c in current))
            cols.append(cpp.column(tok) or 1)
            last_pos[source] = tok.lexpos
        current.append(tok.value)
    if pending_line:
        _apply_line(pending_line, renames, pending_line[0].source or filename, pending_line[0].lineno)
    flush()
    main = os.path.abspath(filename)
    included = tuple((_display(path), path) for path in cpp.texts if path != main)
    return "\n".join(out) + "\n", SourceMap(tuple(lines), included)


def _apply_line(tokens, renames: dict, source: str, lineno: int) -> None:
    """`#line N "file"`: the next line of `source` is line N of `file`."""
    words = [t.value for t in tokens if t.value.strip()]
    if len(words) < 3 or words[1] != "line" or not words[2].isdigit():
        at = tokens[0]
        raise RuleSyntaxError(f"unknown preprocessor directive {' '.join(words[:2])}",
                              Pos(_display(at.source or ""), at.lineno, 0))
    number = int(words[2])
    file = words[3][1:-1] if len(words) > 3 and words[3].startswith('"') else renames.get(source, (_display(source), 0))[0]
    renames[source] = (file, number - (lineno + 1))


def include_folders(values) -> tuple[Path, ...]:
    """The `-I` folders as given (none is searched unless named)."""
    return tuple(Path(v) for v in values or ())
