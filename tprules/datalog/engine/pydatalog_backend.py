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

from pyDatalog import Logic, pyDatalog, pyEngine, pyParser

from ...errors import RuleError
from ..analysis.checked import CheckedRules
from ..analysis.checks import outside_vars
from ..analysis.strata import needed_strata
from ..lang import ast
from ..lang.constant import constant_value, fact_values, kind_of
from ..lang.values import EvaluationError, bits_float, compare, float_bits, one_evaluation, uwrap, wrap
from .expressions import constant_text, helper_namespace, python_expr, python_name, python_test
from .model import Model
from .options import Capabilities, EngineOptions

_UNIT = 0  # the placeholder column of a zero-arity relation


def _pred(rel: str, derived: bool = False) -> str:
    return ("d_" if derived else "r_") + _identifier(rel)


def _autoinc_in(rule: ast.Rule):
    """The first autoinc() of a rule, or None."""
    terms = list(rule.head.args)
    for lit in rule.body:
        match lit:
            case ast.Atom(_, args) | ast.Negation(ast.Atom(_, args)):
                terms.extend(args)
            case ast.Comparison(_, left, right):
                terms.extend((left, right))
    for term in terms:
        found = ast.functors_in(term, "autoinc")
        if found:
            return found[0]
    return None


def _identifier(rel: str) -> str:
    """A relation's name as a Python identifier (`?` and a component instance's `.` spelled out)."""
    return rel.replace("?", "_q_").replace(".", "_d_")


def _var(name: str) -> str:
    return python_name("V_", name)


class _Translator:
    """Turns one rule into pyDatalog clause text, in an order where every literal is bound.

    Joins, negation and recursion are pyDatalog's. A computed value (arithmetic, a functor,
    a comparison of computed values) is a Python lambda over the clause's variables, which
    pyDatalog calls once they are bound; the lambdas compute with tprules.datalog.lang.values
    (Soufflé's semantics: 64-bit wrap-around, truncating division, string functors).
    """

    def __init__(self, stratum_rels: frozenset[str], aggregates: dict[int, tuple[str, list[str]]], names):
        self.stratum_rels = stratum_rels
        self.aggregates = aggregates  # id(agg) → (value predicate, outer vars)
        self.fresh = names  # shared by the engine: a helper predicate's name is never reused
        self.helpers: list[str] = []  # projection predicates the clauses need

    def term(self, t: ast.Term) -> str:
        """A plain argument: a variable or a constant (a float as its bits)."""
        if isinstance(t, ast.Var):
            return _var(t.name)
        return constant_text(_held(constant_value(t), kind_of(t)))

    def computed(self, t: ast.Term) -> str:
        """A term as pyDatalog text: plain, or a lambda over its variables."""
        if isinstance(t, (ast.Var,) + ast.CONSTANTS) or not ast.term_vars(t):
            return self.term(t) if isinstance(t, (ast.Var,) + ast.CONSTANTS) else \
                constant_text(_held(constant_value(t), kind_of(t)))
        text = _expr(t)
        return self._lambda(f"_bf({text})" if kind_of(t) == "float" else text, ast.term_vars(t))

    @staticmethod
    def _lambda(body: str, names) -> str:
        return f"(lambda {', '.join(_var(n) for n in sorted(names))}: {body})"

    def atom(self, a: ast.Atom) -> str:
        name = _pred(a.rel, a.rel in self.stratum_rels)
        if not a.args:
            return f"{name}({_UNIT})"
        args = [f"V__w{next(self.fresh)}" if isinstance(t, ast.Wildcard) else self.term(t) for t in a.args]
        return f"{name}({', '.join(args)})"

    def body(self, head: ast.Atom | None, body: tuple[ast.Literal, ...], bound: set[str]) -> list[list[str]]:
        """Alternative bodies (an aggregate over an empty group adds one), each a list of literals."""
        variants: list[list[str]] = [[]]
        bound = set(bound)
        pending = list(body)
        while pending:
            lit: ast.Literal | None = next((x for x in pending if isinstance(x, ast.Atom)), None)
            if lit is None:
                lit = next((x for x in pending if _ready(x, bound, self.aggregates)), pending[0])
            pending.remove(lit)
            match lit:
                case ast.Atom():
                    # wildcards projected away: `n(_), n(_)` are tests, never a product
                    wild = any(isinstance(t, ast.Wildcard) for t in lit.args)
                    text = self.projection(lit) if wild else self.atom(lit)
                    bound |= {t.name for t in lit.args if isinstance(t, ast.Var)}
                    variants = [v + [text] for v in variants]
                case ast.Negation(atom):
                    neg = self._negation(atom)
                    variants = [v + neg for v in variants]
                case ast.Comparison():
                    variants = self._comparison(lit, variants, bound)
        return variants

    def _negation(self, atom: ast.Atom) -> list[str]:
        """`~p(...)`, its computed arguments bound to fresh variables first."""
        plain, computed = [], []
        for t in atom.args:
            if isinstance(t, (ast.Var, ast.Wildcard) + ast.CONSTANTS) or not ast.term_vars(t):
                plain.append(t if isinstance(t, (ast.Var, ast.Wildcard) + ast.CONSTANTS)
                             else ast.Str(constant_value(t)) if kind_of(t) == "symbol" else _literal(t))
            else:
                v = ast.Var(f".n{next(self.fresh)}", t.pos, kind_of(t))
                computed.append(f"({_var(v.name)} == {self.computed(t)})")
                plain.append(v)
        atom = ast.Atom(atom.rel, tuple(plain), atom.pos)
        if any(isinstance(t, ast.Wildcard) for t in atom.args):
            return computed + [f"~{self.projection(atom)}"]
        return computed + [f"~{self.atom(atom)}"]

    def projection(self, atom: ast.Atom) -> str:
        """A helper predicate over an atom's named, non-wildcard columns (for negation)."""
        keep = [t for t in atom.args if not isinstance(t, ast.Wildcard)]
        name = f"p_{_identifier(atom.rel)}_{next(self.fresh)}"
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
            value = ast.Var(f".a{next(self.fresh)}", agg.pos, kind_of(agg))
            key = [_var(o) for o in outer]
            with_group = f"{value_pred}({', '.join(key + [_var(value.name)])})"
            new = [x + [with_group] for x in variants]
            if agg.func in ("count", "sum"):  # an empty group counts and sums to 0
                empty = f"~{value_pred}_any({', '.join(key) or _UNIT})"
                zero = constant_text(0.0 if kind_of(agg) == "float" else 0)
                new += [x + [empty, f"({_var(value.name)} == {zero})"] for x in variants]
            variants = new
            left, right = ast.replace_term(left, agg, value), ast.replace_term(right, agg, value)
            bound.add(value.name)
        if lit.op == "=":
            for var, other in ((left, right), (right, left)):
                if isinstance(var, ast.Var) and var.name not in bound and ast.term_vars(other) <= bound:
                    bound.add(var.name)
                    if isinstance(other, ast.Functor) and other.name == "range":  # a generator
                        return [x + [f"{_var(var.name)}.in_({self._range(other)})"] for x in variants]
                    return [x + [f"({_var(var.name)} == {self.computed(other)})"] for x in variants]
            for var, other in ((left, right), (right, left)):
                if isinstance(other, ast.Functor) and other.name == "range":  # a bound value in a range
                    return [x + [f"{self.computed(var)}.in_({self._range(other)})"] for x in variants]
        if not ast.term_vars(left) and not ast.term_vars(right):
            # Constants only: Python would answer a bool, which pyDatalog cannot take as a
            # literal. Decide it here: keep or drop the variants.
            return variants if compare(lit.op, constant_value(left), constant_value(right)) else []
        plain = (ast.Var,) + ast.CONSTANTS
        if lit.op in ast.COMPARISONS and isinstance(left, plain) and isinstance(right, plain) \
                and kind_of(left) != "float" and kind_of(right) != "float":  # floats are held as bits
            op = "==" if lit.op == "=" else lit.op
            return [x + [f"({self.term(left)} {op} {self.term(right)})"] for x in variants]
        test = python_test(lit.op, _expr(left), _expr(right))
        flag = f"V__t{next(self.fresh)}"
        names = ast.term_vars(left) | ast.term_vars(right)
        return [x + [f"({flag} == {self._lambda(f'int({test})', names)})", f"({flag} == 1)"] for x in variants]

    def _range(self, gen: ast.Functor) -> str:
        text = _expr(gen)
        if kind_of(gen) == "float":
            text = f"list(map(_bf, {text}))"
        names = set().union(*(ast.term_vars(a) for a in gen.args))
        return self._lambda(text, names) if names else text


def _expr(term: ast.Term) -> str:
    """Python source for a term over the clause's variables (floats turned back from bits)."""
    return python_expr(term, lambda v: f"_fb({_var(v.name)})" if v.type == "float" else _var(v.name))


def _held(value, kind: str):
    """A value as the pyDatalog engine holds it: a float as its 64 bits, else itself."""
    return float_bits(value) if kind == "float" else value


def _encode(tuples, types: tuple[str, ...]) -> set:
    if "float" not in types:
        return tuples
    return {tuple(_held(v, k) for v, k in zip(t, types)) for t in tuples}


def _decode(tuples, types: tuple[str, ...]) -> set:
    if "float" not in types:
        return tuples
    return {tuple(bits_float(v) if k == "float" else v for v, k in zip(t, types)) for t in tuples}


def _literal(term: ast.Term) -> ast.Term:
    value = constant_value(term)
    kind = kind_of(term)
    if kind == "float":
        return ast.Float(value, term.pos, "float")
    if kind == "unsigned":
        return ast.Unsigned(value, term.pos, "unsigned")
    return ast.Num(value, term.pos, "number")


def _ready(lit, bound, aggregates) -> bool:
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
            if isinstance(value, (ZeroDivisionError, EvaluationError)):
                why = value if isinstance(value, EvaluationError) else "division by zero"
                raise RuleError(f"{why} while evaluating the rules for this relation (pydatalog engine)", pos)
            if isinstance(value, BaseException):
                raise RuleError(f"{type(value).__name__} while evaluating the rules for this relation: {value} "
                                "(pydatalog engine)", pos)


@contextmanager
def _division_errors():
    try:
        yield
    except (ZeroDivisionError, EvaluationError) as err:
        why = err if isinstance(err, EvaluationError) else "division by zero"
        raise RuleError(f"{why} while evaluating the rules (pydatalog engine)") from None


class PyDatalogEngine:
    """Evaluates a checked program with pyDatalog; the same `evaluate` as the fast engine."""

    def __init__(self, checked: CheckedRules):
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
        precision, pyEngine.Float_Precision = pyEngine.Float_Precision, None  # pyDatalog would round floats
        try:
            yield
        finally:
            pyEngine.Float_Precision = precision
            self._logic = Logic(True)
            Logic(caller)

    capabilities = Capabilities(incremental=False, rounds=False)

    @one_evaluation
    def evaluate(self, facts: dict[str, set], targets: Iterable[str] | None = None, base=None, only=None) -> Model:
        EngineOptions.of(targets, base, only).require(self.capabilities, "pydatalog")
        decls = self.checked.decls
        strata = needed_strata(self.checked.strata, targets)
        for stratum in strata:
            for rel in stratum.relations:
                if "eqrel" in decls[rel].qualifiers:
                    raise RuleError(f"the pydatalog engine cannot evaluate the eqrel relation {rel}: pyDatalog does "
                                    "not terminate on a symmetric transitive closure; use --engine fast",
                                    decls[rel].pos)
                if decls[rel].choice:
                    raise RuleError(f"the pydatalog engine cannot evaluate the choice-domain of {rel}: pyDatalog "
                                    "derives every tuple at once, with no order to choose by; use --engine fast",
                                    decls[rel].pos)
            for rule in stratum.subsumptions[:1]:
                raise RuleError(f"the pydatalog engine cannot evaluate subsumption ({rule.head.rel}): pyDatalog "
                                "only adds tuples, it never deletes a dominated one; use --engine fast", rule.pos)
            for rule in stratum.rules:
                counter = _autoinc_in(rule)
                if counter is not None:
                    raise RuleError("the pydatalog engine cannot evaluate autoinc(): pyDatalog computes an "
                                    "expression once for equal inputs, not once per tuple; use --engine fast",
                                    counter.pos)
        held = {name: _encode(set(facts.get(name, ())), decls[name].types) for name in decls}
        with self._current(), _division_errors():
            pyDatalog.clear()
            for name, tuples in held.items():
                self._assert(_pred(name), tuples, decls[name].arity)
            for stratum in strata:
                for rel, tuples in self._stratum(stratum, held).items():
                    held[rel] = held[rel] | tuples  # an input relation may also have facts in rule files
                    self._assert(_pred(rel), tuples, decls[rel].arity)
        relations = {name: _decode(tuples, decls[name].types) if name not in facts else set(facts[name])
                     for name, tuples in held.items()}
        for name in facts:
            if name in decls and held[name] != _encode(set(facts[name]), decls[name].types):
                relations[name] = _decode(held[name], decls[name].types)
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

    def _load(self, clauses: list[str]) -> None:
        """Load clause text; its lambdas compute with tprules.datalog.lang.values."""
        if clauses:
            pyParser.load("\n".join(clauses), newglobals=helper_namespace())

    def _stratum(self, stratum, given: dict[str, set]) -> dict[str, set]:
        rels = frozenset(stratum.relations)
        aggregates = self._aggregates(stratum, rels)
        translator = _Translator(rels, aggregates, self._names)
        clauses: list[str] = []
        for rel in rels:  # every head predicate exists, even if no rule fires
            arity = self.checked.decls[rel].arity
            self._assert(_pred(rel, True), given.get(rel, set()), arity)  # an input's own facts count (eqrel)
        for rule in stratum.rules:
            if rule.is_fact:
                types = self.checked.decls[rule.head.rel].types
                values = [_held(v, k) for v, k in zip(fact_values(rule), types)] or [_UNIT]
                pyDatalog.assert_fact(_pred(rule.head.rel, True), *values)
                continue
            for body in translator.body(rule.head, rule.body, set()):
                if not body:  # every literal was decided already (`1 < 2`, true): a fact
                    types = self.checked.decls[rule.head.rel].types
                    values = [_held(v, k) for v, k in zip(fact_values(rule), types)] or [_UNIT]
                    pyDatalog.assert_fact(_pred(rule.head.rel, True), *values)
                    continue
                clauses.append(self._clause(translator, rule.head, body))
        self._load(translator.helpers + clauses)
        answers = {rel: self._ask(_pred(rel, True), self.checked.decls[rel].arity) for rel in rels}
        for rel, rows in answers.items():
            _raise_computed_error(rows, self.checked.rules_for(rel)[0].pos)
        return answers

    def _clause(self, translator: _Translator, head: ast.Atom, body: list[str]) -> str:
        head_args, tests = [], []
        for t in head.args:
            if isinstance(t, (ast.Var,) + ast.CONSTANTS):
                head_args.append(translator.term(t))
            else:  # an expression in the head: a fresh variable equal to it
                v = f"V__h{next(translator.fresh)}"
                head_args.append(v)
                tests.append(f"({v} == {translator.computed(t)})")
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
        nested = next((a for lit in body for a in ast.literal_aggregates(lit)), None)
        if nested is not None:
            raise RuleError(f"the pydatalog engine cannot evaluate a {nested.func} inside a {agg.func}; "
                            "use --engine fast", nested.pos)
        positive = set().union(*(ast.literal_vars(lit) for lit in body if isinstance(lit, ast.Atom)))
        if not set(outer) <= positive:
            raise RuleError("the pydatalog engine needs each outer variable of an aggregate bound by an atom "
                            "inside it; use --engine fast", agg.pos)
        target = agg.target
        has_target = target is not None
        if target is not None:  # the target becomes a variable bound at the end of the body
            body = body + (ast.Comparison("=", ast.Var(".t", agg.pos, kind_of(target)), target, agg.pos,
                                          kind_of(target)),)
        translator = _Translator(rels, {}, self._names)
        head = [_var(v) for v in outer + witness] + ([_var(".t")] if has_target else [])
        clauses = [f"{name}({', '.join(head) or _UNIT}) <= {' & '.join(variant)}"
                   for variant in translator.body(None, body, set())]
        self._load(translator.helpers + clauses)
        groups: dict[tuple, dict[tuple, int | float]] = {}
        rows = self._ask(name, len(head))
        _raise_computed_error(rows, agg.pos)
        target_kind = kind_of(target) if target is not None else "number"
        for row in rows:
            key = row[: len(outer)]
            found = row[len(outer): len(row) - (1 if has_target else 0)]
            value = row[-1] if has_target else 1
            groups.setdefault(key, {})[found] = bits_float(value) if target_kind == "float" else value
        self._assert(f"{name}_v", set(), len(outer) + 1)
        self._assert(f"{name}_v_any", set(), len(outer))
        kind = kind_of(agg)
        fold = {"count": len, "sum": _sum(kind), "min": min, "max": max, "mean": _mean}[agg.func]
        for key, values in groups.items():
            value = fold(values) if agg.func == "count" else _held(fold(list(values.values())), kind)
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
    args = tuple(ast.Var(f".w{i}", t.pos, t.type) if isinstance(t, ast.Wildcard) else t for i, t in enumerate(atom.args))
    named_atom = ast.Atom(atom.rel, args, atom.pos)
    body = tuple(named_atom if lit is atom else lit for lit in body)
    return body, sorted(ast.literal_vars(named_atom) - set(outer))


def _sum(kind: str):
    if kind == "float":
        return lambda values: sum(values, 0.0)
    fit = uwrap if kind == "unsigned" else wrap
    return lambda values: fit(sum(values))


def _mean(values: list) -> float:
    return sum(float(v) for v in values) / len(values)
