"""Evaluate rule bodies over an evaluated model, one binding at a time.

This is the provenance pass's small interpreter, beside the compiled engine rather than
inside it: given a body and some bound variables it finds the bindings (and the tuple
each positive atom matched) using the model's hash indexes. Two orders:

- `join`: cheap filters first, then the atom with the most bound columns (proofs,
  queries); tuples are tried in sorted order so every answer is deterministic.
- `source`: the first literal, in the order written, that can be evaluated (why-not:
  "the first body literal that fails").

Aggregates follow the engine (datalog/engine/compiled_rules.py): one positive atom in the body runs
over its matching tuples, several over distinct bindings of the named variables.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

from ..datalog.analysis.checks import outside_vars
from ..datalog.engine.compiled_rules import one_positive_atom
from ..datalog.lang import ast, values
from ..datalog.lang.constant import arithmetic, kind_of
from .access import reader
from .query import QueryError

UNBOUND = object()



class SearchStopped(Exception):
    """The step budget of a why-not search ran out."""


@dataclass(frozen=True)
class _Lit:
    index: int
    lit: ast.Literal
    kind: str  # "atom" | "neg" | "cmp"
    needs: frozenset[str]  # negation: every variable; comparison: both sides' variables
    aggs: tuple[tuple[ast.Aggregate, frozenset[str]], ...]  # aggregates with their outer variables


@dataclass(frozen=True)
class _Plan:
    body: tuple[ast.Literal, ...]
    lits: tuple[_Lit, ...]


@dataclass(frozen=True)
class _Access:
    rel: str
    arity: int
    cols: tuple[int, ...]  # bound columns
    key: tuple  # their values
    binds: tuple[tuple[int, str], ...]  # (column, variable) the lookup binds
    same: tuple[tuple[int, int], ...]  # columns that must be equal (a variable repeated)


@dataclass
class Reach:
    """How far a source-order walk of a body got."""

    holds: bool = False  # some binding satisfies the whole body
    depth: int = -1  # literals satisfied on the deepest branch
    failed: int | None = None  # index of the literal that fails there
    reached: int = 0  # bindings that got that deep
    env: dict = field(default_factory=dict)
    matched: dict = field(default_factory=dict)
    stopped: bool = False  # the step budget ran out first


@dataclass(frozen=True)
class AggregateResult:
    value: object  # None for min/max over nothing
    witnesses: tuple[tuple[tuple[str, tuple], ...], ...]  # per contribution: the (rel, tuple)s it matched


class Solver:
    """Answers body queries over one model. Cheap to create; caches plans and aggregates."""

    def __init__(self, model):
        self.model = model
        self.read = reader(model)
        self._plans: dict[int, tuple[object, _Plan]] = {}
        self._aggregates: dict[tuple, tuple[ast.Aggregate, AggregateResult]] = {}
        self.steps = 0
        self.limit: int | None = None

    # -- plans -------------------------------------------------------------------------

    def plan(self, body: tuple[ast.Literal, ...], head: ast.Atom | None) -> _Plan:
        cached = self._plans.get(id(body))
        if cached is not None and cached[0] is body:
            return cached[1]
        lits = []
        for i, lit in enumerate(body):
            match lit:
                case ast.Atom():
                    lits.append(_Lit(i, lit, "atom", frozenset(), ()))
                case ast.Negation(atom):
                    lits.append(_Lit(i, lit, "neg", frozenset(ast.literal_vars(atom)), ()))
                case ast.Comparison():
                    aggs = tuple((a, frozenset(ast.aggregate_vars(a) & outside_vars(head, body, a)))
                                 for a in ast.literal_aggregates(lit))
                    lits.append(_Lit(i, lit, "cmp", frozenset(ast.literal_vars(lit)), aggs))
        plan = _Plan(body, tuple(lits))
        self._plans[id(body)] = (body, plan)
        return plan

    # -- terms -------------------------------------------------------------------------

    def value(self, term: ast.Term, env: dict, aggs: dict | None = None):
        """The value of a term under `env`, or UNBOUND."""
        match term:
            case ast.Var(name):
                return env.get(name, UNBOUND)
            case ast.Num(value) | ast.Str(value):
                return value
            case ast.Negative(operand):
                v = self.value(operand, env, aggs)
                return UNBOUND if v is UNBOUND else -v
            case ast.BinOp(op, left, right):
                a, b = self.value(left, env, aggs), self.value(right, env, aggs)
                if a is UNBOUND or b is UNBOUND:
                    return UNBOUND
                return _arith(op, a, b, term.pos)
            case ast.Aggregate():
                return UNBOUND if aggs is None else aggs.get(id(term), UNBOUND)
            case ast.Functor(name, args) if name != "range":
                found = [self.value(a, env, aggs) for a in args]
                if any(v is UNBOUND for v in found):
                    return UNBOUND
                return _functor(term, tuple(found))
        return UNBOUND

    # -- atoms -------------------------------------------------------------------------

    def lookup(self, atom: ast.Atom, env: dict):
        """(candidate tuples, [(column, variable) it binds]); None while an argument cannot be evaluated."""
        access = self.access(atom, env)
        if access is None:
            return None
        return self.fetch(access), access.binds

    def access(self, atom: ast.Atom, env: dict) -> "_Access | None":
        """How to look an atom up under `env`: its bound columns and their values."""
        cols, key, binds, same = [], [], [], []
        seen: dict[str, int] = {}
        for i, arg in enumerate(atom.args):
            if isinstance(arg, ast.Wildcard):
                continue
            if isinstance(arg, ast.Var) and arg.name not in env:
                if arg.name in seen:
                    same.append((seen[arg.name], i))
                else:
                    seen[arg.name] = i
                    binds.append((i, arg.name))
                continue
            v = self.value(arg, env)
            if v is UNBOUND:
                return None
            cols.append(i)
            key.append(v)
        return _Access(atom.rel, atom.arity, tuple(cols), tuple(key), tuple(binds), tuple(same))

    def rank(self, access: "_Access", index: int, late: frozenset[str]) -> tuple:
        """Join order: membership tests first, then the reader's cost (access.py), where
        `late` relations (a proof's own recursive stratum, filtered by round) come after
        others, then source order. It depends only on the rules and the model, never on
        what earlier questions built, so a tuple gets the same proof in every session."""
        if len(access.cols) == access.arity:
            return (0, index)
        return (1, self.read.cost(access.rel, access.cols, access.key, access.rel in late), index)

    def fetch(self, access: "_Access"):
        """The tuples matching the bound columns (see access.py for how each model is read)."""
        read, rel, cols, key = self.read, access.rel, access.cols, access.key
        if len(cols) == access.arity:
            found = [key] if read.contains(rel, key) else []
        elif not cols:
            found = read.all(rel)
        else:
            found = read.rows(rel, cols, key)
        if access.same:
            found = [t for t in found if all(t[a] == t[b] for a, b in access.same)]
        return found

    def matching(self, atom: ast.Atom, env: dict | None = None) -> list[tuple]:
        """Every tuple of the model that matches an atom (its variables bound by `env` or free), sorted."""
        found = self.lookup(atom, env or {})
        return [] if found is None else sorted(found[0])

    # -- bodies ------------------------------------------------------------------------

    def solutions(self, body, env: dict, head: ast.Atom | None = None, admit=None, order: str = "join",
                  late: frozenset[str] = frozenset()):
        """Yield (bindings, {literal index: matched tuple}) for every way the body holds.

        `admit(rel, tuple)` may refuse tuples (proofs use it to keep to earlier rounds) and
        atoms of `late` relations are joined after others as bound.
        """
        plan = self.plan(body, head)
        how = "source" if order == "source" else ("join", late)
        yield from self._search(plan, tuple(range(len(body))), dict(env), {}, admit, how)

    def deepest(self, body, env: dict, head: ast.Atom | None, limit: int) -> Reach:
        """Walk the body in source order; report the deepest literal reached and its bindings."""
        plan = self.plan(body, head)
        reach = Reach(env=dict(env))
        self.steps, self.limit = 0, limit
        try:
            self._walk(plan, tuple(range(len(body))), dict(env), {}, reach)
        except SearchStopped:
            reach.stopped = True
        finally:
            self.limit = None
        return reach

    def _tick(self) -> None:
        self.steps += 1
        if self.limit is not None and self.steps > self.limit:
            raise SearchStopped

    def _ready(self, lit: _Lit, env: dict) -> bool:
        if lit.kind == "neg":
            return lit.needs <= env.keys()
        if lit.kind == "cmp":
            if any(not outer <= env.keys() for _, outer in lit.aggs):
                return False
            if lit.needs <= env.keys():
                return True
            cmp = cast(ast.Comparison, lit.lit)
            if cmp.op == "=":
                for var, other in ((cmp.left, cmp.right), (cmp.right, cmp.left)):
                    if isinstance(var, ast.Var) and var.name not in env:
                        return ast.term_vars(other) <= env.keys()
            return False
        return True

    def _next(self, plan: _Plan, pending: tuple[int, ...], env: dict, order):
        """The literal to evaluate next (and its lookup when it is an atom); `order` is
        "source" or ("join", relations to join late)."""
        if order == "source":
            for i in pending:
                lit = plan.lits[i]
                if lit.kind == "atom":
                    found = self.lookup(cast(ast.Atom, lit.lit), env)
                    if found is not None:
                        return i, found
                elif self._ready(lit, env):
                    return i, None
        else:
            for i in pending:
                lit = plan.lits[i]
                if lit.kind != "atom" and self._ready(lit, env):
                    return i, None
            best = None
            for i in pending:
                lit = plan.lits[i]
                if lit.kind == "atom":
                    access = self.access(cast(ast.Atom, lit.lit), env)
                    if access is not None:
                        rank = self.rank(access, i, order[1])
                        if best is None or rank < best[0]:
                            best = (rank, i, access)
            if best is not None:
                _, i, access = best
                return i, (self.fetch(access), access.binds)
        from ..datalog.lang.printer import print_body

        unbound = sorted(set().union(*(plan.lits[i].needs for i in pending)) - env.keys())
        raise QueryError(f"cannot evaluate {print_body(tuple(plan.body[i] for i in pending))}: "
                         f"no positive atom binds {', '.join(unbound) or 'its variables'}")

    def _step(self, plan, i: int, found, env: dict, matched: dict, admit):
        """Yield the (bindings, matched) that literal i lets through."""
        lit = plan.lits[i]
        if lit.kind == "atom":
            tuples, binds = found
            rel = lit.lit.rel
            for t in sorted(tuples):
                if admit is not None and not admit(rel, t):
                    continue
                self._tick()
                new = dict(env)
                for col, name in binds:
                    new[name] = t[col]
                yield new, {**matched, i: t}
        elif lit.kind == "neg":
            self._tick()
            if not self.lookup(lit.lit.atom, env)[0]:
                yield env, matched
        else:
            self._tick()
            compared = self.compare(lit, env)
            if compared is not None:
                yield compared, matched

    def _search(self, plan, pending, env, matched, admit, order):
        if not pending:
            yield env, matched
            return
        i, found = self._next(plan, pending, env, order)
        rest = tuple(j for j in pending if j != i)
        for new, new_matched in self._step(plan, i, found, env, matched, admit):
            yield from self._search(plan, rest, new, new_matched, admit, order)

    def _walk(self, plan, pending, env, matched, reach: Reach) -> bool:
        depth = len(plan.lits) - len(pending)
        if not pending:
            reach.holds, reach.depth, reach.failed, reach.env, reach.matched = True, depth, None, env, matched
            return True
        i, found = self._next(plan, pending, env, "source")
        if depth > reach.depth:
            reach.depth, reach.failed, reach.env, reach.matched, reach.reached = depth, i, env, matched, 0
        if depth == reach.depth:
            reach.reached += 1
        rest = tuple(j for j in pending if j != i)
        for new, new_matched in self._step(plan, i, found, env, matched, None):
            if self._walk(plan, rest, new, new_matched, reach):
                return True
        return False

    # -- comparisons and aggregates ------------------------------------------------------

    def compare(self, lit: _Lit, env: dict) -> dict | None:
        """The bindings after a comparison (an `=` may bind a variable), or None when it fails."""
        aggs = self.aggregate_values(lit, env)
        if aggs is None:
            return None
        cmp = cast(ast.Comparison, lit.lit)
        if cmp.op == "=":
            for var, other in ((cmp.left, cmp.right), (cmp.right, cmp.left)):
                if isinstance(var, ast.Var) and var.name not in env:
                    new = dict(env)
                    new[var.name] = self.value(other, env, aggs)
                    return new
        a, b = self.value(cmp.left, env, aggs), self.value(cmp.right, env, aggs)
        return env if values.compare(cmp.op, a, b) else None  # the string tests too (`match`)

    def aggregate_values(self, lit: _Lit, env: dict) -> dict | None:
        """{id(aggregate): value} for a comparison's aggregates; None if a min/max ran over nothing."""
        values = {}
        for agg, outer in lit.aggs:
            result = self.aggregate(agg, outer, env)
            if result.value is None:
                return None
            values[id(agg)] = result.value
        return values

    def aggregate(self, agg: ast.Aggregate, outer: frozenset[str], env: dict) -> AggregateResult:
        inner = {v: env[v] for v in sorted(outer)}
        key = (id(agg), tuple(inner.items()))
        cached = self._aggregates.get(key)
        if cached is not None and cached[0] is agg:
            return cached[1]
        single = one_positive_atom(agg.body)
        atoms = [i for i, lit in enumerate(agg.body) if isinstance(lit, ast.Atom)]
        local = sorted(ast.aggregate_vars(agg) - outer)
        acc: dict = {}
        witnesses: dict = {}
        saved = self.limit
        self.limit = None  # an aggregate is evaluated whole, whatever the why-not budget
        try:
            for sol, matched in self.solutions(agg.body, inner):
                witness = (atoms[0], matched[atoms[0]]) if single else tuple(sol.get(v) for v in local)
                acc[witness] = 1 if agg.target is None else self.value(agg.target, sol)
                witnesses.setdefault(witness, tuple((cast(ast.Atom, agg.body[i]).rel, matched[i])
                                                    for i in atoms if i in matched))
        finally:
            self.limit = saved
        values = list(acc.values())
        value: object
        match agg.func:
            case "count":
                value = len(values)
            case "sum":
                value = sum(values)
            case "min":
                value = min(values) if values else None
            case _:
                value = max(values) if values else None
        result = AggregateResult(value, tuple(witnesses[w] for w in sorted(witnesses)))
        self._aggregates[key] = (agg, result)
        return result


def _functor(term: ast.Functor, args: tuple):
    """A functor's value, as the engines compute it (a record's functors included)."""
    try:
        return values.functor(term.name, kind_of(term), args, tuple(kind_of(a) for a in term.args))
    except (ZeroDivisionError, values.EvaluationError) as err:
        raise QueryError(str(err), term.pos) from None


def _arith(op: str, a, b, pos):
    try:
        return arithmetic(op, a, b)
    except ZeroDivisionError:
        raise QueryError("division by zero", pos) from None
