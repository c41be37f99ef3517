"""Completion for the REPL: commands, relation names, and the symbols of the model."""

from __future__ import annotations

import bisect
import re

from prompt_toolkit.completion import Completer, Completion

_WORD = re.compile(r"[A-Za-z_?][A-Za-z0-9_?]*$")
SHOWN = 200  # completions offered at most


def candidates(before: str, commands: list[str], relations: list[str], symbols: list[str]) -> list[tuple[str, int]]:
    """(text to insert, how many characters before the cursor it replaces) for the text typed so far.

    `relations` and `symbols` are sorted.

    >>> candidates('why leg', ['why'], ['legal', 'member'], [])
    [('legal', 3)]
    >>> candidates('why legal("mm', ['why'], ['legal'], ['mm1_0', 'mm2_bias', 'x'])
    [('mm1_0"', 2), ('mm2_bias"', 2)]
    """
    if before.count('"') % 2 == 1:  # inside a string: a symbol of the model
        prefix = before[before.rindex('"') + 1:]
        return [(s + '"', len(prefix)) for s in _prefixed(symbols, prefix)]
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


class ReplCompleter(Completer):
    """Completes from the session's current rules and model (rebuilt after each :reload)."""

    def __init__(self, session, commands: list[str]):
        self.session = session
        self.commands = commands
        self._generation = None
        self._relations: list[str] = []
        self._symbols: list[str] = []

    def _refresh(self) -> None:
        if self._generation == self.session.generation:
            return
        self._relations = sorted(self.session.workspace.checked.decls)
        self._symbols = self.session.explainer.solver.read.symbols()
        self._generation = self.session.generation

    def get_completions(self, document, complete_event):
        self._refresh()
        for text, back in candidates(document.text_before_cursor, self.commands, self._relations, self._symbols):
            yield Completion(text, start_position=-back)
