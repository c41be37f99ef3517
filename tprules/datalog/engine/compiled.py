"""The compiled engine: stratified, semi-naive evaluation of a checked program, each rule
compiled to a Python function of nested loops over hash indexes (compiled_rules.py).

>>> from tprules.datalog.analysis import check_rules
>>> from tprules.datalog.lang.parser import parse_text
>>> prog = check_rules(parse_text('''
... .decl e(a: number, b: number)
... .input e
... .decl p(a: number, b: number)
... p(X, Y) :- e(X, Y).
... p(X, Z) :- p(X, Y), e(Y, Z).'''))
>>> sorted(Evaluator(prog).evaluate({"e": {(1, 2), (2, 3)}}).tuples("p"))
[(1, 2), (1, 3), (2, 3)]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import cast

from ...errors import RuleError
from ..analysis.checked import CheckedRules
from ..analysis.strata import Stratum, needed_strata
from ..lang import ast, values
from ..lang.values import EvaluationError
from .choice import choice_of
from .compiled_rules import RUNTIME_HELPERS, CompiledRule, Stats, compile_rule
from .model import Model
from .options import Capabilities


class ModelStats:
    """Sizes and index shapes of the relations below the stratum being compiled."""

    def __init__(self, model: Model):
        self.model = model

    def estimate(self, rel: str, cols: tuple[int, ...]) -> tuple[float, bool]:
        size = len(self.model.relations.get(rel, ()))
        if not cols:
            return float(size), False
        keys = self.model.distinct_keys(rel, cols)
        return (size / keys if keys else 0.0), keys == size


class Evaluator:
    """Evaluates a checked program over any facts, any number of times.

    Each stratum's rules are compiled when the stratum is about to run, with join orders
    chosen from the relations below it; compiled functions are reused while the
    generated source is the same.
    """

    capabilities = Capabilities(incremental=True, rounds=True)

    def __init__(self, checked: CheckedRules):
        self.checked = checked
        self._functions: dict[str, object] = {}
        self._namespace: dict = {}
        exec(compile(RUNTIME_HELPERS, "<tprules helpers>", "exec"), self._namespace)  # noqa: S102
        self.last_source: list[str] = []

    def source(self, stats: Stats | None = None) -> str:
        """The generated code of every rule (with neutral statistics unless given)."""
        return "\n".join(c.source for stratum in self.checked.strata for c in self._compile(stratum, stats))

    def _compile(self, stratum: Stratum, stats: Stats | None) -> list[CompiledRule]:
        rels = frozenset(stratum.relations)
        compiled = []
        for number, rule in enumerate(stratum.rules):
            if rule.is_fact:
                continue
            name = f"s{stratum.index}r{number}"
            compiled.append(compile_rule(rule, name, stats=stats, stratum=rels if stratum.recursive else frozenset()))
            if stratum.recursive:
                for position, lit in enumerate(rule.body):
                    if isinstance(lit, ast.Atom) and lit.rel in rels:
                        compiled.append(compile_rule(rule, f"{name}d{position}", lit.rel, position, stats, rels))
        return compiled

    def _function(self, compiled: CompiledRule):
        fn = self._functions.get(compiled.source)
        if fn is None:
            exec(compile(compiled.source, f"<rule {compiled.rule.pos}>", "exec"), self._namespace)  # noqa: S102
            fn = self._functions[compiled.source] = self._namespace[compiled.name]
        return fn

    def needed_strata(self, targets: Iterable[str] | None) -> list[Stratum]:
        return needed_strata(self.checked.strata, targets)

    @values.one_evaluation
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
            relations: dict[str, set] = {name: set() for name in self.checked.decls}
        else:
            relations = dict(base.relations)
        for name, tuples in facts.items():
            relations[name] = set(tuples)
        model = Model(relations, parent=base)
        self.last_source = []
        for stratum in self.needed_strata(targets):
            if only is not None and not (set(stratum.relations) & only):
                continue
            self._run_stratum(model, stratum, facts)
        return model

    def _run_stratum(self, model: Model, stratum: Stratum, facts: dict[str, set]) -> None:
        for rel in stratum.relations:
            # Facts written in rule files add to the given facts (an input relation may have both).
            written = {_fact_tuple(r) for r in stratum.rules if r.is_fact and r.head.rel == rel}
            model.relations[rel] = written | set(facts.get(rel, ()))
            model.forget(rel)
        if stratum.subsumptions and not stratum.recursive:
            self._run_subsumptive_once(model, stratum)
            return
        compiled = self._compile(stratum, ModelStats(model))
        self.last_source.extend(c.source for c in compiled)
        relations = model.relations
        decls = self.checked.decls
        if not stratum.recursive:
            for c in compiled:
                head = c.rule.head.rel
                derived = _call(self._runner(c, model), c, {})
                choice = choice_of(decls[head], relations[head])
                relations[head] |= derived if choice is None else set(choice.admit(derived - relations[head]))
            return
        deleting = self.deleting(stratum, ModelStats(model))
        if deleting:  # facts dominated by facts go before the first round
            self._delete(model, [c for c in deleting if c.delta is None])
        full = [c for c in compiled if c.delta is None]
        rounds = {rel: {t: 0 for t in relations[rel]} for rel in stratum.relations}
        delta: dict[str, set] = {rel: set() for rel in stratum.relations}
        for c in full:
            delta[c.rule.head.rel] |= _call(self._runner(c, model), c, {})
        deltas = [c for c in compiled if c.delta is not None]
        self.run_rounds(model, stratum, deltas, delta, rounds, 0, [c for c in deleting if c.delta is not None])
        model.rounds.update(rounds)

    def deleting(self, stratum: Stratum, stats: Stats | None) -> list[CompiledRule]:
        """The stratum's subsumptive clauses compiled: the whole version of each, and one
        semi-naive version for each atom of the stratum's relations (a tuple is dominated by
        a new one, or is new and dominated by any)."""
        rels = frozenset(stratum.relations)
        out = []
        for n, rule in enumerate(stratum.subsumptions):
            name = f"s{stratum.index}u{n}"
            out.append(compile_rule(rule, name, stats=stats, stratum=rels))
            for position, lit in enumerate(rule.body):
                if isinstance(lit, ast.Atom) and lit.rel in rels:
                    out.append(compile_rule(rule, f"{name}d{position}", lit.rel, position, stats, rels))
        self.last_source.extend(c.source for c in out)
        return out

    def _delete(self, model: Model, whole: list[CompiledRule]) -> None:
        for c in whole:
            gone = _call(self._runner(c, model), c, {})
            if gone:
                model.relations[c.rule.head.rel] -= gone
                model.forget(c.rule.head.rel)

    def _run_subsumptive_once(self, model: Model, stratum: Stratum) -> None:
        """A stratum no recursion reaches whose relation has subsumptive clauses: its rules,
        then the deletion of every dominated tuple, once."""
        plain = dataclasses.replace(stratum, subsumptions=())
        self._run_stratum(model, plain, {rel: model.relations[rel] for rel in stratum.relations})
        self._delete(model, [c for c in self.deleting(stratum, None) if c.delta is None])

    def _runner(self, compiled: CompiledRule, model: Model):
        return self._function(compiled)(model.relations, model.index, model.unique_index)

    def run_rounds(self, model: Model, stratum: Stratum, deltas: list[CompiledRule], delta: dict[str, set],
                   rounds: dict[str, dict], step: int, deleting: Sequence[CompiledRule] = ()) -> int:
        """Semi-naive rounds from `delta` (tuples derived, not yet added) to the fixpoint; returns the last step.

        Every rule's relations and indexes are looked up once (`_runner`), and each round
        only adds its new tuples to the indexes already built, so a round that derives one
        tuple costs a few microseconds (a recursion that adds one tuple per round runs a
        million rounds in seconds). `deleting`: the semi-naive versions of the stratum's
        subsumptive clauses; after each round adds its tuples, they find the tuples that a
        new tuple dominates and the new tuples that any dominates, which leave the relation,
        its indexes and the delta.
        """
        relations = model.relations
        # each semi-naive version reads the delta of one relation
        runners = [(c, cast(str, c.delta), c.rule.head.rel, self._runner(c, model)) for c in deltas]
        deleters = [(c, c.rule.head.rel, self._runner(c, model)) for c in deleting]
        rels = tuple(stratum.relations)
        model.forget_derived_all(rels)
        indexes = {rel: model.built_indexes(rel) for rel in rels}  # every index the runners read
        own = {rel: relations[rel] for rel in rels}
        choices = {rel: choice_of(self.checked.decls[rel], own[rel]) for rel in rels}
        while True:
            grew = False
            for rel in rels:
                fresh = delta[rel]
                fresh -= own[rel]
                choice = choices[rel]
                if fresh and choice is not None:
                    fresh = delta[rel] = set(choice.admit(fresh))
                if fresh:
                    grew = True
                    own[rel] |= fresh
                    for ix, key in indexes[rel]:
                        setdefault = ix.setdefault
                        for t in fresh:
                            setdefault(key(t), []).append(t)
                    rounds[rel].update(dict.fromkeys(fresh, step))
            if not grew:
                return step
            if deleters:
                _delete_dominated(deleters, delta, own, indexes, rounds)
            step += 1
            produced: dict[str, set] = {rel: set() for rel in rels}
            for c, read, head, run in runners:
                if delta[read]:
                    produced[head] |= _call(run, c, delta)
            delta = produced


def _delete_dominated(deleters, delta: dict[str, set], own: dict[str, set], indexes: dict, rounds: dict) -> None:
    """One round's deletions (see `run_rounds`): in place, so every runner sees them."""
    gone: dict[str, set] = {}
    for c, head, run in deleters:
        if delta[c.delta]:
            gone.setdefault(head, set()).update(_call(run, c, delta))
    for rel, dominated in gone.items():
        dominated &= own[rel]
        own[rel] -= dominated
        delta[rel] -= dominated
        for ix, key in indexes[rel]:
            for t in dominated:
                bucket = ix[key(t)]
                bucket.remove(t)
                if not bucket:  # an empty bucket would still answer `key in index`
                    del ix[key(t)]
        for t in dominated:
            rounds[rel].pop(t, None)


def _call(run, compiled: CompiledRule, delta) -> set:
    try:
        return run(delta)
    except (ZeroDivisionError, EvaluationError) as err:
        raise RuleError(f"{err if isinstance(err, EvaluationError) else 'division by zero'} while evaluating "
                        "this rule", compiled.rule.pos) from None


def _fact_tuple(rule: ast.Rule) -> tuple:
    from ..lang.constant import fact_values

    return fact_values(rule)
