"""The fast engine: stratified, semi-naive evaluation with set-at-a-time joins over numpy columns.

Every relation is an int64 array of unique rows; symbols are interned to ids. A rule's
body is evaluated as a table of variable bindings that grows literal by literal
(datalog/engine/rule_run.py: joins, anti-joins, vectorised comparisons, aggregates joined back).
Semi-naive recursion reads one atom from the delta of the last round; this module runs
the strata and their rounds.

The result is a `ColumnarModel`: the same interface as `model.Model`, decoding a
relation into Python tuples only when someone asks for it (proofs, verdicts).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import numpy as np

from ..analysis.checked import CheckedRules
from ..analysis.strata import Stratum, needed_strata
from ..facts.columns import Symbols, encode_rows
from ..lang import ast, values
from ..lang.constant import fact_values
from .choice import choice_of
from .column_values import encode_typed
from .fast_model import ColumnarModel
from .keys import KeyIndex, anti_join_mask, distinct_rows, joint_keys, unique_sorted
from .model import Model
from .options import Capabilities
from .rule_run import RuleRun, Table

if TYPE_CHECKING:
    from .compiled import Evaluator

I64 = np.int64


class ColumnarEngine:
    """Evaluates a checked program over numpy columns; same `evaluate` as the other engines."""

    capabilities = Capabilities(incremental=True, rounds=True)

    def __init__(self, checked: CheckedRules, symbols: Symbols | None = None):
        self.checked = checked
        self.symbols = symbols if symbols is not None else Symbols()
        for rule in checked.program.rules:  # every constant has its id before any stratum runs
            for value in ast.string_constants(rule):
                self.symbols.one(value)
        self.indexes: dict[tuple, tuple[np.ndarray, KeyIndex]] = {}  # sorted keys of unchanged relations
        self._tuples: Evaluator | None = None  # the compiled engine, for recursive strata whose rounds are small
        self._narrowable: dict[str, bool] = {}
        # An engine whose evaluation is not followed by others (`check`): the key index of a
        # relation no later stratum reads is dropped as the strata run (a third of what a
        # 70b-sized check holds at its end); the planner's rounds keep and reuse them.
        self.one_pass = False

    def encode(self, rel: str, tuples) -> np.ndarray:
        types = self.checked.decls[rel].types
        if any(t in ("unsigned", "float") for t in types):
            return encode_typed(self.symbols, types, tuples)
        return encode_rows(self.symbols, types, tuples)

    @values.one_evaluation
    def evaluate(self, facts: Mapping[str, set], targets: Iterable[str] | None = None,
                 base: ColumnarModel | None = None, only: frozenset[str] | None = None) -> ColumnarModel:
        """`facts` may be a fact base's `relations` in this engine's symbol table, whose
        rows are taken as they are (nothing is encoded or decoded again)."""
        decls = self.checked.decls
        if base is None:
            arrays = {rel: np.zeros((0, d.arity), dtype=I64) for rel, d in decls.items()}
        else:
            arrays = dict(base.arrays)
        given: list[str] = []
        decoded: dict[str, set] = {}
        encoded = getattr(facts, "rows", None) if getattr(facts, "symbols", None) is self.symbols else None
        for rel in facts:
            if rel in decls:
                rows = encoded(rel) if encoded is not None else None
                if rows is None:
                    tuples = decoded[rel] = facts[rel]
                    rows = self.encode(rel, tuples)
                arrays[rel] = rows
                given.append(rel)
        model = ColumnarModel(self.checked, self.symbols, arrays, parent=base)
        for rel, tuples in decoded.items():  # inputs decode to the very sets given
            model.decoded[rel] = tuples if isinstance(tuples, set) else set(tuples)
        given_arrays = {rel: arrays[rel] for rel in given}
        strata = [s for s in needed_strata(self.checked.strata, targets)
                  if only is None or set(s.relations) & only]
        last_read = {rel: k for k, stratum in enumerate(strata) for rel in _read_by(stratum)} if self.one_pass else {}
        for k, stratum in enumerate(strata):
            self._run_stratum(model, stratum, given_arrays)
            if self.one_pass:
                for key in [key for key in self.indexes if last_read.get(key[0], -1) <= k]:
                    del self.indexes[key]
        return model

    def _facts_of(self, stratum: Stratum, rel: str) -> np.ndarray:
        rows = [fact_values(r) for r in stratum.rules if r.is_fact and r.head.rel == rel]
        return dedupe(self.encode(rel, rows))

    def _run_stratum(self, model: ColumnarModel, stratum: Stratum, given: dict[str, np.ndarray]) -> None:
        arrays = model.arrays
        for rel in stratum.relations:
            arrays[rel] = self._facts_of(stratum, rel)
            if rel in given:  # facts written in rule files add to the given facts (an input may have both)
                arrays[rel] = dedupe(np.concatenate([arrays[rel], given[rel]]))
                model.decoded.pop(rel, None)
        rules = [r for r in stratum.rules if not r.is_fact]
        if not stratum.recursive:
            for rule in rules:
                fired = self._fire(rule, arrays, {}, None)
                head = rule.head.rel
                if self.checked.decls[head].choice:
                    fired = self._chosen(head, fired, arrays[head])
                    arrays[head] = dedupe(np.concatenate([arrays[head], fired]))
                else:  # `fired` is distinct, in key order: as it would be after `dedupe` once more
                    arrays[head] = dedupe(np.concatenate([arrays[head], fired])) if len(arrays[head]) else fired
            if stratum.subsumptions:  # no recursion: the dominated tuples go once, after the rules
                self._delete_dominated(stratum, arrays, None, None)
            for rel in stratum.relations:
                arrays[rel] = self.narrow(rel, arrays[rel])
            return
        rels = frozenset(stratum.relations)
        rounds = {rel: [np.zeros(len(arrays[rel]), dtype=I64)] for rel in rels}
        shrinks = bool(stratum.subsumptions)  # a deleted tuple may come back: `_Seen` compares afresh
        seen = {rel: _Seen(self.checked.decls[rel].types, len(self.symbols.names), arrays[rel], shrinks)
                for rel in rels}
        if shrinks:  # facts dominated by facts go before the first round
            self._delete_dominated(stratum, arrays, None, rounds)
        produced: dict[str, list[np.ndarray]] = {rel: [] for rel in rels}
        choices = {rel: choice_of(self.checked.decls[rel], map(tuple, arrays[rel].tolist())) for rel in rels}
        for rule in rules:
            produced[rule.head.rel].append(self._fire(rule, arrays, {}, None, rels, unique=False))
        # What no round reads whole (a linear rule reads its relation only as the delta, and
        # `_Seen` keeps the keys) grows by a list of rounds, joined once: copying the whole
        # relation every round is quadratic in the rounds (16.7 million `escapes` tuples
        # in about 140 rounds on a DeepSeek-V3-sized program).
        grown: dict[str, list[np.ndarray]] = \
            {rel: [] for rel in rels if seen[rel].fixed and choices[rel] is None} if _linear(rules, rels) else {}
        step, small = 0, 0
        while True:
            if small >= _SMALL_ROUNDS:  # rounds of a few tuples: tuple at a time from here on
                _join_rounds(arrays, grown)
                self._finish_by_tuples(model, stratum, produced, rounds, step)
                break
            delta = {}
            for rel in rels:
                new = np.concatenate(produced[rel]) if produced[rel] else arrays[rel][:0]
                new = self.narrow(rel, seen[rel].fresh(new, arrays[rel]))  # the next round joins narrow columns
                choice = choices[rel]
                if choice is not None and len(new):
                    new = np.asarray(choice.admit(map(tuple, new.tolist())), dtype=I64).reshape(-1, new.shape[1])
                delta[rel] = new
                if rel in grown:
                    grown[rel].append(new)
                else:
                    arrays[rel] = np.concatenate([arrays[rel], new])
                rounds[rel].append(np.full(len(new), step, dtype=I64))
            if shrinks and any(len(d) for d in delta.values()):
                self._delete_dominated(stratum, arrays, delta, rounds)
            if not any(len(d) for d in delta.values()):
                break
            small = small + 1 if sum(len(d) for d in delta.values()) <= _SMALL_DELTA else 0
            step += 1
            produced = {rel: [] for rel in rels}
            for rule in rules:
                for position, lit in enumerate(rule.body):
                    if isinstance(lit, ast.Atom) and lit.rel in rels and len(delta[lit.rel]):
                        produced[rule.head.rel].append(self._fire(rule, arrays, delta, position, rels, unique=False))
        seen.clear()  # (its keys go before the rounds are joined: less memory at once)
        _join_rounds(arrays, grown)
        for rel in rels:
            model.round_arrays[rel] = narrowest(np.concatenate(rounds[rel]))
            arrays[rel] = self.narrow(rel, arrays[rel])

    def _delete_dominated(self, stratum: Stratum, arrays, delta: dict | None, rounds: dict | None) -> None:
        """Delete every tuple a subsumptive clause finds dominated, from the relation (and
        its delta and round numbers). With `delta` (semi-naive), only what a new tuple
        dominates and the new tuples any tuple dominates; without, every dominated tuple."""
        rels = frozenset(stratum.relations)
        found: dict[str, list[np.ndarray]] = {rel: [] for rel in rels}
        for rule in stratum.subsumptions:
            if delta is None:
                found[rule.head.rel].append(self._fire(rule, arrays, {}, None, rels, unique=False))
                continue
            for position, lit in enumerate(rule.body):
                if isinstance(lit, ast.Atom) and lit.rel in rels and len(delta[lit.rel]):
                    found[rule.head.rel].append(self._fire(rule, arrays, delta, position, rels, unique=False))
        for rel, parts in found.items():
            gone = np.concatenate(parts) if parts else arrays[rel][:0]
            if not len(gone):
                continue
            keep = _absent(arrays[rel], gone)
            arrays[rel] = arrays[rel][keep]
            if rounds is not None:
                rounds[rel] = [np.concatenate(rounds[rel])[keep]]
            if delta is not None:
                delta[rel] = delta[rel][_absent(delta[rel], gone)]

    def narrow(self, rel: str, rows: np.ndarray) -> np.ndarray:
        """A derived relation's rows in the narrowest integer type that holds them (symbol ids
        and numbers; an unsigned or a float column keeps its 64 bits). Values are computed
        in int64 (column_values.load widens a column), only stored narrower."""
        if rows.dtype != I64 or not self._narrowable.setdefault(rel, all(
                t in ("symbol", "number") for t in self.checked.decls[rel].types)):
            return rows
        return narrowest(rows)

    def _chosen(self, rel: str, fired: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """The fired rows a choice-domain admits (stored values stand for values: equal iff equal)."""
        existing = set(map(tuple, rows.tolist()))
        new = set(map(tuple, dedupe(fired).tolist())) - existing
        choice = choice_of(self.checked.decls[rel], existing)
        assert choice is not None  # asked only of a relation with a choice-domain
        admitted = choice.admit(new)
        return np.asarray(admitted, dtype=I64).reshape(-1, rows.shape[1])

    def _finish_by_tuples(self, model: ColumnarModel, stratum: Stratum, produced: dict[str, list[np.ndarray]],
                          rounds: dict[str, list[np.ndarray]], step: int) -> None:
        """Run the rest of a recursive stratum on the compiled engine's tuple-at-a-time
        rounds, then store what it derived back as rows.

        A numpy round costs a millisecond whatever its size; when rounds derive a handful
        of tuples each (a counter, a chain), most of that is set-up, and a million rounds
        would take a quarter of an hour. The compiled engine's round costs microseconds.
        """
        from .compiled import Evaluator, ModelStats

        if self._tuples is None:
            self._tuples = Evaluator(self.checked)
        arrays, rels = model.arrays, stratum.relations
        read = {lit.rel for rule in stratum.rules + stratum.subsumptions for lit in _all_atoms(rule.body)}
        relations = {rel: set(model.decode_rows(rel, arrays[rel])) for rel in rels}
        relations.update({rel: model.relations[rel] for rel in read - set(rels)})
        tuples = Model(relations)
        delta = {rel: set(model.decode_rows(rel, np.concatenate(produced[rel]))) if produced[rel] else set()
                 for rel in rels}
        stats = ModelStats(tuples)
        compiled = [c for c in self._tuples._compile(stratum, stats) if c.delta is not None]
        deleting = [c for c in self._tuples.deleting(stratum, stats) if c.delta is not None]
        derived: dict[str, dict] = {rel: {} for rel in rels}
        if deleting:  # the rounds delete too: every relation goes back whole, with its rounds
            for rel in rels:
                derived[rel] = dict(zip(model.decode_rows(rel, arrays[rel]), np.concatenate(rounds[rel]).tolist()))
        self._tuples.run_rounds(tuples, stratum, compiled, delta, derived, step, deleting)
        for rel in rels:
            if deleting:
                arrays[rel] = self.encode(rel, list(derived[rel]))
                rounds[rel] = [np.fromiter(derived[rel].values(), dtype=I64, count=len(derived[rel]))]
                model.decoded.pop(rel, None)
            elif derived[rel]:
                new = list(derived[rel])
                arrays[rel] = np.concatenate([arrays[rel], self.encode(rel, new)])
                rounds[rel].append(np.fromiter(derived[rel].values(), dtype=I64, count=len(new)))
                model.decoded.pop(rel, None)

    def _fire(self, rule: ast.Rule, arrays, delta, delta_index: int | None, stratum=frozenset(),
              unique: bool = True) -> np.ndarray:
        """The head rows one rule derives (with repeats unless `unique`)."""
        run = RuleRun(self, arrays, delta, rule, stratum)
        table = run.body(Table(1, {}), rule.body, rule.head, delta_index)
        arity = rule.head.arity
        if not table.n:
            return np.zeros((0, arity), dtype=I64)
        if arity == 0:
            return np.zeros((1, 0), dtype=I64)
        columns = [run.stored(t, table) for t in rule.head.args]
        rows = np.stack(columns, axis=1)
        return dedupe(rows) if unique else rows


class _Seen:
    """The keys of a relation growing in a recursive stratum, kept sorted across rounds.

    A relation of symbols only gets one key encoding for the whole stratum (symbol ids are
    fixed while it runs), so each round merges its new keys in instead of sorting
    everything again. Relations with number columns, and relations that lose tuples
    (`shrinks`: subsumption), are compared afresh each round.
    """

    def __init__(self, types: tuple[str, ...], symbols: int, rows: np.ndarray, shrinks: bool = False):
        self.fixed = (not shrinks and bool(types) and all(t == "symbol" for t in types)
                      and symbols ** len(types) < (1 << 62))
        self.base = max(symbols, 1)
        # sorted runs of distinct keys, each at most half the one before: a round's keys are
        # a run, and runs merge as they grow (O(log n) of them; a merge of two runs is the
        # stable sort's linear pass), so no round sorts every key seen so far again
        self.runs = [np.sort(self.keys(rows))] if self.fixed else []

    def keys(self, rows: np.ndarray) -> np.ndarray:
        keys = np.zeros(len(rows), dtype=I64)
        for i in range(rows.shape[1]):
            keys = keys * self.base + rows[:, i]
        return keys

    def fresh(self, new: np.ndarray, old: np.ndarray) -> np.ndarray:
        """The distinct rows of `new` that `old` does not hold yet (and remember them)."""
        if not self.fixed:
            new = dedupe(new)
            if new.shape[1] == 0:
                return new[:0] if len(old) else new
            left, right = joint_keys(list(new.T), list(old.T))
            return new[anti_join_mask(left, right)]
        keys, first, _ = unique_sorted(self.keys(new))
        for run in self.runs:
            if len(run) and len(keys):
                position = np.minimum(np.searchsorted(run, keys), len(run) - 1)
                keep = run[position] != keys
                keys, first = keys[keep], first[keep]
        if len(keys):
            runs = self.runs
            runs.append(keys)
            while len(runs) > 1 and len(runs[-2]) <= 2 * len(runs[-1]):
                last = runs.pop()
                runs[-1] = np.sort(np.concatenate([runs[-1], last]), kind="stable")
        return new[np.sort(first)]


# A recursive stratum moves to tuple-at-a-time rounds after this many rounds in a row
# that derive at most this many tuples in all.
_SMALL_ROUNDS, _SMALL_DELTA = 8, 16


def _linear(rules: list[ast.Rule], rels: frozenset) -> bool:
    """Does every rule read the stratum's relations in one atom at most (only ever its delta)?"""
    return all(sum(lit.rel in rels for lit in _all_atoms(rule.body)) <= 1 for rule in rules)


def _join_rounds(arrays: dict, grown: dict) -> None:
    """Each relation grown by a list of rounds, whole again (and its list emptied)."""
    for rel, parts in grown.items():
        if parts:
            arrays[rel] = np.concatenate([arrays[rel], *parts])
            parts.clear()


def _read_by(stratum: Stratum) -> set[str]:
    """The relations a stratum's rules read."""
    return {lit.rel for rule in (*stratum.rules, *stratum.subsumptions) for lit in _all_atoms(rule.body)}


def _all_atoms(body) -> list[ast.Atom]:
    """Every atom a body reads: positive, negated, and inside aggregates."""
    found = []
    for lit in body:
        match lit:
            case ast.Atom():
                found.append(lit)
            case ast.Negation(atom):
                found.append(atom)
        for agg in ast.literal_aggregates(lit):
            found.extend(_all_atoms(agg.body))
    return found


def _absent(rows: np.ndarray, gone: np.ndarray) -> np.ndarray:
    """True for each row that is not one of `gone`'s."""
    left, right = joint_keys(list(rows.T), list(gone.T))
    return anti_join_mask(left, right)


def narrowest(values: np.ndarray) -> np.ndarray:
    """int64 values as int32 (or int16) when they all fit: half the memory or less."""
    if values.dtype != I64 or values.size == 0:
        return values
    low, high = int(values.min()), int(values.max())
    for narrow in (np.int16, np.int32):
        info = np.iinfo(narrow)
        if info.min <= low and high <= info.max:
            return values.astype(narrow)
    return values


def dedupe(rows: np.ndarray) -> np.ndarray:
    if len(rows) < 2:
        return rows
    if rows.shape[1] == 0:
        return rows[:1]
    return distinct_rows(rows)
