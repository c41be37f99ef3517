"""The program folder beside the rules: its model under the rules being edited.

Hover shows a relation's tuple count in it, and each rule's code lens what that rule
derives there. After an edit the model is evaluated again the way the planner re-asks
its questions (workspace.py `ask`): the program's facts are kept, and only the strata that
depend on a relation whose rules changed are evaluated again over the previous model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from ..datalog.analysis.checked import CheckedRules
from ..datalog.lang import ast

if TYPE_CHECKING:
    from ..datalog.engine.fast_model import ColumnarModel
    from ..program.load import LoadedProgram

REFUSALS = ("refused", "base_refused")  # a rule deriving these refuses candidates


@dataclass
class FolderModel:
    directory: Path
    display: str
    checked: CheckedRules
    loaded: LoadedProgram
    model: ColumnarModel  # the fast engine's
    incremental: bool = False  # whether this model was evaluated on top of the previous one
    _derived: dict[int, tuple[str, int]] = field(default_factory=dict, repr=False)

    @classmethod
    def build(cls, directory: Path, checked: CheckedRules, shim: str | None = None,
              previous: "FolderModel | None" = None) -> "FolderModel":
        """Load (or keep) the program's facts and evaluate every relation; raises BadInput."""
        from ..program.load import fact_schema, load_program
        from ..workspace import make_engine

        incremental = False
        if previous is not None and previous.directory == directory and \
                fact_schema(previous.checked) == fact_schema(checked):
            loaded = previous.loaded  # the same facts, read once
            engine = make_engine("fast", checked, loaded)
            changed = _changed_relations(previous.checked, checked)
            only = _dependent(checked, changed)
            try:
                model = engine.evaluate(loaded.facts.relations, base=previous.model, only=only)
                incremental = True
            except Exception:  # noqa: BLE001 - a model the new rules cannot build on: evaluate it whole
                model = engine.evaluate(loaded.facts.relations)
            previous.model._parent_model = None  # keep one model alive, not every edit's
        else:
            loaded = load_program(directory, checked, shim)
            model = make_engine("fast", checked, loaded).evaluate(loaded.facts.relations)
        return cls(directory, loaded.display, checked, loaded, model, incremental)

    @cached_property
    def solver(self):
        """One explain-code solver over the model for every rule's lens (it caches its plans)."""
        from ..explain.solve import Solver

        return Solver(self.model)

    def count(self, rel: str) -> int | None:
        """The relation's tuple count, or None when the rules do not declare it."""
        if rel not in self.checked.decls:
            return None
        from ..explain.access import reader

        return reader(self.model).count(rel)

    def derived_by(self, rule: ast.Rule) -> tuple[str, int]:
        """What one rule derives in this program: ("refuses", candidates) for a refusal rule
        (distinct first columns), else ("derives", tuples). Read off the model: a rule's body
        solved over the fixpoint gives exactly the tuples that rule contributes."""
        key = id(rule)
        if key not in self._derived:
            solver = self.solver
            heads = set()
            for env, _ in solver.solutions(rule.body, {}, rule.head):
                heads.add(tuple(solver.value(arg, env) for arg in rule.head.args))
            if rule.head.rel in REFUSALS:
                self._derived[key] = ("refuses", len({h[0] for h in heads}))
            else:
                self._derived[key] = ("derives", len(heads))
        return self._derived[key]

    def column_symbols(self, domains: dict, rel: str, col: int) -> list[str] | None:
        from ..explain.access import reader
        from ..repl.complete import domain_symbols

        return domain_symbols(reader(self.model), domains, set(self.checked.decls), rel, col)


def _changed_relations(old: CheckedRules, new: CheckedRules) -> set[str]:
    """Relations whose rules or declaration differ (positions aside: moving a rule changes nothing)."""
    changed = set()
    for rel in set(old.decls) | set(new.decls):
        if old.decls.get(rel) != new.decls.get(rel) or set(old.rules_for(rel)) != set(new.rules_for(rel)):
            changed.add(rel)
    return changed


def _dependent(checked: CheckedRules, changed: set[str]) -> frozenset[str]:
    from ..datalog.analysis.locality import dependent_relations

    found: frozenset[str] = frozenset(changed)
    for rel in changed:
        found |= dependent_relations(checked.strata, rel)
    return found
