"""The fast engine: stratified, semi-naive evaluation with set-at-a-time joins over numpy columns.

Every relation is an int64 array of unique rows; symbols are interned to ids. A rule is
evaluated as a table of variable bindings that grows literal by literal: a positive atom
is a sort-merge hash join (searchsorted over combined keys), a negation an anti-join, a
comparison or assignment a vectorised expression, an aggregate a correlated group-by
joined back. Semi-naive recursion reads one atom from the delta of the last round.

The result is a `ColumnarModel`: the same interface as `evaluate.Model`, decoding a
relation into Python tuples only when someone asks for it (proofs, verdicts).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from ..analysis.checks import outside_vars
from ..analysis.program import CheckedProgram
from ..analysis.strata import Stratum, needed_strata
from ..errors import RuleError
from ..lang import ast
from ..program.columns import Symbols, encode_rows
from . import values
from .choice import choice_of
from .column_model import ColumnarModel
from .column_values import DTYPES, TermValues, encode_typed, storage
from .compile import one_positive_atom
from .constant import fact_values, kind_of
from .keys import KeyIndex, anti_join_mask, dedupe_rows, distinct_rows, group_ids, joint_keys, unique_sorted
from .options import Capabilities

I64 = np.int64


class _Table:
    """Bindings of the variables seen so far: one array per variable, all of length n."""

    __slots__ = ("n", "cols")

    def __init__(self, n: int, cols: dict[str, np.ndarray]):
        self.n, self.cols = n, cols

    def take(self, index: np.ndarray) -> "_Table":
        return _Table(len(index), {v: a[index] for v, a in self.cols.items()})

    def where(self, mask: np.ndarray) -> "_Table":
        if mask.all():  # a filter that keeps every row (a negation that blocks nothing, say)
            return _Table(self.n, dict(self.cols))
        return self.take(np.flatnonzero(mask))


class _RuleRun:
    """Evaluates one body over the current relations into a table of bindings."""

    def __init__(self, engine: "ColumnarEngine", arrays: dict[str, np.ndarray], delta: dict[str, np.ndarray],
                 rule: ast.Rule, stratum: frozenset[str]):
        self.engine, self.arrays, self.delta, self.rule = engine, arrays, delta, rule
        self.stratum = stratum
        self.symbols = engine.symbols
        self.fresh = 0
        self.terms = TermValues(engine.symbols, lambda why: RuleError(f"{why} while evaluating this rule", rule.pos))

    # -- values ---------------------------------------------------------------------

    def const(self, term) -> int:
        return self.terms.const(term)

    def value(self, term: ast.Term, table: _Table):
        """The term's values over the table (an array of its type, or a scalar)."""
        return self.terms.value(term, table.cols, table.n)

    def stored(self, term: ast.Term, table: _Table) -> np.ndarray:
        """The term's values as an int64 column as long as the table."""
        return self.terms.stored(term, table.cols, table.n)

    # -- literals -------------------------------------------------------------------

    def rows_of(self, atom: ast.Atom, from_delta: bool) -> np.ndarray:
        rows = self.delta[atom.rel] if from_delta else self.arrays[atom.rel]
        mask = None
        first: dict[str, int] = {}
        for i, term in enumerate(atom.args):
            test = None
            if not isinstance(term, (ast.Var, ast.Wildcard)) and not ast.term_vars(term):
                test = rows[:, i] == self.const(term)
            elif isinstance(term, ast.Var):
                if term.name in first:
                    test = rows[:, i] == rows[:, first[term.name]]
                else:
                    first[term.name] = i
            if test is not None:
                mask = test if mask is None else mask & test
        return rows if mask is None else rows[mask]

    def join_atom(self, table: _Table, atom: ast.Atom, from_delta: bool, rowid: str | None = None) -> _Table:
        rows = self.rows_of(atom, from_delta)
        shared, new, exprs = [], {}, []
        for i, term in enumerate(atom.args):
            match term:
                case ast.Var(name) if name in table.cols:
                    shared.append((i, table.cols[name]))
                case ast.Var(name) if name not in new:
                    new[name] = i
                case ast.Var():
                    pass
                case ast.Wildcard():
                    pass
                case _ if ast.term_vars(term):
                    exprs.append((i, term))
        for i, term in exprs:  # an argument computed from bound variables is a key column
            shared.append((i, self.stored(term, table)))
        if not new and rowid is None:  # an existence test: keep the rows that match, never multiply them
            if not shared:
                return table if len(rows) else table.take(np.zeros(0, dtype=I64))
            index = self.key_index(atom, rows, tuple(i for i, _ in shared), from_delta)
            return table.where(index.contains([v for _, v in shared]))
        if shared:
            index = self.key_index(atom, rows, tuple(i for i, _ in shared), from_delta)
            li, ri = index.join([v for _, v in shared])
        else:  # a cross product (rare: rules are usually connected)
            index = None
            li = np.repeat(np.arange(table.n), len(rows))
            ri = np.tile(np.arange(len(rows)), table.n)
        if index is not None and index.unique and len(li) == table.n:  # a lookup that finds every row: no copy
            out = _Table(table.n, dict(table.cols))
        else:
            out = table.take(li)
        for name, i in new.items():
            out.cols[name] = rows[ri, i]
        if rowid is not None:
            out.cols[rowid] = rows[ri] if rows.shape[1] else np.zeros((len(ri), 1), dtype=I64)
        return out

    def negate(self, table: _Table, atom: ast.Atom) -> _Table:
        rows = self.rows_of(atom, False)
        keys = [(i, t) for i, t in enumerate(atom.args) if isinstance(t, ast.Var) or
                (not isinstance(t, ast.Wildcard) and ast.term_vars(t))]
        if not keys:
            return table if len(rows) == 0 else table.take(np.zeros(0, dtype=I64))
        left_cols = [self.stored(t, table) for _, t in keys]
        index = self.key_index(atom, rows, tuple(i for i, _ in keys), False)
        return table.where(~index.contains(left_cols))

    def key_index(self, atom: ast.Atom, rows: np.ndarray, cols: tuple[int, ...], from_delta: bool) -> KeyIndex:
        """A sorted key index of an atom's rows on some columns, reused while the relation is unchanged."""
        if from_delta or atom.rel in self.stratum:
            return KeyIndex([rows[:, i] for i in cols])
        filters = tuple((i, repr(t)) for i, t in enumerate(atom.args) if not isinstance(t, (ast.Var, ast.Wildcard)))
        repeats = tuple(t.name for t in atom.args if isinstance(t, ast.Var))
        key = (atom.rel, cols, filters, repeats if len(set(repeats)) < len(repeats) else ())
        base = self.arrays[atom.rel]
        cached = self.engine.indexes.get(key)
        if cached is not None and cached[0] is base:
            return cached[1]
        index = KeyIndex([rows[:, i] for i in cols], views=rows is base)  # `base` lives as long as the index
        self.engine.indexes[key] = (base, index)
        return index

    def compare(self, table: _Table, lit: ast.Comparison) -> _Table:
        left, right = lit.left, lit.right
        for agg in ast.literal_aggregates(lit):
            table, name = self.aggregate(table, agg)
            left, right = ast.replace_term(left, agg, name), ast.replace_term(right, agg, name)
        if lit.op == "=":
            for var, other in ((left, right), (right, left)):
                if isinstance(var, ast.Var) and var.name not in table.cols:
                    if isinstance(other, ast.Functor) and other.name == "range":  # a generator
                        rows, found = self.terms.generate(other, table.cols, table.n)
                        table = table.take(rows)
                        table.cols[var.name] = storage(found, kind_of(other), table.n)
                    else:
                        table.cols[var.name] = self.stored(other, table).copy()
                    return table
            for var, other in ((left, right), (right, left)):
                if isinstance(other, ast.Functor) and other.name == "range":  # a bound value in a range
                    rows, found = self.terms.generate(other, table.cols, table.n)
                    hit = storage(found, kind_of(other), len(rows)) == self.stored(var, table)[rows]
                    return table.take(np.unique(rows[hit]))
        return table.where(self.terms.mask(lit, left, right, table.cols, table.n))

    def aggregate(self, table: _Table, agg: ast.Aggregate) -> tuple[_Table, ast.Var]:
        """Evaluate an aggregate for every distinct binding of its outer variables."""
        outer = sorted(ast.aggregate_vars(agg) & outside_vars(self.rule.head, self.rule.body, agg) & set(table.cols))
        self.fresh += 1
        result = ast.Var(f".agg{self.fresh}", agg.pos, kind_of(agg))
        if outer:
            first = dedupe_rows([table.cols[v] for v in outer])
            start = _Table(len(first), {v: table.cols[v][first] for v in outer})
        else:
            start = _Table(1, {})
        single = one_positive_atom(agg.body)
        rowid = "#row" if single else None
        sub = self.body(start, agg.body, None, None, rowid=rowid)
        if not sub.n:  # every group is empty (and a body that emptied early binds no columns)
            if agg.func in ("count", "sum"):  # 0 is stored as 0 in every type
                table.cols[result.name] = np.zeros(table.n, dtype=I64)
                return table, result
            table = table.where(np.zeros(table.n, dtype=bool))
            table.cols[result.name] = np.zeros(0, dtype=I64)
            return table, result
        local = sorted(ast.aggregate_vars(agg) - set(outer))
        witness = [sub.cols[v] for v in outer]
        if single:
            witness += [sub.cols["#row"][:, i] for i in range(sub.cols["#row"].shape[1])]
        else:
            witness += [sub.cols[v] for v in local if v in sub.cols]
        if sub.n:
            sub = sub.take(dedupe_rows(witness) if witness else np.zeros(1, dtype=I64))
        kind = kind_of(agg.target) if agg.target is not None else "number"
        values = (np.ones(sub.n, dtype=I64) if agg.target is None
                  else np.broadcast_to(np.asarray(self.value(agg.target, sub), dtype=DTYPES[kind]), (sub.n,)))
        group_keys, table_keys = joint_keys([sub.cols[v] for v in outer], [table.cols[v] for v in outer]) if outer \
            else (np.zeros(sub.n, dtype=I64), np.zeros(table.n, dtype=I64))
        ids, uniques = group_ids(group_keys)
        totals = storage(_fold(agg.func, ids, values, len(uniques)), kind_of(agg), len(uniques))
        position = np.searchsorted(uniques, table_keys)
        position = np.minimum(position, max(len(uniques) - 1, 0))
        found = (uniques[position] == table_keys) if len(uniques) else np.zeros(table.n, dtype=bool)
        if agg.func in ("count", "sum"):  # an empty group counts and sums to 0
            table.cols[result.name] = np.where(found, totals[position] if len(uniques) else 0, 0).astype(I64)
            return table, result
        table = table.where(found)
        table.cols[result.name] = totals[position[found]]
        return table, result

    # -- bodies ---------------------------------------------------------------------

    def body(self, table: _Table, body, head: ast.Atom | None, delta_index: int | None,
             rowid: str | None = None) -> _Table:
        pending = list(range(len(body)))
        # A rule's body keeps only the columns that its head or a literal still to come reads:
        # every join then copies fewer of them (a body's rows are never deduplicated, so
        # dropping a column changes no count).
        uses = [_uses(lit) for lit in body] if head is not None and rowid is None else None
        kept = set().union(*(ast.term_vars(t) | _aggregate_vars(t) for t in head.args)) if uses else set()
        if delta_index is not None:
            pending.remove(delta_index)
            table = self.join_atom(table, body[delta_index], True)
        while pending and table.n:
            if uses is not None:
                table = _only(table, kept.union(*(uses[i] for i in pending)))
            bound = set(table.cols)
            # Filters first; a negation only after the lookups (atoms that cannot add rows)
            # that bind what a comparison waits for: `N < M` usually filters more cheaply.
            ready = next((i for i in pending if isinstance(body[i], ast.Comparison) and _ready(body[i], bound, self)),
                         None)
            if ready is None:
                waiting = {v for i in pending if isinstance(body[i], ast.Comparison)
                           for v in ast.literal_vars(body[i])} - bound
                ready = next((i for i in pending if isinstance(body[i], ast.Atom) and waiting & ast.literal_vars(body[i])
                              and self.is_lookup(body[i], bound)), None)
            if ready is None:
                ready = next((i for i in pending if isinstance(body[i], ast.Negation) and _ready(body[i], bound, self)),
                             None)
            if ready is None:
                atoms = [i for i in pending if isinstance(body[i], ast.Atom)]
                ready = min(atoms, key=lambda i: self._cost(body[i], bound, i))
            pending.remove(ready)
            lit = body[ready]
            match lit:
                case ast.Atom():
                    table = self.join_atom(table, lit, False, rowid if rowid else None)
                case ast.Negation(atom):
                    table = self.negate(table, atom)
                case ast.Comparison():
                    table = self.compare(table, lit)
        if pending:  # the table emptied early: what is left cannot add rows
            return _Table(0, {})
        return table

    def is_lookup(self, atom: ast.Atom, bound: set[str]) -> bool:
        """Is the atom bound on a key of its relation (at most one row per binding), so
        that joining it cannot add rows? Only for relations that this stratum does not change."""
        if atom.rel in self.stratum or any(not isinstance(t, (ast.Var, ast.Wildcard)) for t in atom.args):
            return False
        cols = tuple(i for i, t in enumerate(atom.args) if isinstance(t, ast.Var) and t.name in bound)
        if not cols or len({t.name for t in atom.args if isinstance(t, ast.Var)}) < \
                sum(isinstance(t, ast.Var) for t in atom.args):
            return False
        return self.key_index(atom, self.arrays[atom.rel], cols, False).unique

    def _cost(self, atom: ast.Atom, bound: set[str], position: int) -> tuple:
        connected = any(isinstance(t, ast.Var) and t.name in bound for t in atom.args) or not bound
        return (0 if connected else 1, len(self.arrays[atom.rel]), position)

    def outer_of(self, agg: ast.Aggregate) -> set[str]:
        return ast.aggregate_vars(agg) & outside_vars(self.rule.head, self.rule.body, agg)


def _uses(lit) -> set[str]:
    """The variables a literal reads, an aggregate's (its outer ones among them) included."""
    return ast.literal_vars(lit).union(*(ast.aggregate_vars(agg) for agg in ast.literal_aggregates(lit)))


def _aggregate_vars(term) -> set[str]:
    return set().union(*(ast.aggregate_vars(agg) for agg in ast.aggregates_in(term)))


def _only(table: _Table, live: set[str]) -> _Table:
    """The table without the columns nothing reads any more."""
    if live.issuperset(table.cols):
        return table
    return _Table(table.n, {v: a for v, a in table.cols.items() if v in live})


def _ready(lit, bound: set[str], run: _RuleRun) -> bool:
    match lit:
        case ast.Negation(atom):
            return ast.literal_vars(atom) <= bound
        case ast.Comparison(op, left, right):
            for agg in ast.literal_aggregates(lit):
                if not run.outer_of(agg) <= bound:
                    return False
            if ast.term_vars(left) <= bound and ast.term_vars(right) <= bound:
                return True
            if op == "=":
                return any(isinstance(v, ast.Var) and v.name not in bound and ast.term_vars(o) <= bound
                           for v, o in ((left, right), (right, left)))
    return False


def _fold(func: str, ids: np.ndarray, values: np.ndarray, groups: int) -> np.ndarray:
    """Each group's aggregate, in the values' own type (a mean is a float)."""
    if func == "count":
        return np.bincount(ids, minlength=groups).astype(I64)
    if func == "sum":
        totals = np.zeros(groups, dtype=values.dtype)
        np.add.at(totals, ids, values)
        return totals
    if func == "mean":
        totals = np.zeros(groups, dtype=np.float64)
        np.add.at(totals, ids, values.astype(np.float64))
        return totals / np.bincount(ids, minlength=groups)
    start = values.max() if func == "min" else values.min()  # every group has a value
    totals = np.full(groups, start, dtype=values.dtype)
    (np.minimum if func == "min" else np.maximum).at(totals, ids, values)
    return totals


class ColumnarEngine:
    """Evaluates a checked program over numpy columns; same `evaluate` as the other engines."""

    capabilities = Capabilities(incremental=True, rounds=True)

    def __init__(self, checked: CheckedProgram, symbols: Symbols | None = None):
        self.checked = checked
        self.symbols = symbols if symbols is not None else Symbols()
        for rule in checked.program.rules:  # every constant has its id before any stratum runs
            for value in ast.string_constants(rule):
                self.symbols.one(value)
        self.indexes: dict[tuple, tuple[np.ndarray, KeyIndex]] = {}  # sorted keys of unchanged relations
        self._tuples = None  # the compiled engine, for recursive strata whose rounds are small
        self._narrowable: dict[str, bool] = {}

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
        given, decoded = [], {}
        encoded = facts.rows if getattr(facts, "symbols", None) is self.symbols else None
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
            model.relations.decoded[rel] = tuples if isinstance(tuples, set) else set(tuples)
        given_arrays = {rel: arrays[rel] for rel in given}
        for stratum in needed_strata(self.checked.strata, targets):
            if only is not None and not (set(stratum.relations) & only):
                continue
            self._run_stratum(model, stratum, given_arrays)
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
                model.relations.decoded.pop(rel, None)
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
        produced = {rel: [] for rel in rels}
        choices = {rel: choice_of(self.checked.decls[rel], map(tuple, arrays[rel].tolist())) for rel in rels}
        for rule in rules:
            produced[rule.head.rel].append(self._fire(rule, arrays, {}, None, rels, unique=False))
        # What no round reads whole (a linear rule reads its relation only as the delta, and
        # `_Seen` keeps the keys) grows by a list of rounds, joined once: copying the whole
        # relation every round is quadratic in the rounds (16.7 million `escapes` tuples
        # in about 140 rounds on a DeepSeek-V3-sized program).
        grown = {rel: [] for rel in rels if seen[rel].fixed and choices[rel] is None} if _linear(rules, rels) else {}
        step, small = 0, 0
        while True:
            if small >= _SMALL_ROUNDS:  # rounds of a few tuples: tuple at a time from here on
                _join_rounds(arrays, grown)
                self._finish_by_tuples(model, stratum, produced, rounds, step)
                break
            delta = {}
            for rel in rels:
                new = np.concatenate(produced[rel]) if produced[rel] else arrays[rel][:0]
                new = seen[rel].fresh(new, arrays[rel])
                if choices[rel] is not None and len(new):
                    new = np.asarray(choices[rel].admit(map(tuple, new.tolist())), dtype=I64).reshape(-1, new.shape[1])
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
        found = {rel: [] for rel in rels}
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
        admitted = choice_of(self.checked.decls[rel], existing).admit(new)
        return np.asarray(admitted, dtype=I64).reshape(-1, rows.shape[1])

    def _finish_by_tuples(self, model: ColumnarModel, stratum: Stratum, produced: dict[str, list[np.ndarray]],
                          rounds: dict[str, list[np.ndarray]], step: int) -> None:
        """Run the rest of a recursive stratum on the compiled engine's tuple-at-a-time
        rounds, then store what it derived back as rows.

        A numpy round costs a millisecond whatever its size; when rounds derive a handful
        of tuples each (a counter, a chain), most of that is set-up, and a million rounds
        would take a quarter of an hour. The compiled engine's round costs microseconds.
        """
        from .evaluate import Evaluator, Model, ModelStats

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
        derived = {rel: {} for rel in rels}
        if deleting:  # the rounds delete too: every relation goes back whole, with its rounds
            for rel in rels:
                derived[rel] = dict(zip(model.decode_rows(rel, arrays[rel]), np.concatenate(rounds[rel]).tolist()))
        self._tuples.run_rounds(tuples, stratum, compiled, delta, derived, step, deleting)
        for rel in rels:
            if deleting:
                arrays[rel] = self.encode(rel, list(derived[rel]))
                rounds[rel] = [np.fromiter(derived[rel].values(), dtype=I64, count=len(derived[rel]))]
                model.relations.decoded.pop(rel, None)
            elif derived[rel]:
                new = list(derived[rel])
                arrays[rel] = np.concatenate([arrays[rel], self.encode(rel, new)])
                rounds[rel].append(np.fromiter(derived[rel].values(), dtype=I64, count=len(new)))
                model.relations.decoded.pop(rel, None)

    def _fire(self, rule: ast.Rule, arrays, delta, delta_index: int | None, stratum=frozenset(),
              unique: bool = True) -> np.ndarray:
        """The head rows one rule derives (with repeats unless `unique`)."""
        run = _RuleRun(self, arrays, delta, rule, stratum)
        table = run.body(_Table(1, {}), rule.body, rule.head, delta_index)
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
