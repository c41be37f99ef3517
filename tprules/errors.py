"""Errors for bad input. Every one names where it comes from (file:line[:col]).

The command line turns a `BadInput` into one line per problem on stderr and exit status 2,
having printed nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence

from .pos import Pos


class BadInput(Exception):
    """One problem with the user's input: a rule file, a fact file, a query, a flag."""

    kind = "error"
    code = "error"  # a short stable name of the check that found it (the editor shows it beside the message)

    def __init__(self, message: str, pos: Pos | None = None, code: str | None = None):
        super().__init__(message)
        self.message = message
        self.pos = pos
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        where = f"{self.pos}: " if self.pos is not None else ""
        return f"{where}{self.kind}: {self.message}"


class RuleSyntaxError(BadInput):
    kind = "syntax error"
    code = "syntax"


class Unsupported(BadInput):
    """Soufflé that tprules does not evaluate (records, components, ...): refused by name."""

    kind = "unsupported"
    code = "unsupported"


class RuleError(BadInput):
    """A rule program that parses but does not check (declarations, types, safety, strata)."""

    kind = "rule error"
    code = "rule"


class FactError(BadInput):
    """A fact file line that does not fit its relation (width, number column)."""

    kind = "fact error"
    code = "fact"


class IllFormed(BadInput):
    """Facts that load but break a well-formedness rule of SPEC §2."""

    kind = "ill-formed"
    code = "ill-formed"


class UsageError(BadInput):
    kind = "usage"
    code = "usage"


class BadInputs(BadInput):
    """Several problems found together (lint reports them all)."""

    def __init__(self, problems: Sequence[BadInput], in_order: bool = False):
        assert problems
        super().__init__(problems[0].message, problems[0].pos)
        self.problems = list(problems) if in_order else sorted(problems, key=lambda p: (p.pos or Pos("", 0, 0),
                                                                                         p.message))

    def __str__(self) -> str:
        return "\n".join(str(p) for p in self.problems)


def raise_all(problems: Sequence[BadInput], in_order: bool = False) -> None:
    """Raise nothing, the one problem, or all of them together (sorted by position, or
    `in_order` as given)."""
    if len(problems) == 1:
        raise problems[0]
    if problems:
        raise BadInputs(problems, in_order)


class CompileFailed(BadInput):
    """A generated kernel that its compiler refuses: one line naming the group and its members."""

    kind = "compile error"
    code = "compile"
