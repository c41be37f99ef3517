"""Every problem of a rule folder as an LSP diagnostic: the range of the token it names,
its severity, and its code (the check that found it: `syntax`, `relation`, `types`, ...)."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types

from ..errors import BadInput
from ..pos import Pos
from .ruleset import RuleSet
from .text import token_range

SOURCE = "tprules"


def diagnostic(problem: BadInput, text: str, here: bool = True) -> types.Diagnostic:
    """`problem` as a diagnostic on the token its position names (`here`: the position is in
    this file; else on the file's first line, where a problem naming no rule file goes)."""
    pos = problem.pos if here and problem.pos is not None else Pos("", 0, 0)
    return types.Diagnostic(range=token_range(text, pos), message=f"{problem.kind}: {problem.message}",
                            severity=types.DiagnosticSeverity.Error, code=problem.code, source=SOURCE)


def by_file(rs: RuleSet) -> dict[str, list[types.Diagnostic]]:
    """Each rule file's diagnostics (an empty list clears a file's old ones). A problem in a
    file that an `#include` reads goes on that `#include` line, naming its own file:line:col;
    one that names no file of the folder (a missing `.input` declaration, say) goes on the first file."""
    found: dict[str, list[types.Diagnostic]] = {name: [] for name in rs.files}
    first = next(iter(rs.files), None)
    for problem in rs.problems:
        here = problem.pos is not None and problem.pos.file in rs.files
        including = None if here or problem.pos is None else _including(rs, problem.pos.file)
        if including is not None:
            name, line = including
            found[name].append(types.Diagnostic(
                range=token_range(rs.text_of(name), Pos(name, line, 0)), message=str(problem),
                severity=types.DiagnosticSeverity.Error, code=problem.code, source=SOURCE))
            continue
        at = problem.pos.file if here and problem.pos is not None else first
        if at is not None:
            found[at].append(diagnostic(problem, rs.text_of(at), here))
    return found


def _including(rs: RuleSet, included: str) -> tuple[str, int] | None:
    """(the rule file, the 1-based line of its `#include`) that reads `included` (found by
    the file's name on the line: a file whose text does not parse has no record of it)."""
    base = Path(included).name
    for name, rf in rs.files.items():
        for i, row in enumerate(rf.text.split("\n"), 1):
            words = row.split()
            if words and words[0] in ("#include", "#") and base in row and "include" in row:
                return name, i
        if included in rf.included:  # through a nested #include
            return name, 0
    return None
