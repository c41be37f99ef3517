"""The checked program as an answer-set program (clingo's language), and an engine that runs it.

A stratified Datalog program has exactly one answer set, which clingo's grounder computes
outright; so clingo is an independent third evaluator of the same rules: the benchmarks
time it, and the exactness tests compare every relation it derives with ours.

The translation keeps Soufflé's semantics where the two languages differ:
- symbols are clingo strings (`rel("sym", 3).`), compared alphabetically in both;
- `/` and `%` truncate toward zero in both; `%` is written `\\`;
- an aggregate becomes `A = #f { ... }` beside its comparison, never inside a term;
- with one positive atom an aggregate runs over that atom's matching tuples (its whole
  argument tuple is the element), with several over distinct bindings of its own named
  variables (see datalog/engine/compiled_rules.py);
- `min`/`max` of an empty group derive nothing in Soufflé, `#sup`/`#inf` in clingo: guarded.

>>> from tprules.datalog.analysis import check_rules
>>> from tprules.datalog.lang.parser import parse_text
>>> prog = check_rules(parse_text('''
... .decl e(a: symbol, b: number)
... .input e
... .decl n(a: symbol, c: number)
... n(A, C) :- e(A, _), C = count : { e(A, _) }.'''))
>>> print(program_to_asp(prog).strip().splitlines()[-1])
n(V_A, V_C) :- e(V_A, _), A_1 = #count { V_A, W_2 : e(V_A, W_2) }, V_C = A_1.
>>> sorted(ClingoEngine(prog).evaluate({"e": {("x", 1), ("x", 2)}}).tuples("n"))
[('x', 2)]
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping

from ..analysis.checked import CheckedRules
from ..analysis.checks import outside_vars
from ..lang import ast
from .model import Model
from .options import Capabilities, EngineOptions

_PLAIN = re.compile(r"[a-z][A-Za-z0-9_]*")
_RESERVED = {"not"}
_OPS = {"+": "+", "-": "-", "*": "*", "/": "/", "%": "\\"}
_COMPARE = {"=": "=", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


def predicate(rel: str) -> str:
    """The clingo name of a relation: itself when it is a plain lowercase identifier."""
    if _PLAIN.fullmatch(rel) and rel not in _RESERVED and not rel.startswith("r__"):
        return rel
    return "r__" + "".join(c if c.isalnum() else f"_{ord(c):x}_" for c in rel)


def quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def value(v) -> str:
    return quote(v) if isinstance(v, str) else str(int(v))


def atom_text(rel: str, args: Iterable[str]) -> str:
    args = list(args)
    return f"{predicate(rel)}({', '.join(args)})" if args else predicate(rel)


class _RuleTranslator:
    """Translates one rule; fresh names (aggregate values, named wildcards) are numbered per rule."""

    def __init__(self, rule: ast.Rule):
        self.rule = rule
        self.fresh = itertools.count(1)

    def term(self, t: ast.Term, values: dict[int, str]) -> str:
        match t:
            case ast.Var(name):
                return "V_" + name.replace("?", "_q_")
            case ast.Wildcard():
                return "_"
            case ast.Num(v):
                return str(v)
            case ast.Str(v):
                return quote(v)
            case ast.BinOp(op, left, right):
                return f"({self.term(left, values)} {_OPS[op]} {self.term(right, values)})"
            case ast.Negative(operand):
                return f"-({self.term(operand, values)})"
            case ast.Aggregate():
                return values[id(t)]
        raise TypeError(t)

    def atom(self, a: ast.Atom, values: dict[int, str]) -> str:
        return atom_text(a.rel, (self.term(x, values) for x in a.args))

    def literals(self, body: tuple[ast.Literal, ...], nested: bool) -> list[str]:
        out: list[str] = []
        for lit in body:
            values: dict[int, str] = {}
            for agg in ast.literal_aggregates(lit):
                if nested:
                    raise NotImplementedError("an aggregate inside an aggregate has no clingo translation here")
                out.extend(self.aggregate(agg, values))
            match lit:
                case ast.Atom():
                    out.append(self.atom(lit, values))
                case ast.Negation(atom):
                    out.append("not " + self.atom(atom, values))
                case ast.Comparison(op, left, right):
                    out.append(f"{self.term(left, values)} {_COMPARE[op]} {self.term(right, values)}")
        return out

    def aggregate(self, agg: ast.Aggregate, values: dict[int, str]) -> list[str]:
        """`A = #f { element : condition }` (plus a guard for min/max), and A stands for the aggregate."""
        name = f"A_{next(self.fresh)}"
        values[id(agg)] = name
        body = agg.body
        atoms = [lit for lit in body if isinstance(lit, ast.Atom)]
        condition = self.literals(body, nested=True)
        if len(atoms) == 1:  # over the atom's tuples: name its wildcards, the whole tuple is the element
            atom = atoms[0]
            witness = [f"W_{next(self.fresh)}" if isinstance(a, ast.Wildcard) else self.term(a, {}) for a in atom.args]
            condition[next(i for i, lit in enumerate(body) if lit is atom)] = atom_text(atom.rel, witness)
        else:  # over distinct bindings of the aggregate's own named variables
            outer = ast.aggregate_vars(agg) & outside_vars(self.rule.head, self.rule.body, agg)
            witness = [self.term(ast.Var(v), {}) for v in sorted(ast.aggregate_vars(agg) - outer)]
        element = ([self.term(agg.target, {})] if agg.target is not None else []) + witness
        if not element:
            element = ["0"]
        text = [f"{name} = #{agg.func} {{ {', '.join(element)} : {', '.join(condition)} }}"]
        if agg.func == "min":
            text.append(f"{name} != #sup")
        elif agg.func == "max":
            text.append(f"{name} != #inf")
        return text

    def translate(self) -> str:
        head = self.atom(self.rule.head, {})
        if self.rule.is_fact:
            return head + "."
        return f"{head} :- {', '.join(self.literals(self.rule.body, nested=False))}."


def rule_to_asp(rule: ast.Rule) -> str:
    return _RuleTranslator(rule).translate()


def program_to_asp(checked: CheckedRules, show: Iterable[str] | None = None) -> str:
    """Every rule of the checked program in clingo syntax; `show` limits the printed relations."""
    lines = [f"% {rule.pos}\n{rule_to_asp(rule)}" for rule in checked.program.rules]
    if show is not None:
        lines.append("#show.")
        lines.extend(f"#show {predicate(rel)}/{checked.decls[rel].arity}." for rel in show)
    return "\n".join(lines) + "\n"


def facts_to_asp(relations: Mapping[str, Iterable[tuple]]) -> str:
    """Facts as clingo atoms, one a line: `op("mm0", "matmul").`"""
    out: list[str] = []
    for rel, tuples in relations.items():
        name = predicate(rel)
        for t in tuples:
            out.append(f"{name}({', '.join(value(v) for v in t)})." if t else f"{name}.")
    return "\n".join(out) + "\n"


class ClingoEngine:
    """Evaluates a checked program with clingo; the same `evaluate` as the other engines."""

    def __init__(self, checked: CheckedRules):
        self.checked = checked
        self.rules = program_to_asp(checked)
        self._relation = {predicate(rel): rel for rel in checked.decls}

    capabilities = Capabilities(incremental=False, rounds=False)

    def evaluate(self, facts: dict[str, set], targets=None, base=None, only=None) -> Model:
        """Every relation, whatever the targets (clingo grounds the whole program)."""
        import clingo

        EngineOptions.of(targets, base, only).require(self.capabilities, "clingo")

        control = clingo.Control(["--warn=none"])
        known = {rel: tuples for rel, tuples in facts.items() if rel in self.checked.decls}
        control.add("base", [], self.rules + facts_to_asp(known))
        control.ground([("base", [])])
        relations: dict[str, set] = {rel: set() for rel in self.checked.decls}

        def on_model(model):
            for symbol in model.symbols(atoms=True):
                rel = self._relation.get(symbol.name)
                if rel is not None:
                    relations[rel].add(tuple(_python(a) for a in symbol.arguments))

        control.solve(on_model=on_model)
        return Model(relations)


def _python(symbol):
    import clingo

    if symbol.type == clingo.SymbolType.Number:
        return symbol.number
    if symbol.type == clingo.SymbolType.String:
        return symbol.string
    raise ValueError(f"clingo derived a value that is neither number nor symbol: {symbol}")
