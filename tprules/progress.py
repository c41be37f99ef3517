"""Progress of long work on a terminal: a rich progress bar on stderr when stderr is a
terminal, nothing at all when it is piped (scripts and tests see no difference).

>>> p = Progress(False)          # silent: every call is a no-op
>>> p.phase("stamp layers", 80); p.advance(); p.close()
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # rich is imported only when a bar is drawn
    from rich.progress import Progress as Bar
    from rich.progress import TaskID


class Progress:
    def __init__(self, enabled: bool | None = None, stream=None):
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self._bar: Bar | None = None
        self._task: TaskID | None = None  # set only while there is a bar
        self._total = 1

    def phase(self, what: str, total: int) -> None:
        """Start a new bar line (the previous one stays, complete)."""
        if not self.enabled:
            return
        if self._bar is None:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
            from rich.progress import Progress as Bar

            self._bar = Bar(TextColumn("{task.description:<20}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), console=Console(file=self.stream), transient=True)
            self._bar.start()
        self._finish()
        self._total = max(total, 1)
        self._task = self._bar.add_task(what, total=self._total)

    def advance(self, n: int = 1) -> None:
        if self.enabled and self._task is not None and self._bar is not None:
            self._bar.advance(self._task, n)

    def _finish(self) -> None:
        if self._task is not None and self._bar is not None:
            self._bar.update(self._task, completed=self._total)

    def close(self) -> None:
        if self._bar is not None:
            self._finish()
            self._bar.stop()
            self._bar = None
            self._task = None
