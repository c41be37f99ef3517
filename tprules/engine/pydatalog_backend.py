"""The reference engine: the checked program compiled to pyDatalog, stratum by stratum.

This is the only module that touches pyDatalog. pyDatalog keeps its database in a
thread-local global (`Logic`); a `PyDatalogEngine` owns one `Logic` of its own and
installs it only for the duration of a call, so two engines can live in one process
and an engine can be thrown away.

Evaluation is stratified: each stratum's rules are loaded into pyDatalog over the facts
of the inputs and of the strata below (asserted as facts), its relations are asked for
every tuple, and the answers become facts for the strata above. An aggregate's body is a
pyDatalog rule asked the same way; its groups are folded in Python (pyDatalog's own
aggregates differ from Soufflé's on empty groups) and fed back as facts.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from contextlib import contextmanager

from pyDatalog import Logic, pyDatalog

from ..analysis.checks import outside_vars
from ..analysis.program import CheckedProgram
from ..analysis.strata import needed_strata
from ..errors import RuleError
from ..lang import ast
from .constant import constant_value
from .evaluate import Model
from .rewrite import COMPARE, constant, replace, split_divisions

_UNIT = 0  # the placeholder column of a zero-arity relation


def _pred(rel: str, derived: bool = False) -> str:
    return ("d_" if derived else "r_") + rel.replace("?", "_q_")


def _var(name: str) -> str:
    return "V_" + name.replace("?", "_q_")


def _const(value) -> str:
    return repr(value)


class _Translator:
    """Turns one rule into pyDatalog clause text, in an order where every literal is bound."""

    def __init__(self, stratum_rels: frozenset[str], aggregates: dict[int, tuple[str, list[str]]],
                 rename: dict[str, str] | None = None):
        self.stratum_rels = stratum_rels
        self.aggregates = aggregates  # id(agg) → (value predicate, outer vars)
        self.rename = rename or {}  # variable → pyDatalog text, for an aggregate's one-atom body
        self.fresh = itertools.count()
        self.helpers: list[str] = []  # projection predicates the clauses need

    def term(self, t: ast.Term) -> str:
        match t:
            case ast.Var(name):
                return self.rename.get(name) or _var(name)
            case ast.Num(value) | ast.Str(value):
                return _const(value)
            # pyDatalog reads `(0 - x) == y` and `(0 + x) == y` as an attempt to retract or
            # assert a fact and raises; so no operation here starts with the constant 0.
            case ast.BinOp("-", ast.Num(0), right) | ast.Negative(right):
                return f"(-1 * {self.term(right)})"
            case ast.BinOp("+", ast.Num(0), right):
                return self.term(right)
            case ast.BinOp(op, left, right):
                assert op != "/" and op != "%", "divisions are split into sign cases first"
                return f"({self.term(left)} {op} {self.term(right)})"
        raise TypeError(t)

    def atom(self, a: ast.Atom, extra: list[str]) -> str:
        """An atom with plain arguments; expressions become fresh variables tested in `extra`."""
        name = _pred(a.rel, a.rel in self.stratum_rels)
        if not a.args:
            return f"{name}({_UNIT})"
        args = []
        for t in a.args:
            if isinstance(t, ast.Wildcard):
                args.append(f"V__w{next(self.fresh)}")
            elif isinstance(t, (ast.Var, ast.Num, ast.Str)):
                args.append(self.term(t))
            else:
                v = f"V__e{next(self.fresh)}"
                args.append(v)
                extra.append(f"({v} == {self.term(t)})")
        return f"{name}({', '.join(args)})"

    def body(self, head: ast.Atom | None, body: tuple[ast.Literal, ...], bound: set[str]) -> list[list[str]]:
        """Alternative bodies (an aggregate over an empty group adds one), each a list of literals."""
        variants: list[list[str]] = [[]]
        bound = set(bound)
        pending = list(body)
        while pending:
            lit = next((x for x in pending if isinstance(x, ast.Atom)), None)
            if lit is None:
                lit = next((x for x in pending if _ready(x, bound, head, body, self.aggregates)), pending[0])
            pending.remove(lit)
            extra: list[str] = []
            match lit:
                case ast.Atom():
                    text = [self.atom(lit, extra)]
                    bound |= {t.name for t in lit.args if isinstance(t, ast.Var)}
                    variants = [v + text + extra for v in variants]
                case ast.Negation(atom):
                    neg = self._negation(atom)
                    variants = [v + [neg] for v in variants]
                case ast.Comparison():
                    variants = self._comparison(lit, variants, bound)
        return variants

    def _negation(self, atom: ast.Atom) -> str:
        if any(isinstance(t, ast.Wildcard) for t in atom.args) or any(
            not isinstance(t, (ast.Var, ast.Num, ast.Str, ast.Wildcard)) for t in atom.args
        ):
            return f"~{self.projection(atom)}"
        return f"~{self.atom(atom, [])}"

    def projection(self, atom: ast.Atom) -> str:
        """A helper predicate over an atom's named, non-wildcard columns (for negation)."""
        keep = [t for t in atom.args if not isinstance(t, ast.Wildcard)]
        name = f"p_{atom.rel}_{next(self.fresh)}".replace("?", "_q_")
        params = [f"V__p{i}" for i in range(len(keep))]
        args, i = [], 0
        for t in atom.args:
            if isinstance(t, ast.Wildcard):
                args.append(f"V__w{next(self.fresh)}")
            else:
                args.append(params[i])
                i += 1
        source = _pred(atom.rel, atom.rel in self.stratum_rels)
        head_args = params or [str(_UNIT)]
        self.helpers.append(f"{name}({', '.join(head_args)}) <= {source}({', '.join(args) or _UNIT})")
        call = [self.term(t) for t in keep] or [str(_UNIT)]
        return f"{name}({', '.join(call)})"

    def _comparison(self, lit: ast.Comparison, variants, bound: set[str]):
        left, right = lit.left, lit.right
        for agg in ast.literal_aggregates(lit):
            value_pred, outer = self.aggregates[id(agg)]
            value = ast.Var(f"_a{next(self.fresh)}")
            key = [_var(o) for o in outer]
            with_group = f"{value_pred}({', '.join(key + [_var(value.name)])})"
            new = [x + [with_group] for x in variants]
            if agg.func in ("count", "sum"):  # an empty group counts and sums to 0
                empty = f"~{value_pred}_any({', '.join(key) or _UNIT})"
                new += [x + [empty, f"({_var(value.name)} == 0)"] for x in variants]
            variants = new
            left, right = replace(left, agg, value), replace(right, agg, value)
            bound.add(value.name)
        if lit.op == "=":
            for var, other in ((left, right), (right, left)):
                if isinstance(var, ast.Var) and var.name not in bound and ast.term_vars(other) <= bound:
                    bound.add(var.name)
                    return [x + [f"({self.term(var)} == {self.term(other)})"] for x in variants]
        op = "==" if lit.op == "=" else lit.op
        if not ast.term_vars(left) and not ast.term_vars(right):
            # Constants only (e.g. a sign case of `8 / 2`): Python would answer a bool, which
            # pyDatalog cannot take as a literal. Decide it here: keep or drop the variants.
            return variants if COMPARE[op](constant(left), constant(right)) else []
        return [x + [f"({self.term(left)} {op} {self.term(right)})"] for x in variants]


def _ready(lit, bound, head, body, aggregates) -> bool:
    match lit:
        case ast.Negation(atom):
            return ast.literal_vars(atom) <= bound
        case ast.Comparison(op, left, right):
            for agg in ast.literal_aggregates(lit):
                if not set(aggregates[id(agg)][1]) <= bound:
                    return False
            if ast.term_vars(left) <= bound and ast.term_vars(right) <= bound:
                return True
            if op == "=":
                return any(isinstance(v, ast.Var) and ast.term_vars(o) <= bound for v, o in ((left, right), (right, left)))
    return False


def _raise_computed_error(rows: set[tuple], pos) -> None:
    """pyDatalog returns an exception raised by an expression (1 / 0) as a value; raise it instead."""
    for row in rows:
        for value in row:
            if isinstance(value, ZeroDivisionError):
                raise RuleError("division by zero while evaluating the rules for this relation "
                                "(pydatalog engine)", pos)
            if isinstance(value, BaseException):
                raise RuleError(f"{type(value).__name__} while evaluating the rules for this relation: {value} "
                                "(pydatalog engine)", pos)


@contextmanager
def _division_errors():
    try:
        yield
    except ZeroDivisionError:
        raise RuleError("division by zero while evaluating the rules (pydatalog engine)") from None


class PyDatalogEngine:
    """Evaluates a checked program with pyDatalog; the same `evaluate` as the fast engine."""

    def __init__(self, checked: CheckedProgram):
        self.checked = checked
        caller = Logic(True)  # whatever database the calling thread had stays its own
        Logic()  # a fresh database, made current only while this engine works
        self._logic = Logic(True)
        Logic(caller)
        self._names = itertools.count()

    @contextmanager
    def _current(self):
        caller = Logic(True)
        Logic(self._logic)
        try:
            yield
        finally:
            self._logic = Logic(True)
            Logic(caller)

    def evaluate(self, facts: dict[str, set], targets: Iterable[str] | None = None, **_ignored) -> Model:
        relations = {name: set(facts.get(name, ())) for name in self.checked.decls}
        strata = needed_strata(self.checked.strata, targets)
        with self._current(), _division_errors():
            pyDatalog.clear()
            for name, tuples in relations.items():
                self._assert(_pred(name), tuples, self.checked.decls[name].arity)
            for stratum in strata:
                for rel, tuples in self._stratum(stratum).items():
                    relations[rel] = relations[rel] | tuples  # an input relation may also have facts in rule files
                    self._assert(_pred(rel), tuples, self.checked.decls[rel].arity)
        return Model(relations)

    def _assert(self, pred: str, tuples: set, arity: int) -> None:
        pyDatalog.assert_fact(pred, *([_UNIT] * max(arity, 1)))  # defines the predicate even when empty
        pyDatalog.retract_fact(pred, *([_UNIT] * max(arity, 1)))
        for t in tuples:
            pyDatalog.assert_fact(pred, *(t if arity else (_UNIT,)))

    def _ask(self, pred: str, arity: int) -> set[tuple]:
        width = max(arity, 1)
        answer = pyDatalog.ask(f"{pred}({', '.join(f'V{i}' for i in range(width))})")
        rows = set(answer.answers) if answer is not None else set()
        return {()} if arity == 0 and rows else rows if arity else set()

    def _stratum(self, stratum) -> dict[str, set]:
        rels = frozenset(stratum.relations)
        aggregates = self._aggregates(stratum, rels)
        translator = _Translator(rels, aggregates)
        clauses: list[str] = []
        for rel in rels:  # every head predicate exists, even if no rule fires
            arity = self.checked.decls[rel].arity
            self._assert(_pred(rel, True), set(), arity)
        for rule in stratum.rules:
            if rule.is_fact:
                values = [constant_value(t) for t in rule.head.args] or [_UNIT]
                pyDatalog.assert_fact(_pred(rule.head.rel, True), *values)
                continue
            for head, rule_body in split_divisions(rule.head, rule.body):
                for body in translator.body(head, rule_body, set()):
                    clauses.append(self._clause(translator, head, body))
        pyDatalog.load("\n".join(translator.helpers + clauses))
        answers = {rel: self._ask(_pred(rel, True), self.checked.decls[rel].arity) for rel in rels}
        for rel, rows in answers.items():
            _raise_computed_error(rows, self.checked.rules_for(rel)[0].pos)
        return answers

    def _clause(self, translator: _Translator, head: ast.Atom, body: list[str]) -> str:
        head_args, tests = [], []
        for t in head.args:
            if isinstance(t, (ast.Var, ast.Num, ast.Str)):
                head_args.append(translator.term(t))
            else:  # an expression in the head: a fresh variable equal to it
                v = f"V__h{next(translator.fresh)}"
                head_args.append(v)
                tests.append(f"({v} == {translator.term(t)})")
        return f"{_pred(head.rel, True)}({', '.join(head_args) or _UNIT}) <= {' & '.join(body + tests)}"

    def _aggregates(self, stratum, rels) -> dict[int, tuple[str, list[str]]]:
        """Evaluate every aggregate of the stratum's rules (their bodies lie in lower strata)."""
        found: dict[int, tuple[str, list[str]]] = {}
        for rule in stratum.rules:
            for lit in rule.body:
                for agg in ast.literal_aggregates(lit):
                    outer = sorted(ast.aggregate_vars(agg) & outside_vars(rule.head, rule.body, agg))
                    name = f"agg_{next(self._names)}"
                    self._fold(agg, outer, name, rels)
                    found[id(agg)] = (f"{name}_v", outer)
        return found

    def _fold(self, agg: ast.Aggregate, outer: list[str], name: str, rels) -> None:
        """Ask for every group of the aggregate's body, fold each in Python, assert the values."""
        body, witness = _witnessed(agg.body, outer)
        positive = set().union(*(ast.literal_vars(lit) for lit in body if isinstance(lit, ast.Atom)))
        if not set(outer) <= positive:
            raise RuleError("the pydatalog engine needs each outer variable of an aggregate bound by an atom "
                            "inside it; use --engine fast", agg.pos)
        has_target = agg.target is not None
        if has_target:  # the target becomes a variable bound at the end of the body
            body = body + (ast.Comparison("=", ast.Var("_t"), agg.target),)
        translator = _Translator(rels, {})
        head = [_var(v) for v in outer + witness] + ([_var("_t")] if has_target else [])
        clauses = [f"{name}({', '.join(head) or _UNIT}) <= {' & '.join(variant)}"
                   for _, split in split_divisions(None, body)
                   for variant in translator.body(None, split, set())]
        pyDatalog.load("\n".join(translator.helpers + clauses))
        groups: dict[tuple, dict[tuple, int]] = {}
        rows = self._ask(name, len(head))
        _raise_computed_error(rows, agg.pos)
        for row in rows:
            key = row[: len(outer)]
            found = row[len(outer): len(row) - (1 if has_target else 0)]
            groups.setdefault(key, {})[found] = row[-1] if has_target else 1
        self._assert(f"{name}_v", set(), len(outer) + 1)
        self._assert(f"{name}_v_any", set(), len(outer))
        fold = {"count": len, "sum": sum, "min": min, "max": max}[agg.func]
        for key, values in groups.items():
            value = fold(values) if agg.func == "count" else fold(values.values())
            pyDatalog.assert_fact(f"{name}_v", *key, value)
            pyDatalog.assert_fact(f"{name}_v_any", *(key or (_UNIT,)))


def _witnessed(body: tuple, outer: list[str]) -> tuple[tuple, list[str]]:
    """The body and the variables whose distinct values an aggregate runs over, as Soufflé:
    with one positive atom, its matching tuples (wildcards named so they count); with
    several, distinct bindings of the named variables."""
    atoms = [lit for lit in body if isinstance(lit, ast.Atom)]
    if len(atoms) != 1:
        named = set().union(*(ast.literal_vars(lit) for lit in body)) if body else set()
        return body, sorted(named - set(outer))
    atom = atoms[0]
    args = tuple(ast.Var(f"_w{i}") if isinstance(t, ast.Wildcard) else t for i, t in enumerate(atom.args))
    named = ast.Atom(atom.rel, args, atom.pos)
    body = tuple(named if lit is atom else lit for lit in body)
    return body, sorted(ast.literal_vars(named) - set(outer))
