"""Every problem of a rule folder as an LSP diagnostic: the range of the token it names,
its severity, and its code (the check that found it: `syntax`, `relation`, `types`, ...)."""

from __future__ import annotations

from lsprotocol import types

from ..errors import BadInput
from .ruleset import RuleSet
from .text import token_range

SOURCE = "tprules"


def diagnostic(problem: BadInput, text: str) -> types.Diagnostic:
    from ..lang.ast import Pos

    pos = problem.pos or Pos("", 0, 0)
    return types.Diagnostic(range=token_range(text, pos), message=f"{problem.kind}: {problem.message}",
                            severity=types.DiagnosticSeverity.Error, code=problem.code, source=SOURCE)


def by_file(rs: RuleSet) -> dict[str, list[types.Diagnostic]]:
    """Each rule file's diagnostics (an empty list clears a file's old ones). A problem that
    names no rule file of the folder (a missing `.input` declaration, say) goes on the first file."""
    found: dict[str, list[types.Diagnostic]] = {name: [] for name in rs.files}
    first = next(iter(rs.files), None)
    for problem in rs.problems:
        name = problem.pos.file if problem.pos is not None and problem.pos.file in rs.files else first
        if name is None:
            continue
        pos_ok = problem.pos is not None and problem.pos.file == name
        shown = problem if pos_ok else BadInput(problem.message, None)
        if not pos_ok:
            shown.kind, shown.code = problem.kind, problem.code
        found[name].append(diagnostic(shown, rs.text_of(name)))
    return found
