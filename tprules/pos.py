"""A source position: one home for every stage that names `file:line` (the rule text's
AST, the fact loader, the errors)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Pos:
    file: str
    line: int
    col: int = 0

    def __str__(self) -> str:
        if not self.line:  # a whole file (one that is missing, or unreadable)
            return self.file
        return f"{self.file}:{self.line}:{self.col}" if self.col else f"{self.file}:{self.line}"
