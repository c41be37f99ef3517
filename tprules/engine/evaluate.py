"""Stratified, semi-naive, set-at-a-time evaluation of a checked program (the fast engine).

>>> from tprules.analysis import check_program
>>> from tprules.lang.parser import parse_text
>>> prog = check_program(parse_text('''
... .decl e(a: number, b: number)
... .input e
... .decl p(a: number, b: number)
... p(X, Y) :- e(X, Y).
... p(X, Z) :- p(X, Y), e(Y, Z).'''))
>>> sorted(Evaluator(prog).evaluate({"e": {(1, 2), (2, 3)}}).tuples("p"))
[(1, 2), (1, 3), (2, 3)]
"""

from __future__ import annotations

from collections.abc import Iterable
from operator import itemgetter

from ..analysis.program import CheckedProgram
from ..analysis.strata import Stratum, needed_strata
from ..errors import RuleError
from ..lang import ast
from .compile import RUNTIME_HELPERS, CompiledRule, compile_rule


def build_index(tuples: Iterable[tuple], cols: tuple[int, ...]) -> dict:
    index: dict = {}
    if not cols:
        return index
    key = itemgetter(*cols)
    setdefault = index.setdefault
    for t in tuples:
        setdefault(key(t), []).append(t)
    return index


class Model:
    """Every relation's tuples after an evaluation, with hash indexes built on demand.

    A model evaluated on top of another (`parent`) shares the parent's unchanged relations
    and their indexes.
    """

    def __init__(self, relations: dict[str, set], parent: "Model | None" = None):
        self.relations = relations
        self.parent = parent
        self.rounds: dict[str, dict[tuple, int]] = {}  # round of first derivation, recursive strata only
        self._indexes: dict[tuple[str, tuple[int, ...]], dict] = {}

    def tuples(self, rel: str) -> set:
        return self.relations.get(rel, set())

    def contains(self, rel: str, tup: tuple) -> bool:
        return tup in self.relations.get(rel, ())

    def index(self, rel: str, cols: tuple[int, ...]) -> dict:
        key = (rel, cols)
        found = self._indexes.get(key)
        if found is None:
            parent = self.parent
            if parent is not None and parent.relations.get(rel) is self.relations.get(rel):
                found = parent.index(rel, cols)
            else:
                found = build_index(self.relations.setdefault(rel, set()), cols)
            self._indexes[key] = found
        return found

    def add(self, rel: str, new: set) -> None:
        """Add tuples to a relation being derived, keeping its indexes current."""
        self.relations[rel] |= new
        for (ix_rel, cols), index in self._indexes.items():
            if ix_rel == rel and cols:
                key = itemgetter(*cols)
                for t in new:
                    index.setdefault(key(t), []).append(t)


class _StratumCode:
    def __init__(self, stratum: Stratum, full: list[CompiledRule], delta: list[CompiledRule]):
        self.stratum, self.full, self.delta = stratum, full, delta
        self.functions: dict[str, object] = {}


class Evaluator:
    """Compiles a checked program once; evaluates it over any facts, any number of times."""

    def __init__(self, checked: CheckedProgram):
        self.checked = checked
        self._strata: list[_StratumCode] = []
        sources = [RUNTIME_HELPERS]
        counter = 0
        for stratum in checked.strata:
            full, delta = [], []
            for rule in stratum.rules:
                counter += 1
                if rule.is_fact:
                    continue
                full.append(compile_rule(rule, f"rule{counter}"))
                if stratum.recursive:
                    for position, lit in enumerate(rule.body):
                        if isinstance(lit, ast.Atom) and lit.rel in stratum.relations:
                            name = f"rule{counter}_d{position}"
                            delta.append(compile_rule(rule, name, lit.rel, position))
            code = _StratumCode(stratum, full, delta)
            sources.extend(c.source for c in full + delta)
            self._strata.append(code)
        self.source = "\n".join(sources)
        namespace: dict = {}
        exec(compile(self.source, "<tprules rules>", "exec"), namespace)  # noqa: S102 - our own generated code
        for code in self._strata:
            for compiled in code.full + code.delta:
                code.functions[compiled.name] = namespace[compiled.name]

    def needed_strata(self, targets: Iterable[str] | None) -> list[_StratumCode]:
        """The compiled strata that the target relations depend on (all of them without targets)."""
        wanted = {id(s) for s in needed_strata(self.checked.strata, targets)}
        return [code for code in self._strata if id(code.stratum) in wanted]

    def evaluate(
        self,
        facts: dict[str, set],
        targets: Iterable[str] | None = None,
        base: Model | None = None,
        only: frozenset[str] | None = None,
    ) -> Model:
        """Evaluate the strata the targets need.

        With `base`, the new model starts from the base's relations, `facts` replace those
        relations, and only strata with a relation in `only` are evaluated again.
        """
        if base is None:
            relations = {name: set() for name in self.checked.decls}
            for name, tuples in facts.items():
                relations[name] = set(tuples)
            model = Model(relations)
        else:
            relations = dict(base.relations)
            for name, tuples in facts.items():
                relations[name] = set(tuples)
            model = Model(relations, parent=base)
        for code in self.needed_strata(targets):
            if only is not None and not (set(code.stratum.relations) & only):
                continue
            self._run_stratum(model, code, facts)
        return model

    def _run_stratum(self, model: Model, code: _StratumCode, facts: dict[str, set]) -> None:
        stratum = code.stratum
        for rel in stratum.relations:
            # Facts written in rule files add to the given facts (an input relation may have both).
            written = {_fact_tuple(r) for r in stratum.rules if r.is_fact and r.head.rel == rel}
            model.relations[rel] = written | set(facts.get(rel, ()))
            model._indexes = {k: v for k, v in model._indexes.items() if k[0] != rel}
        index = model.index
        relations = model.relations
        if not stratum.recursive:
            for compiled in code.full:
                relations[compiled.rule.head.rel] |= _call(code, compiled, relations, index, {})
            return
        rounds = {rel: {t: 0 for t in relations[rel]} for rel in stratum.relations}
        delta = {rel: set() for rel in stratum.relations}
        for compiled in code.full:
            delta[compiled.rule.head.rel] |= _call(code, compiled, relations, index, {})
        step = 0
        while True:
            for rel in stratum.relations:
                fresh = delta[rel] - relations[rel]
                delta[rel] = fresh
                model.add(rel, fresh)
                for t in fresh:
                    rounds[rel][t] = step
            if not any(delta.values()):
                break
            step += 1
            produced = {rel: set() for rel in stratum.relations}
            for compiled in code.delta:
                produced[compiled.rule.head.rel] |= _call(code, compiled, relations, index, delta)
            delta = produced
        model.rounds.update(rounds)


def _call(code: _StratumCode, compiled: CompiledRule, relations, index, delta) -> set:
    try:
        return code.functions[compiled.name](relations, index, delta)
    except ZeroDivisionError:
        raise RuleError("division by zero while evaluating this rule", compiled.rule.pos) from None


def _fact_tuple(rule: ast.Rule) -> tuple:
    from .constant import constant_value

    return tuple(constant_value(term) for term in rule.head.args)
