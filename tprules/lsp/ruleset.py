"""A rule folder as the editor holds it: every `.dl` file (an open buffer in place of the
file on disk), parsed and checked as one program the way `tprules check` loads `rules/`.

>>> rs = RuleSet.load(Path("rules"))                            # doctest: +SKIP
>>> rs.problems, rs.decls["refused"].arity                       # doctest: +SKIP
([], 2)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..datalog.analysis.checked import CheckedRules, check_rules
from ..datalog.lang import ast
from ..errors import BadInput, BadInputs, RuleError
from ..pos import Pos
from .index import USE_ROLES, Index, Occurrence


@dataclass(frozen=True)
class RuleFile:
    path: Path
    name: str  # how positions name it (relative to the working folder where inside it)
    text: str
    items: tuple[ast.Item, ...] | None  # its last items that parsed (None: it never did)
    problem: BadInput | None = None
    included: dict[str, Path] = field(default_factory=dict)  # what its #include lines read, by position name


@dataclass
class RuleSet:
    folder: Path
    files: dict[str, RuleFile]  # by name
    problems: list[BadInput]
    checked: CheckedRules | None  # None while any problem stands
    items: tuple[ast.Item, ...] = ()  # every file's items (a file that does not parse: its last good ones)
    generation: int = 0
    _index: Index | None = field(default=None, repr=False)

    @classmethod
    def load(cls, folder: Path, buffers: dict[Path, str] | None = None, previous: "RuleSet | None" = None) -> "RuleSet":
        """Parse and check every `.dl` file of `folder`; `buffers` are open documents' texts by
        path. A file that does not parse keeps `previous`'s items for the program-wide checks,
        so one half-typed rule does not bury the folder under "not declared" errors."""
        from ..datalog.lang.parser import parse_with_includes
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
                problem = RuleError(f"cannot read the rule file: {err}", Pos(name, 0, 0), "unreadable")
                old = previous.files.get(name) if previous is not None else None
                files[name] = RuleFile(path, name, "", old.items if old is not None else None, problem)
                items.extend(files[name].items or ())
                problems.append(problem)
                stale = True
                continue
            old = previous.files.get(name) if previous is not None else None
            if old is not None and old.problem is None and old.text == text and old.items is not None \
                    and not old.included:  # (a file that #includes is parsed again: an included file may change)
                files[name] = old  # unchanged since the last check: its parse is reused
                items.extend(old.items)
                continue
            try:
                parsed, included = parse_with_includes(text, name)
                files[name] = RuleFile(path, name, text, parsed.items, included=included)
                items.extend(parsed.items)
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
                checked = check_rules(ast.RuleSource(tuple(items)), display_path(folder))
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
    def index(self) -> Index:
        """Every relation's declaration and uses, components expanded (index.py)."""
        if self._index is None:
            self._index = Index.of(self.items, self.text_of)
        return self._index

    @property
    def decls(self) -> dict[str, ast.Decl]:
        """Each relation's first `.decl`, by the name the checks know it by (`cuda.refused`)."""
        return self.index.decls

    @property
    def rules(self) -> list[ast.Rule]:
        """Every rule, a component's once for each instance (named for it)."""
        return [item for item in self.index.items if isinstance(item, ast.Rule)]

    def uses(self, rel: str) -> list[Occurrence]:
        """Every atom naming `rel`, in every rule of the folder (both heads of a subsumptive
        clause), in source order."""
        return [o for o in self.index.named(rel) if o.role in USE_ROLES]

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
        """The path of a file positions name: a rule file, or a file one `#include`s."""
        found = self.files.get(name)
        if found is not None:
            return found.path
        return next((f.included[name] for f in self.files.values() if name in f.included), None)

    def text_of(self, name: str) -> str:
        found = self.files.get(name)
        if found is not None:
            return found.text
        path = self.path_of(name)
        try:
            return path.read_text() if path is not None else ""
        except (OSError, UnicodeDecodeError):
            return ""


def _check_schema(checked: CheckedRules) -> None:
    """The checks `tprules lint` adds for a TP rule folder (SPEC §2's relations as declared)."""
    from ..program.load import check_rule_schema

    check_rule_schema(checked)
