"""Completion for the REPL: commands, relation names, and the symbols of the model.

Inside a string argument it completes the constants of that column's domain (the columns
the rules join it with, datalog/analysis/domains.py): fusion ids inside `legal("`, statement ids
inside `on_chip("` or `op("`; every symbol of the model where the column is unknown.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable

from prompt_toolkit.completion import Completer, Completion

_WORD = re.compile(r"[A-Za-z_?][A-Za-z0-9_?]*$")
_NAME_BEFORE = re.compile(r"([A-Za-z_?][A-Za-z0-9_?.]*)\s*$")
SHOWN = 200  # completions offered at most


def string_column(before: str) -> tuple[str, int] | None:
    """The (relation, column) whose string argument the cursor is in, if it is in one.

    >>> string_column('why refused("mm2_bias", "cy')
    ('refused', 1)
    >>> string_column('?- legal(X), member(X, "g')
    ('member', 1)
    >>> string_column('?- legal(X)') is None
    True
    """
    stack: list[list] = []  # [relation or None, column] per open parenthesis
    in_string = escaped = False
    for i, ch in enumerate(before):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == "(":
            name = _NAME_BEFORE.search(before, 0, i)
            stack.append([name.group(1) if name else None, 0])
        elif ch == "," and stack:
            stack[-1][1] += 1
        elif ch == ")" and stack:
            stack.pop()
    if not in_string or not stack or stack[-1][0] is None:
        return None
    return stack[-1][0], stack[-1][1]


def candidates(before: str, commands: list[str], relations: list[str], symbols: list[str],
               column_symbols: Callable[[str, int], list[str] | None] | None = None) -> list[tuple[str, int]]:
    """(text to insert, how many characters before the cursor it replaces) for the text typed so far.

    `relations` and `symbols` are sorted; `column_symbols(rel, col)` gives the sorted
    constants of a column's domain, or None when it knows none.

    >>> candidates('why leg', ['why'], ['legal', 'member'], [])
    [('legal', 3)]
    >>> candidates('why legal("mm', ['why'], ['legal'], ['mm1_0', 'mm2_bias', 'x'])
    [('mm1_0"', 2), ('mm2_bias"', 2)]
    >>> candidates('why legal("mm', ['why'], ['legal'], ['mm1_0', 'mm2_bias'], lambda r, c: ['mm2_bias'])
    [('mm2_bias"', 2)]
    """
    if before.count('"') % 2 == 1:  # inside a string: a constant of that column, else of the model
        prefix = before[before.rindex('"') + 1:]
        where = string_column(before)
        pool = column_symbols(*where) if where is not None and column_symbols is not None else None
        return [(s + '"', len(prefix)) for s in _prefixed(symbols if pool is None else pool, prefix)]
    stripped = before.lstrip()
    if not stripped or (" " not in stripped and not stripped.startswith("?-")):
        return [(c, len(stripped)) for c in commands if c.startswith(stripped)]
    first, _, rest = stripped.partition(" ")
    rest = rest.lstrip()
    if first == ":format":
        return [(w, len(rest)) for w in ("text", "json") if w.startswith(rest)]
    word = _WORD.search(before)
    prefix = word.group(0) if word else ""
    if not prefix and first not in (":rules", ":facts"):
        return []
    return [(r, len(prefix)) for r in _prefixed(relations, prefix)]


def _prefixed(words: list[str], prefix: str) -> list[str]:
    start = bisect.bisect_left(words, prefix)
    found = []
    for word in words[start:start + SHOWN]:
        if not word.startswith(prefix):
            break
        found.append(word)
    return found


def domain_symbols(read, domains: dict, relations, rel: str, col: int) -> list[str] | None:
    """The constants found in any column of (rel, col)'s domain (datalog/analysis/domains.py) in a
    model's reader, sorted; None for a relation the rules do not declare (a typo, or one
    being written: every symbol). The REPL and the language server complete from it."""
    if rel not in relations:
        return None
    found: set[str] = set()
    for r, c in domains.get((rel, col), {(rel, col)}):
        found.update(read.column_symbols(r, c))
    return sorted(found)


class ReplCompleter(Completer):
    """Completes from the session's current rules and model (rebuilt after each :reload)."""

    def __init__(self, session, commands: list[str]):
        self.session = session
        self.commands = commands
        self._generation = None
        self._relations: list[str] = []
        self._symbols: list[str] = []
        self._domains: dict = {}
        self._columns: dict[tuple[str, int], list[str] | None] = {}

    def _refresh(self) -> None:
        if self._generation == self.session.generation:
            return
        from ..datalog.analysis.domains import column_domains

        checked = self.session.workspace.checked
        self._relations = sorted(checked.decls)
        self._symbols = self.session.explainer.solver.read.symbols()
        self._domains = column_domains(checked.program.rules)
        self._columns = {}
        self._generation = self.session.generation

    def column_symbols(self, rel: str, col: int) -> list[str] | None:
        """See `domain_symbols`: cached until the next :reload."""
        key = (rel, col)
        if key not in self._columns:
            self._columns[key] = domain_symbols(self.session.explainer.solver.read, self._domains,
                                                self._relations, rel, col)
        return self._columns[key]

    def get_completions(self, document, complete_event):
        self._refresh()
        for text, back in candidates(document.text_before_cursor, self.commands, self._relations, self._symbols,
                                     self.column_symbols):
            yield Completion(text, start_position=-back)
