"""The docs' transcripts, read and run by sybil.

A transcript is a fenced block of README.md or docs/*.md whose first line is a `$ tprules ...`
command; each `$ tprules ARGS` line is followed by what the command prints (its stdout, then
its stderr). The command runs as `python -m tprules ARGS` from the repository root, with colour
off, and its output must be the block's text exactly. Its exit status must be 0, or N where the
command line ends in a comment `# exit N` (any other comment is prose for the reader).

A transcript holds only `tprules` commands, with no shell around them (no pipes, redirections
or `&&`). A session that needs a scratch copy, a pipe or an optional extra, or whose output
varies from run to run (timings, memory, this machine's threads), is not a transcript: the
page writes it with the prompt `%` (it records one run), or shows the command in prose and
its output as a plain block. A `$ tprules` line anywhere but in a transcript fails
`test_no_tprules_prompt_outside_a_transcript`.
"""

from __future__ import annotations

import difflib
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from sybil import Document, Example, Region, Sybil
from sybil.parsers.markdown.lexers import RawFencedCodeBlockLexer

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "$ "
COMMAND = "$ tprules "
STATUS = re.compile(r"#\s*exit (\d+)\b")
SHELL = set("|&;<>()`")


def documents(root: Path = ROOT) -> list[Path]:
    """README.md and every page of the documentation site."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


@dataclass(frozen=True)
class Command:
    line: str                 # as the page writes it, after the prompt
    args: tuple[str, ...]     # after `tprules`
    status: int               # the exit status the page promises
    expected: str             # stdout then stderr, as the page shows it


class NotATranscript(ValueError):
    """A `$ tprules` line the runner cannot run as written."""


def parse_command(line: str) -> tuple[tuple[str, ...], int]:
    """`tprules check DIR   # exit 2` -> (("check", "DIR"), 2)."""
    code, comment = _split_comment(line)
    lexer = shlex.shlex(code, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    words = list(lexer)
    for word in words:
        if set(word) <= SHELL:
            raise NotATranscript(f"{line!r}: `{word}` is shell, not a tprules argument")
    if words[:1] != ["tprules"]:
        raise NotATranscript(f"{line!r}: not a tprules command")
    found = STATUS.search(comment)
    return tuple(words[1:]), int(found.group(1)) if found else 0


def _split_comment(line: str) -> tuple[str, str]:
    """The command and its trailing `# ...` comment (a `#` outside quotes, after a space)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i], line[i:]
    return line, ""


def parse_transcript(source: str) -> list[Command]:
    """The commands of one block, each with the lines printed under it."""
    commands: list[Command] = []
    line, printed = None, []
    for text in source.splitlines():
        if text.startswith(PROMPT):
            if line is not None:
                commands.append(_command(line, printed))
            line, printed = text[len(PROMPT):], []
        else:
            printed.append(text)
    if line is not None:
        commands.append(_command(line, printed))
    return commands


def _command(line: str, printed: list[str]) -> Command:
    args, status = parse_command(line)
    return Command(line, args, status, "".join(p + "\n" for p in printed))


def environment() -> dict[str, str]:
    """The tests' environment with colour off and no terminal width to follow."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "FORCE_COLOR")}
    env.update(NO_COLOR="1", TERM="dumb", PYTHONPATH=str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""))
    return env


def run(command: Command, root: Path = ROOT) -> tuple[int, str]:
    done = subprocess.run([sys.executable, "-m", "tprules", *command.args], cwd=root, env=environment(),
                          capture_output=True, text=True, timeout=300)
    return done.returncode, done.stdout + done.stderr


def evaluate(example: Example) -> str | None:
    """Run every command of the block; None when each prints what the page says."""
    for command in example.parsed:
        status, printed = run(command)
        if (status, printed) != (command.status, command.expected):
            diff = "".join(difflib.unified_diff(command.expected.splitlines(True), printed.splitlines(True),
                                                "the page", "tprules prints now"))
            return f"$ {command.line}\nexit status {status} (the page says {command.status})\n{diff}"
    return None


def fenced_blocks(document: Document) -> Iterator[Region]:
    """Every fenced block of a page, whatever its info string."""
    lexer = RawFencedCodeBlockLexer(info_pattern=re.compile(r"(?P<info>[^\n]*)$\n", re.MULTILINE))
    yield from lexer(document)


def parse_transcripts(document: Document) -> Iterable[Region]:
    """sybil's parser: a region for each fenced block that opens with `$ tprules`."""
    for region in fenced_blocks(document):
        source = str(region.lexemes["source"])
        if source.startswith(COMMAND):
            try:
                region.parsed = parse_transcript(source)
            except NotATranscript as e:
                line = document.text.count("\n", 0, region.start) + 1
                raise NotATranscript(f"{document.path}:{line}: {e}") from None
            region.evaluator = evaluate
            yield region


def stray_prompts(path: Path) -> list[str]:
    """`file:line` of each `$ tprules` line in a block that is not a transcript."""
    document = Document(path.read_text(), str(path))
    found = []
    for region in fenced_blocks(document):
        source = str(region.lexemes["source"])
        if COMMAND in "\n" + source and not source.startswith(COMMAND):
            found.append(f"{path.relative_to(ROOT)}:{document.text.count(chr(10), 0, region.start) + 1}")
    return found


SYBIL = Sybil(parsers=[parse_transcripts], path=str(ROOT), patterns=["*.md"])


def examples(paths: Iterable[Path]) -> list[Example]:
    return [example for path in paths for example in SYBIL.parse(path)]
