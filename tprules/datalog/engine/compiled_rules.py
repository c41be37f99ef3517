"""The compiled engine's rules: each checked rule compiled into a Python function that joins
set-at-a-time.

A rule becomes nested loops over hash indexes. The join order is chosen when a stratum
is about to run, from the sizes of the relations below it: the delta atom first
(semi-naive), then repeatedly the cheapest atom (a membership test, a unique lookup, the
smallest expected fan-out), with negations, comparisons, assignments and aggregates
placed as soon as their variables are bound. Once every head variable is bound, the rest
of the body only has to hold once: it becomes an existence test that stops at the first
match, skipped for heads already derived. The generated source is shown by
`tprules lint --show=code` and reused while the join orders stay the same.

A generated function `rule(R, I, U)` looks up what the rule reads and returns
`run(D) -> set`, the head tuples of one evaluation, where `R` maps a relation to its set of
tuples, `I(rel, cols)` returns a hash index (key → list of
tuples; the key is the bare value for one column, a tuple for several), `U(rel, cols)` a
unique index (key → the one tuple), and `D` holds the deltas.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..analysis.checks import outside_vars
from ..lang import ast
from ..lang.constant import kind_of
from ..lang.printer import print_rule
from .expressions import HELPERS, python_expr, python_name, python_test


class Stats(Protocol):
    def estimate(self, rel: str, cols: tuple[int, ...]) -> tuple[float, bool]:
        """Expected tuples per key of a lookup on `cols` (the size for a scan), and whether
        every key has exactly one tuple."""


class NoStats:
    """Estimates for compiling without data: every lookup fans out a little."""

    def estimate(self, rel: str, cols: tuple[int, ...]) -> tuple[float, bool]:
        return (1000.0 if not cols else 2.0), False


@dataclass(frozen=True)
class CompiledRule:
    rule: ast.Rule
    name: str
    delta: str | None  # the relation read as a delta, for semi-naive versions
    source: str


def _py(name: str) -> str:
    return python_name("v_", name)


def one_positive_atom(body: tuple[ast.Literal, ...]) -> bool:
    return sum(isinstance(lit, ast.Atom) for lit in body) == 1


class _Emitter:
    def __init__(self, depth: int = 1):
        self.lines: list[str] = []
        self.depth = depth

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.depth + line)

    def open(self, line: str) -> None:
        self.emit(line)
        self.depth += 1


class _BodyCompiler:
    """Emits the loops of one body (a rule's, an aggregate's, or the rest of a rule's body
    as an existence test) given the variables bound before it."""

    def __init__(self, out: _Emitter, ctx: "_RuleCompiler", head: ast.Atom | None, body, indexes, bound):
        self.out, self.ctx, self.head, self.body = out, ctx, head, body
        self.pending = list(indexes)  # positions in `body` still to emit
        self.bound: set[str] = set(bound)
        self.matched: list[str] = []  # tuple variables of scanned atoms
        self.scan_all = False  # scan even fully bound atoms (an aggregate counting tuples)

    def expr(self, term: ast.Term) -> str:
        return python_expr(term, lambda var: _py(var.name), lambda agg: self.ctx.aggregate_values[id(agg)])

    # -- ordering -------------------------------------------------------------------

    def _ready(self, lit: ast.Literal) -> bool:
        match lit:
            case ast.Negation(atom):
                return ast.literal_vars(atom) <= self.bound
            case ast.Comparison(op, left, right):
                for agg in ast.literal_aggregates(lit):
                    if not self.ctx.aggregate_outer(agg) <= self.bound:
                        return False
                if ast.term_vars(left) <= self.bound and ast.term_vars(right) <= self.bound:
                    return True
                if op == "=":
                    for var, other in ((left, right), (right, left)):
                        if isinstance(var, ast.Var) and var.name not in self.bound:
                            return ast.term_vars(other) <= self.bound
        return False

    def _key_columns(self, atom: ast.Atom) -> tuple[int, ...]:
        return tuple(i for i, a in enumerate(atom.args)
                     if not isinstance(a, ast.Wildcard) and not (isinstance(a, ast.Var) and a.name not in self.bound)
                     and ast.term_vars(a) <= self.bound)

    def _new_vars(self, atom: ast.Atom) -> set[str]:
        return {a.name for a in atom.args if isinstance(a, ast.Var) and a.name not in self.bound}

    def _cost(self, i: int) -> tuple:
        atom = self.body[i]
        if not self._new_vars(atom) and not self.scan_all:
            return (0, 0.0, i)  # a membership test
        fanout, unique = self.ctx.estimate(atom.rel, self._key_columns(atom))
        return (1, 0.0 if unique else fanout, i)

    def compile(self, first: int | None, finish) -> None:
        """Emit the body in a good join order, then `finish()` at the innermost level."""
        if first is not None:
            self.pending.remove(first)
            self._emit_literal(first, delta=True)
        while self.pending:
            if self.ctx.existential and self._split_here():
                self._emit_existence_test(finish)
                return
            ready = next((i for i in self.pending if not isinstance(self.body[i], ast.Atom)
                          and self._ready(self.body[i])), None)
            if ready is None:
                atoms = [i for i in self.pending if isinstance(self.body[i], ast.Atom)]
                if not atoms:
                    raise AssertionError(f"unsafe body reached the compiler: {self.body}")
                ready = min(atoms, key=self._cost)
            self.pending.remove(ready)
            self._emit_literal(ready)
        finish()

    def _split_here(self) -> bool:
        """Are the head variables bound, with a loop still to come?"""
        if self.head is None or not ast.literal_vars(self.head) <= self.bound:
            return False
        for i in self.pending:
            atom = self.body[i]
            if isinstance(atom, ast.Atom) and self._new_vars(atom):
                unique = self.ctx.estimate(atom.rel, self._key_columns(atom))[1]
                if not unique or not self._key_columns(atom):
                    return True
        return False

    def _emit_existence_test(self, finish) -> None:
        name = self.ctx.fresh("exists")
        params = sorted(v for v in self.bound if any(v in ast.literal_vars(self.body[i])
                                                     or any(v in ast.aggregate_vars(a) for a in
                                                            ast.literal_aggregates(self.body[i]))
                                                     for i in self.pending))
        inner = _Emitter(depth=2)
        sub = _BodyCompiler(inner, self.ctx, None, self.body, self.pending, self.bound)
        sub.compile(None, lambda: inner.emit("return True"))
        inner.depth = 2
        inner.emit("return False")
        self.ctx.helpers.append(f"    def {name}({', '.join(_py(v) for v in params)}):\n" + "\n".join(inner.lines))
        head = self.ctx.head_tuple(self)
        self.out.emit(f"h = {head}")
        self.out.open(f"if h not in out and h not in known and {name}({', '.join(_py(v) for v in params)}):")
        self.out.emit("add(h)")

    # -- literals -------------------------------------------------------------------

    def _emit_literal(self, i: int, delta: bool = False) -> None:
        lit = self.body[i]
        match lit:
            case ast.Atom():
                self._emit_atom(lit, delta)
            case ast.Negation(atom):
                self.out.open(f"if not ({self._membership(atom)}):")
            case ast.Comparison():
                self._emit_comparison(lit)

    def _key(self, atom: ast.Atom, cols) -> str:
        values = [self.expr(atom.args[i]) for i in cols]
        return values[0] if len(values) == 1 else f"({', '.join(values)})"

    def _membership(self, atom: ast.Atom) -> str:
        """A Python test that some tuple of `atom` matches (all its variables bound)."""
        if atom.arity == 0:
            return f"() in {self.ctx.relation(atom.rel)}"
        cols = tuple(i for i, a in enumerate(atom.args) if not isinstance(a, ast.Wildcard))
        if len(cols) == atom.arity:
            return f"({''.join(self.expr(a) + ', ' for a in atom.args)}) in {self.ctx.relation(atom.rel)}"
        if not cols:
            return f"{self.ctx.relation(atom.rel)}"
        return f"{self._key(atom, cols)} in {self.ctx.index(atom.rel, cols)}"

    def _emit_atom(self, atom: ast.Atom, delta: bool) -> None:
        key_cols = self._key_columns(atom)
        binds, checks, new = [], [], {}
        for i, arg in enumerate(atom.args):
            if isinstance(arg, ast.Var) and arg.name not in self.bound:
                if arg.name in new:
                    checks.append((i, _py(arg.name)))
                else:
                    new[arg.name] = i
                    binds.append((i, _py(arg.name)))
        if not binds and not delta and not self.scan_all:
            self.out.open(f"if {self._membership(atom)}:")
            return
        row = self.ctx.fresh("t")
        self.matched.append(row)
        if delta:
            self.out.open(f"for {row} in D[{atom.rel!r}]:")
            checks = [(i, self.expr(atom.args[i])) for i in key_cols] + checks
        elif key_cols and self.ctx.estimate(atom.rel, key_cols)[1]:
            self.out.emit(f"{row} = {self.ctx.index(atom.rel, key_cols, unique=True)}.get({self._key(atom, key_cols)})")
            self.out.open(f"if {row} is not None:")
        elif key_cols:
            self.out.open(f"for {row} in {self.ctx.index(atom.rel, key_cols)}.get({self._key(atom, key_cols)}, ()):")
        else:
            self.out.open(f"for {row} in {self.ctx.relation(atom.rel)}:")
        for i, name in binds:
            self.out.emit(f"{name} = {row}[{i}]")
        self.bound |= set(new)
        if checks:
            self.out.open("if " + " and ".join(f"{row}[{i}] == {value}" for i, value in checks) + ":")

    def _emit_comparison(self, lit: ast.Comparison) -> None:
        for agg in ast.literal_aggregates(lit):
            value = self.ctx.emit_aggregate(self.out, agg)
            self.out.open(f"if {value} is not None:")
        left, right = lit.left, lit.right
        if lit.op == "=":
            for var, other in ((left, right), (right, left)):
                if isinstance(var, ast.Var) and var.name not in self.bound:
                    if isinstance(other, ast.Functor) and other.name == "range":  # a generator
                        self.out.open(f"for {_py(var.name)} in {self.expr(other)}:")
                    else:
                        self.out.emit(f"{_py(var.name)} = {self.expr(other)}")
                    self.bound.add(var.name)
                    return
            for var, other in ((left, right), (right, left)):
                if isinstance(other, ast.Functor) and other.name == "range":  # a bound value in a range
                    self.out.open(f"if {self.expr(var)} in {self.expr(other)}:")
                    return
        self.out.open(f"if {python_test(lit.op, self.expr(left), self.expr(right))}:")


class _RuleCompiler:
    """Compiles one rule (one semi-naive version of it) into the source of one function."""

    def __init__(self, rule: ast.Rule, name: str, delta_index: int | None, stats: Stats, stratum: frozenset[str]):
        self.rule, self.name, self.delta_index = rule, name, delta_index
        self.stats, self.stratum = stats, stratum
        self.relations: dict[str, str] = {}
        self.indexes: dict[tuple[str, tuple[int, ...], bool], str] = {}
        self.aggregate_values: dict[int, str] = {}
        self.helpers: list[str] = []
        self.existential = True
        self._counter = 0
        self._outer: dict[int, frozenset[str]] = {}

    def fresh(self, stem: str) -> str:
        self._counter += 1
        return f"{stem}{self._counter}"

    def estimate(self, rel: str, cols: tuple[int, ...]) -> tuple[float, bool]:
        if rel in self.stratum:  # still growing: no statistics, never unique
            return (2.0 if cols else 1000.0), False
        return self.stats.estimate(rel, cols)

    def relation(self, rel: str) -> str:
        return self.relations.setdefault(rel, f"r{len(self.relations)}")

    def index(self, rel: str, cols: tuple[int, ...], unique: bool = False) -> str:
        return self.indexes.setdefault((rel, cols, unique), f"{'ux' if unique else 'ix'}{len(self.indexes)}")

    def aggregate_outer(self, agg: ast.Aggregate) -> frozenset[str]:
        if id(agg) not in self._outer:
            inside = ast.aggregate_vars(agg)
            self._outer[id(agg)] = frozenset(inside & outside_vars(self.rule.head, self.rule.body, agg))
        return self._outer[id(agg)]

    def head_tuple(self, compiler: _BodyCompiler) -> str:
        return f"({''.join(compiler.expr(a) + ', ' for a in self.rule.head.args)})"

    def emit_aggregate(self, out: _Emitter, agg: ast.Aggregate) -> str:
        """Define a memoised helper for `agg`, emit a call to it, and return the value's name."""
        outer = sorted(self.aggregate_outer(agg))
        helper = self.fresh("agg")
        self.helpers.append(self._aggregate_helper(helper, agg, outer))
        value = self.fresh("a")
        out.emit(f"{value} = {helper}({', '.join(_py(v) for v in outer)})")
        self.aggregate_values[id(agg)] = value
        return value

    def _aggregate_helper(self, helper: str, agg: ast.Aggregate, outer: list[str]) -> str:
        body = _Emitter(depth=2)
        body.emit(f"key = ({''.join(_py(v) + ', ' for v in outer)})")
        body.emit(f"if key in memo_{helper}: return memo_{helper}[key]")
        body.emit("acc = {}")
        compiler = _BodyCompiler(body, self, None, agg.body, range(len(agg.body)), outer)
        single_atom = one_positive_atom(agg.body)
        compiler.scan_all = single_atom
        local = sorted(ast.aggregate_vars(agg) - set(outer))

        def finish():
            # As in Soufflé: with one positive atom the aggregate runs over its matching
            # tuples; with several, over distinct bindings of the named variables.
            if single_atom and compiler.matched:
                witness = compiler.matched[0]
            else:
                witness = f"({''.join(_py(v) + ', ' for v in local)})"
            target = "1" if agg.target is None else compiler.expr(agg.target)
            body.emit(f"acc[{witness}] = {target}")

        compiler.compile(None, finish)
        body.depth = 2
        kind = kind_of(agg)
        total = {"number": "_w(sum(acc.values()))", "unsigned": "_uw(sum(acc.values()))"}.get(kind, "_fsum(acc.values())")
        result = {"count": "len(acc)", "sum": total,
                  "min": "min(acc.values()) if acc else None", "max": "max(acc.values()) if acc else None",
                  "mean": "_mean(acc.values()) if acc else None"}[agg.func]
        body.emit(f"result = memo_{helper}[key] = {result}")
        body.emit("return result")
        params = ", ".join(_py(v) for v in outer)
        return f"    memo_{helper} = {{}}\n    def {helper}({params}):\n" + "\n".join(body.lines)

    def compile(self) -> str:
        out = _Emitter()
        head = self.rule.head
        compiler = _BodyCompiler(out, self, head, self.rule.body, range(len(self.rule.body)), ())
        compiler.compile(self.delta_index, lambda: out.emit(f"add({self.head_tuple(compiler)})"))
        # A rule that finds dominated tuples (subsumption) finds tuples already known.
        prologue = [f"    known = R[{head.rel!r}]" if self.rule.dominating is None else "    known = ()"]
        prologue += [f"    {var} = R[{rel!r}]" for rel, var in self.relations.items()]
        prologue += [f"    {var} = {'U' if unique else 'I'}({rel!r}, {cols!r})"
                     for (rel, cols, unique), var in self.indexes.items()]
        comment = "    # " + print_rule(self.rule).replace("\n", " ")
        # The relations and indexes are looked up once; `run` is called once per round of a
        # recursive stratum, so a round that adds one tuple costs a call, not a set-up.
        run = ["    def run(D):", "        out = set()", "        add = out.add", *("    " + line for line in out.lines),
               "        return out"]
        lines = [f"def {self.name}(R, I, U):", comment, *prologue, *self.helpers, *run, "    return run"]
        return "\n".join(lines) + "\n"


def compile_rule(rule: ast.Rule, name: str, delta_rel: str | None = None, delta_index: int | None = None,
                 stats: Stats | None = None, stratum: frozenset[str] = frozenset()) -> CompiledRule:
    """Compile one rule; with `delta_index`, that body atom reads only the new tuples `D[rel]`."""
    compiler = _RuleCompiler(rule, name, delta_index, stats or NoStats(), stratum)
    return CompiledRule(rule, name, delta_rel, compiler.compile())


# The generated functions compute with tprules.datalog.lang.values (Soufflé's semantics).
RUNTIME_HELPERS = HELPERS + '''
def _fsum(values):
    return sum(values, 0.0)

def _mean(values):
    values = [float(v) for v in values]
    return sum(values) / len(values)
'''
