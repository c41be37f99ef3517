"""One REPL session: the loaded workspace, its explainer, and the commands (line in, answer out).

The session knows nothing of terminals: `handle(line)` returns a renderable (or None), so
the terminal loop, the piped loop and the tests all drive the same object.

>>> s = Session("facts/megatron-mlp-tp2")                      # doctest: +SKIP
>>> to_text(s.handle('?- legal(F).'))                          # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text

from ..errors import BadInput
from ..explain.prove import DEFAULT_DEPTH
from . import answers

if TYPE_CHECKING:
    from ..explain.explainer import Explainer

QUIT = object()  # what `:quit` answers


class ReplError(BadInput):
    kind = "error"


class ReloadFailed(BadInput):
    """A :reload that did not load: its problems, one per line, and the previous rules stay."""

    kind = "reload failed"

    def __init__(self, cause: BadInput):
        super().__init__("the previous rules and facts stay in use")
        self.cause = cause

    def __str__(self) -> str:
        problems = str(self.cause)
        joint = "\n" if "\n" in problems else " "  # one problem: one line
        return f"reload failed; the previous rules and facts stay in use:{joint}{problems}"


@dataclass(frozen=True)
class Command:
    name: str
    args: str  # how its arguments are written, for :help
    help: str
    method: str


COMMANDS = (
    Command("?-", "BODY.", "query: a table of the bindings that make BODY hold", "query"),
    Command("why", "ATOM", "the proof tree of each tuple matching ATOM, or why none holds", "why"),
    Command("whynot", "ATOM", "why ATOM does not hold: the first failing literal of each rule", "whynot"),
    Command("subproof", "ID", "expand the subtree elided as #ID", "subproof"),
    Command(":depth", "N", "levels of derived tuples shown before subtrees are elided (0: no limit)", "set_depth"),
    Command(":rules", "REL", "the rules deriving REL, with file:line", "rules"),
    Command(":facts", "REL|ATOM", "the tuples of REL (or matching ATOM), facts with file:line", "facts"),
    Command(":relations", "", "every relation with its number of tuples", "relations"),
    Command(":plan", "", "the fusion plan of the program", "plan"),
    Command(":kernels", "", "which collectives may become collective kernels, and why not", "kernels"),
    Command(":module", "[PREFIX]", "answers and :plan groups under this module path only (none: all)",
            "set_module"),
    Command(":reload", "", "re-read the rule files and facts; a broken edit keeps the previous ones", "reload"),
    Command(":format", "text|json", "how answers are printed", "set_format"),
    Command(":help", "", "this list", "help"),
    Command(":quit", "", "leave (also Ctrl-D)", "quit"),
)
_BY_NAME = {c.name: c for c in COMMANDS}


class Session:
    def __init__(self, program_dir: Path | str, rules_dir: Path | str | None = None, shim: str | None = None,
                 depth: int | None = DEFAULT_DEPTH, include_dirs=()):
        self.program_dir, self.rules_dir, self.shim = Path(program_dir), rules_dir, shim
        self.include_dirs = tuple(include_dirs)  # the -I folders: every :reload searches them too
        self.format = "text"
        self.depth = depth
        self.module: str | None = None  # :module PREFIX
        self.workspace = self._load()  # a bad first load is the command's error (exit 2)
        self.generation = 0  # bumped by every successful :reload (completion caches follow it)
        self._explainer: Explainer | None = None  # made on the first question that needs it

    def _load(self):
        import gc

        from ..workspace import Workspace

        gc.unfreeze()  # what an earlier load froze may be collected again once replaced
        try:
            ws = Workspace(self.program_dir, self.rules_dir, self.shim, include_dirs=self.include_dirs)
            _ = ws.model  # evaluate now: an evaluation error is a load error
        finally:
            gc.freeze()  # the loaded model stays until the next :reload; see commands/why.py
        return ws

    @property
    def explainer(self):
        if self._explainer is None:
            from ..explain.explainer import Explainer

            self._explainer = Explainer.of(self.workspace, self.depth)
        return self._explainer

    # -- dispatch ------------------------------------------------------------------------

    def handle(self, line: str):
        """The answer to one line: a renderable, a JSON string, QUIT, or None for nothing."""
        stripped = line.strip()
        if not stripped or stripped.startswith("//"):
            return None
        try:
            if stripped.startswith("?-"):
                start = line.index("?-")
                return self.query(" " * (start + 2) + line[start + 2:])
            word = stripped.split()[0]
            command = _BY_NAME.get(word)
            if command is None:
                raise ReplError(f"unknown command {word!r}; :help lists the commands")
            start = line.index(word) + len(word)
            rest = " " * start + line[start:]  # keep columns: errors point into the line as typed
            return getattr(self, command.method)(rest)
        except BadInput as err:
            return self.error(err)
        except RecursionError:
            return self.error(ReplError("the explanation is too deep (try a smaller :depth)"))
        except Exception as err:  # noqa: BLE001 - the session goes on whatever happens
            return self.error(ReplError(f"internal error: {type(err).__name__}: {err}"))

    def error(self, err: BadInput):
        """One line (a reload's file errors: one per problem), or a JSON object."""
        if self.format == "json":
            import json

            col = err.pos.col if err.pos is not None and err.pos.file.startswith("<") else None
            message = err.message if len(str(err).splitlines()) == 1 else str(err)
            if isinstance(err, ReloadFailed):
                message = str(err)
            return json.dumps({"error": message, "kind": err.kind, "column": col})
        return Text(one_line(err))

    # -- explanations --------------------------------------------------------------------

    def _atom(self, text: str):
        from ..explain.query import read_atom

        if not text.strip():
            raise ReplError("expected an atom, e.g. legal(\"f1\")")
        return read_atom(text, self.workspace.checked)

    def why(self, rest: str):
        return self._answer(self.explainer.explain(self._atom(rest)))

    def whynot(self, rest: str):
        atom = self._atom(rest)
        if self.explainer.holds(atom):
            from ..datalog.lang.printer import print_literal

            text = print_literal(atom)
            raise ReplError(f"{text} holds; ask `why {text}`")
        return self._answer(self.explainer.explain(atom))

    def subproof(self, rest: str):
        word = rest.strip().lstrip("#")
        if not word.isdigit():
            raise ReplError("subproof takes the number of an elided subtree, e.g. subproof 3")
        number = int(word)
        if number not in self.explainer.prover.elided:
            raise ReplError(f"no subtree #{number} was elided in this session")
        return self._answer(self.explainer.subproof(number))

    def _answer(self, node):
        if self.format == "json":
            from ..explain.render import as_json

            return as_json(node)
        from ..explain.render import Renderer

        return Renderer("subproof {id}").any(node)

    def set_depth(self, rest: str):
        word = rest.strip()
        if not word.isdigit():
            raise ReplError(":depth takes a number of levels (0: no limit)")
        self.depth = int(word) or None
        self.explainer.depth = self.depth
        return Text(f"depth {self.depth or 'unlimited'}")

    # -- queries and listings ------------------------------------------------------------

    def query(self, text: str):
        from ..explain.query import read_query

        if not text.strip().rstrip("."):
            raise ReplError("expected a query after ?-, e.g. ?- legal(F).")
        body, names = read_query(text, self.workspace.checked)
        return answers.query(self, body, names)

    def rules(self, rest: str):
        return answers.rules(self, self._relation(rest))

    def facts(self, rest: str):
        if "(" in rest:
            atom = self._atom(rest)
            return answers.facts(self, atom.rel, atom)
        name = rest.strip()
        if name and name not in self.workspace.checked.decls and name in self.workspace.program.facts.relations:
            return answers.facts(self, name, None)  # a SPEC §2 relation the rules do not read
        return answers.facts(self, self._relation(rest), None)

    def relations(self, rest: str):
        self._no_arguments(":relations", rest)
        return answers.relations(self)

    def plan(self, rest: str):
        self._no_arguments(":plan", rest)
        return answers.plan(self)

    def kernels(self, rest: str):
        from . import kernels

        self._no_arguments(":kernels", rest)
        return kernels.answer(self)

    def set_module(self, rest: str):
        from ..verdicts import MemberNotes, known_module

        word = rest.strip()
        if not word:
            self.module = None
            return Text("module: every statement")
        try:
            known_module(MemberNotes.of(self.workspace.program.facts).modules, word)
        except Exception as err:  # noqa: BLE001 - a usage error, said as a REPL error
            raise ReplError(str(err).replace("--module", ":module")) from None
        self.module = word
        return Text(f"module {word}")

    def _relation(self, rest: str) -> str:
        import difflib

        name = rest.strip()
        decls = self.workspace.checked.decls
        if not name:
            raise ReplError("expected a relation name")
        if name not in decls:
            close = difflib.get_close_matches(name, list(decls), n=1)
            raise ReplError(f"unknown relation {name}" + (f" (did you mean {close[0]}?)" if close else ""))
        return name

    @staticmethod
    def _no_arguments(name: str, rest: str) -> None:
        if rest.strip():
            raise ReplError(f"{name} takes no arguments")

    # -- session state -------------------------------------------------------------------

    def reload(self, rest: str):
        self._no_arguments(":reload", rest)
        try:
            workspace = self._load()
        except BadInput as err:
            return self.error(ReloadFailed(err))
        self.workspace, self._explainer = workspace, None
        self.generation += 1
        return answers.loaded(self)

    def set_format(self, rest: str):
        word = rest.strip()
        if word not in ("text", "json"):
            raise ReplError(":format takes text or json")
        self.format = word
        return Text(f"format {word}") if word == "text" else '{"format": "json"}'

    def help(self, rest: str):
        return answers.help_table(COMMANDS)

    def quit(self, rest: str):
        return QUIT


def one_line(err: BadInput) -> str:
    """An error about what was typed says the column; one about a file keeps its file:line."""
    if isinstance(err, ReloadFailed):
        return str(err)
    pos = err.pos
    if pos is not None and pos.file.startswith("<"):
        where = f" at column {pos.col}" if pos.col else ""
        return f"{err.kind}{where}: {err.message}"
    return str(err)
