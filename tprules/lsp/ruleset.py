"""A rule folder as the editor holds it: every `.dl` file (an open buffer in place of the
file on disk), parsed and checked as one program the way `tprules check` loads `rules/`.

>>> rs = RuleSet.load(Path("rules"))                            # doctest: +SKIP
>>> rs.problems, rs.decls["refused"].arity                       # doctest: +SKIP
([], 2)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..analysis.program import CheckedProgram, check_program
from ..errors import BadInput, BadInputs, RuleError
from ..lang import ast


@dataclass(frozen=True)
class RuleFile:
    path: Path
    name: str  # how positions name it (relative to the working folder where inside it)
    text: str
    items: tuple[ast.Item, ...] | None  # its last items that parsed (None: it never did)
    problem: BadInput | None = None


@dataclass(frozen=True)
class Use:
    """One atom of a rule: where a relation is used, and by which rule."""

    atom: ast.Atom
    rule: ast.Rule
    role: str  # "head", "positive", "negative" or "aggregate"


@dataclass
class RuleSet:
    folder: Path
    files: dict[str, RuleFile]  # by name
    problems: list[BadInput]
    checked: CheckedProgram | None  # None while any problem stands
    items: tuple[ast.Item, ...] = ()  # every file's items (a file that does not parse: its last good ones)
    generation: int = 0
    _uses: dict[str, list[Use]] | None = field(default=None, repr=False)

    @classmethod
    def load(cls, folder: Path, buffers: dict[Path, str] | None = None, previous: "RuleSet | None" = None) -> "RuleSet":
        """Parse and check every `.dl` file of `folder`; `buffers` are open documents' texts by
        path. A file that does not parse keeps `previous`'s items for the program-wide checks,
        so one half-typed rule does not bury the folder under "not declared" errors."""
        from ..lang.parser import parse_text
        from ..paths import display_path

        folder = folder.resolve()
        buffers = buffers or {}
        paths = sorted(set(folder.glob("*.dl")) | {p for p in buffers if p.parent == folder and p.suffix == ".dl"})
        files: dict[str, RuleFile] = {}
        problems: list[BadInput] = []
        items: list[ast.Item] = []
        stale = False
        for path in paths:
            name = display_path(path)
            try:
                text = buffers[path] if path in buffers else path.read_bytes().decode()
            except (OSError, UnicodeDecodeError) as err:
                problem = RuleError(f"cannot read the rule file: {err}", ast.Pos(name, 0, 0), "unreadable")
                old = previous.files.get(name) if previous is not None else None
                files[name] = RuleFile(path, name, "", old.items if old is not None else None, problem)
                items.extend(files[name].items or ())
                problems.append(problem)
                stale = True
                continue
            old = previous.files.get(name) if previous is not None else None
            if old is not None and old.problem is None and old.text == text and old.items is not None:
                files[name] = old  # unchanged since the last check: its parse is reused
                items.extend(old.items)
                continue
            try:
                parsed = parse_text(text, name).items
                files[name] = RuleFile(path, name, text, parsed)
                items.extend(parsed)
            except BadInput as err:
                kept = old.items if old is not None else None
                files[name] = RuleFile(path, name, text, kept, err)
                problems.append(err)
                items.extend(kept or ())
                stale = True
        checked = None
        if not paths:
            problems.append(RuleError(f"no .dl rule files in {display_path(folder)}"))
        else:
            try:
                checked = check_program(ast.Program(tuple(items)), display_path(folder))
                _check_schema(checked)
            except BadInputs as err:
                problems.extend(err.problems)
                checked = None
            except BadInput as err:
                problems.append(err)
                checked = None
        if stale:
            checked = None
        generation = previous.generation + 1 if previous is not None else 0
        return cls(folder, files, problems, checked, tuple(items), generation)

    # -- the index the navigation, hover and completion read ------------------------------

    @property
    def decls(self) -> dict[str, ast.Decl]:
        found: dict[str, ast.Decl] = {}
        for item in self.items:
            if isinstance(item, ast.Decl) and item.name not in found:
                found[item.name] = item
        return found

    @property
    def rules(self) -> list[ast.Rule]:
        return [item for item in self.items if isinstance(item, ast.Rule)]

    def uses(self, rel: str) -> list[Use]:
        """Every atom naming `rel`, in every rule of the folder, in source order."""
        if self._uses is None:
            index: dict[str, list[Use]] = {}
            for rule in self.rules:
                for atom, role in [(rule.head, "head"), *ast.body_atoms(rule.body)]:
                    index.setdefault(atom.rel, []).append(Use(atom, rule, role))
            self._uses = index
        return self._uses.get(rel, [])

    def deriving(self, value: str) -> list[ast.Rule]:
        """The rules whose head holds the string constant `value` (a reason code's rules)."""
        return [r for r in self.rules if not r.is_fact and any(isinstance(a, ast.Str) and a.value == value
                                                              for a in r.head.args)]

    def reasons(self) -> dict[str, list[ast.Rule]]:
        """Every string constant in a rule's head (the reason codes), with the rules deriving it."""
        found: dict[str, list[ast.Rule]] = {}
        for rule in self.rules:
            for arg in rule.head.args:
                if isinstance(arg, ast.Str) and not rule.is_fact:
                    found.setdefault(arg.value, []).append(rule)
        return found

    def file_of(self, path: Path) -> RuleFile | None:
        path = path.resolve()
        return next((f for f in self.files.values() if f.path == path), None)

    def path_of(self, name: str) -> Path | None:
        found = self.files.get(name)
        return found.path if found is not None else None

    def text_of(self, name: str) -> str:
        found = self.files.get(name)
        return found.text if found is not None else ""


def _check_schema(checked: CheckedProgram) -> None:
    """The checks `tprules lint` adds for a TP rule folder (SPEC §2's relations as declared)."""
    from ..program.load import check_rule_schema

    check_rule_schema(checked)
