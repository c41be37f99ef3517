"""A rule body evaluated set-at-a-time (the fast engine's joins, datalog/engine/fast.py): a
table of variable bindings that grows literal by literal. A positive atom is a sort-merge
hash join (searchsorted over combined keys), a negation an anti-join, a comparison or
assignment a vectorised expression, an aggregate a correlated group-by joined back; a
semi-naive round reads one atom from the delta of the last one."""

from __future__ import annotations

import numpy as np

from ...errors import RuleError
from ..analysis.checks import outside_vars
from ..facts.columns import distinct
from ..lang import ast
from ..lang.constant import kind_of
from .column_values import DTYPES, TermValues, storage
from .compiled_rules import one_positive_atom
from .keys import KeyIndex, dedupe_rows, group_ids, joint_keys

I64 = np.int64


class Table:
    """Bindings of the variables seen so far: one array per variable, all of length n."""

    __slots__ = ("n", "cols")

    def __init__(self, n: int, cols: dict[str, np.ndarray]):
        self.n, self.cols = n, cols

    def take(self, index: np.ndarray) -> "Table":
        return Table(len(index), {v: a[index] for v, a in self.cols.items()})

    def where(self, mask: np.ndarray) -> "Table":
        if mask.all():  # a filter that keeps every row (a negation that blocks nothing, say)
            return Table(self.n, dict(self.cols))
        return self.take(np.flatnonzero(mask))


class RuleRun:
    """Evaluates one body over the current relations into a table of bindings."""

    def __init__(self, engine, arrays: dict[str, np.ndarray], delta: dict[str, np.ndarray],
                 rule: ast.Rule, stratum: frozenset[str]):
        self.engine, self.arrays, self.delta, self.rule = engine, arrays, delta, rule
        self.stratum = stratum
        self.symbols = engine.symbols
        self.fresh = 0
        self.terms = TermValues(engine.symbols, lambda why: RuleError(f"{why} while evaluating this rule", rule.pos))

    # -- values ---------------------------------------------------------------------

    def const(self, term) -> int:
        return self.terms.const(term)

    def value(self, term: ast.Term, table: Table):
        """The term's values over the table (an array of its type, or a scalar)."""
        return self.terms.value(term, table.cols, table.n)

    def stored(self, term: ast.Term, table: Table) -> np.ndarray:
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

    def join_atom(self, table: Table, atom: ast.Atom, from_delta: bool, rowid: str | None = None) -> Table:
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
            tested = self.key_index(atom, rows, tuple(i for i, _ in shared), from_delta)
            return table.where(tested.contains([v for _, v in shared]))
        index: KeyIndex | None
        if shared:
            index = self.key_index(atom, rows, tuple(i for i, _ in shared), from_delta)
            li, ri = index.join([v for _, v in shared])
        else:  # a cross product (rare: rules are usually connected)
            index = None
            li = np.repeat(np.arange(table.n), len(rows))
            ri = np.tile(np.arange(len(rows)), table.n)
        if index is not None and index.unique and len(li) == table.n:  # a lookup that finds every row: no copy
            out = Table(table.n, dict(table.cols))
        else:
            out = table.take(li)
        for name, i in new.items():
            out.cols[name] = rows[ri, i]
        if rowid is not None:
            out.cols[rowid] = rows[ri] if rows.shape[1] else np.zeros((len(ri), 1), dtype=I64)
        return out

    def negate(self, table: Table, atom: ast.Atom) -> Table:
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

    def compare(self, table: Table, lit: ast.Comparison) -> Table:
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
                    return table.take(distinct(rows[hit]))
        return table.where(self.terms.mask(lit, left, right, table.cols, table.n))

    def aggregate(self, table: Table, agg: ast.Aggregate) -> tuple[Table, ast.Var]:
        """Evaluate an aggregate for every distinct binding of its outer variables."""
        outer = sorted(ast.aggregate_vars(agg) & outside_vars(self.rule.head, self.rule.body, agg) & set(table.cols))
        self.fresh += 1
        result = ast.Var(f".agg{self.fresh}", agg.pos, kind_of(agg))
        if outer:
            first = dedupe_rows([table.cols[v] for v in outer])
            start = Table(len(first), {v: table.cols[v][first] for v in outer})
        else:
            start = Table(1, {})
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

    def body(self, table: Table, body, head: ast.Atom | None, delta_index: int | None,
             rowid: str | None = None) -> Table:
        pending = list(range(len(body)))
        # A rule's body keeps only the columns that its head or a literal still to come reads:
        # every join then copies fewer of them. Rows that became equal so are made distinct
        # before a join that may multiply them (`_distinct`); a rule run for its rows' ids
        # (`rowid`, the explainer's) keeps every column and every row.
        uses = [_uses(lit) for lit in body] if head is not None and rowid is None else None
        kept = set().union(*(ast.term_vars(t) | _aggregate_vars(t) for t in head.args)) if uses and head is not None else set()
        if delta_index is not None:
            pending.remove(delta_index)
            table = self.join_atom(table, body[delta_index], True)
        narrowed = False  # columns dropped since the rows were last made distinct
        while pending and table.n:
            if uses is not None:
                width = len(table.cols)
                table = _only(table, kept.union(*(uses[i] for i in pending)))
                narrowed = narrowed or len(table.cols) < width
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
                    if narrowed and not self.is_lookup(lit, bound):
                        table, narrowed = _distinct(table), False
                    table = self.join_atom(table, lit, False, rowid if rowid else None)
                case ast.Negation(atom):
                    table = self.negate(table, atom)
                case ast.Comparison():
                    table = self.compare(table, lit)
        if pending:  # the table emptied early: what is left cannot add rows
            return Table(0, {})
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


def _only(table: Table, live: set[str]) -> Table:
    """The table without the columns nothing reads any more."""
    if live.issuperset(table.cols):
        return table
    return Table(table.n, {v: a for v, a in table.cols.items() if v in live})


def _distinct(table: Table) -> Table:
    """Each distinct row once (in their first rows' order), before a join that may multiply
    them: rows that differed only in a column dropped since would join alike, multiplying
    what every later literal copies (`member(F, A), member(F, B)` for each of F's chips, not
    each pair of its members). The head's rows are a set, so they are the same."""
    if table.n < _DISTINCT_FROM or not table.cols:
        return table
    first = np.sort(dedupe_rows(list(table.cols.values())))
    return table if len(first) == table.n else table.take(first)


_DISTINCT_FROM = 1024  # rows: a smaller table is joined as it is


def _ready(lit, bound: set[str], run: RuleRun) -> bool:
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
