"""The REPL's two loops: prompt_toolkit on a terminal, and line by line when stdin is piped."""

from __future__ import annotations

import sys

from rich.text import Text

from ..config import cache_dir
from ..explain.render import to_text
from .session import COMMANDS, QUIT, Session

PROMPT = "tprules> "


def run_piped(session: Session, lines, write, width: int, ascii: bool = False) -> None:
    """Answer each line in turn; each command is echoed after the prompt so the output reads as a transcript."""
    for raw in lines:
        line = raw.rstrip("\r\n")
        if not line.strip():
            continue
        write(PROMPT + line + "\n")
        answer = session.handle(line)
        if answer is QUIT:
            break
        if answer is not None:
            write(answer + "\n" if isinstance(answer, str) else to_text(answer, width=width, ascii=ascii))


def run_terminal(session: Session, width: int | None = None) -> None:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory, History
    from rich.console import Console

    from .complete import ReplCompleter

    console = Console(highlight=False, emoji=False, width=width)
    history = cache_dir() / "repl_history"
    try:
        history.parent.mkdir(parents=True, exist_ok=True)
        store: History = FileHistory(str(history))
    except OSError:  # no history rather than no REPL
        from prompt_toolkit.history import InMemoryHistory

        store = InMemoryHistory()
    prompt: PromptSession[str] = PromptSession(history=store, completer=ReplCompleter(session, [c.name for c in COMMANDS]))
    ws = session.workspace
    console.print(Text(f"tprules repl: {ws.program.display} (shim {ws.program.shim_label}, rules {ws.checked.source}); "
                       f":help lists the commands, Ctrl-D leaves", style="dim"))
    while True:
        try:
            line = prompt.prompt(PROMPT)
        except KeyboardInterrupt:
            continue
        except EOFError:
            break
        answer = session.handle(line)
        if answer is QUIT:
            break
        if isinstance(answer, str):
            sys.stdout.write(answer + "\n")
        elif answer is not None:
            console.print(answer)
