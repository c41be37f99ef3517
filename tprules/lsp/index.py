"""Which relation (or component) each name written in a rule folder stands for.

The folder's items are read with their components expanded (datalog/analysis/components.py), so
a name means what the checks and the engines take it to mean: `refused` written inside
`.comp Backend` is `cuda.refused` and `cpu.refused` (one relation per instance), and
`cuda.refused` written outside is the first of them. Every expanded item keeps the
position it was written at (the original file, line and column, through `#include` and
macros), so each declaration and each atom is an `Occurrence` there: both heads of a
subsumptive clause are uses of its relation.

>>> from tprules.datalog.lang.parser import parse_text
>>> text = '.comp C { .decl r(x: number) r(1). }\\n.init a = C\\n.decl s(x: number)\\ns(x) :- a.r(x).'
>>> index = Index.of(parse_text(text).items, {"<text>": text}.get)
>>> [(o.name, o.role, f"{o.pos.line}:{o.pos.col}", o.length) for o in index.named("a.r")]
[('a.r', 'decl', '1:17', 1), ('a.r', 'head', '1:30', 1), ('a.r', 'positive', '4:9', 3)]
>>> [o.name for o in index.at("<text>", 0, 29)]            # the `r` of `r(1).`, in the component
['a.r']
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..datalog.lang import ast
from ..errors import BadInput
from ..pos import Pos
from .text import QNAME

USE_ROLES = ("head", "dominating", "positive", "negative", "aggregate")  # an atom of a rule
COMPONENT_ROLES = ("component", "component use")


@dataclass(frozen=True)
class Occurrence:
    """A relation's (or a component's) name, written at `pos`, `length` characters long."""

    name: str  # the relation as the checks know it (`cuda.refused`), or the component's name
    pos: Pos
    length: int  # of the name as written there (`refused` inside the component), 0: not written there
    role: str  # "decl", "head", "dominating", "positive", "negative", "aggregate"; "component", "component use"
    rule: ast.Rule | None = None
    origin: str = ""  # the instance a component's item came from


@dataclass
class Index:
    items: tuple[ast.Item, ...]  # the folder's items, components expanded
    occurrences: list[Occurrence]
    decls: dict[str, ast.Decl]
    _by_name: dict[str, list[Occurrence]] = field(default_factory=dict, repr=False)
    _by_file: dict[str, list[Occurrence]] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, items: tuple[ast.Item, ...], text_of: Callable[[str], str | None]) -> "Index":
        """`text_of(file)`: a file's text (for how long each name is as written there)."""
        from ..datalog.analysis.components import expand_components

        try:
            expanded = expand_components(ast.RuleSource(tuple(items))).items
        except BadInput:  # a malformed component: its diagnostic says so; the rest still navigates
            expanded = tuple(i for i in items if not isinstance(i, (ast.Component, ast.Init, ast.Override)))
        texts: dict[str, list[str]] = {}

        def written(pos: Pos, name: str) -> int:
            if pos.file not in texts:
                texts[pos.file] = (text_of(pos.file) or "").split("\n")
            lines = texts[pos.file]
            if not 0 < pos.line <= len(lines) or not pos.col:
                return 0
            found = QNAME.match(lines[pos.line - 1], pos.col - 1)
            word = found.group(0) if found else ""
            return len(word) if word and (name == word or name.endswith("." + word)) else 0

        found: list[Occurrence] = []
        decls: dict[str, ast.Decl] = {}
        for item in expanded:
            match item:
                case ast.Decl():
                    decls.setdefault(item.name, item)
                    found.append(Occurrence(item.name, item.pos, written(item.pos, item.name), "decl"))
                case ast.Rule():
                    atoms = [(item.head, "head")] + ([(item.dominating, "dominating")] if item.dominating else [])
                    for atom, role in atoms + ast.body_atoms(item.body):
                        found.append(Occurrence(atom.rel, atom.pos, written(atom.pos, atom.rel), role, item,
                                                item.origin))
        found += _components(items, written)
        return cls(tuple(expanded), found, decls)

    def named(self, name: str) -> list[Occurrence]:
        """Every occurrence of a relation (or component), in source order."""
        if not self._by_name:
            for o in self.occurrences:
                self._by_name.setdefault(o.name, []).append(o)
        return self._by_name.get(name, [])

    def at(self, file: str, line: int, character: int) -> list[Occurrence]:
        """The occurrences whose written name covers an LSP position (0-based) of `file`:
        several where one name written in a component stands for one relation per instance."""
        if not self._by_file:
            for o in self.occurrences:
                if o.length:
                    self._by_file.setdefault(o.pos.file, []).append(o)
        return [o for o in self._by_file.get(file, ())
                if o.pos.line - 1 == line and o.pos.col - 1 <= character <= o.pos.col - 1 + o.length]


def _components(items, written) -> list[Occurrence]:
    """Each `.comp` name (its definition), and each use of one (`.init`, a base)."""
    found = []

    def walk(items):
        for item in items:
            match item:
                case ast.Component(own, bases, inner):
                    found.append(Occurrence(own.name, own.pos, written(own.pos, own.name), "component"))
                    found.extend(Occurrence(b.name, b.pos, written(b.pos, b.name), "component use") for b in bases)
                    walk(inner)
                case ast.Init(_, comp):
                    found.append(Occurrence(comp.name, comp.pos, written(comp.pos, comp.name), "component use"))

    walk(items)
    return found
