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
- `min`/`max` of an empty group derive nothing in Soufflé, `#sup`/`#inf` in clingo: guarded;
- a string functor (`to_number`, `cat`, ...) and a string test (`match`, `contains`) are
  `@f(...)` terms, computed during grounding by this module's `asp_f` functions (which
  compute what datalog/lang/values.py does): the engine gives them to clingo as its
  grounding context; `program_to_asp(..., script=True)` writes a `#script (python)` block
  that imports them, for `python -m clingo --enable-python` (the benchmarks). clingo grounds
  a rule's literals in an order of its own, so `to_number` of a symbol that holds no number
  gives no value (Soufflé would stop), and a rule that keeps such symbols out with `match`
  first gives Soufflé's answer.

What the translation cannot keep (floats, unsigned numbers, `eqrel`, choice domains,
subsumption, the functors below that have no clingo counterpart) is refused: one
`Unsupported` error naming the construct and its file:line. clingo's integers are 32-bit.

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
from types import SimpleNamespace

from ...errors import Unsupported
from ...pos import Pos
from ..analysis.checked import CheckedRules
from ..analysis.checks import outside_vars
from ..lang import ast
from ..lang import values as _values
from .model import Model
from .options import Capabilities, EngineOptions

_PLAIN = re.compile(r"[a-z][A-Za-z0-9_]*")
_RESERVED = {"not"}
_OPS = {"+": "+", "-": "-", "*": "*", "/": "/", "%": "\\"}
_COMPARE = {"=": "=", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
# The functors and tests computed by Python during grounding (`@name(...)`), see `script_functions`.
_FUNCTORS = ("to_number", "to_string", "cat", "strlen", "substr", "min", "max")
_TESTS = ("match", "contains")


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

    def __init__(self, rule: ast.Rule, functions: set[str] | None = None):
        self.rule = rule
        self.fresh = itertools.count(1)
        self.functions = functions if functions is not None else set()  # the `@f` the rule calls

    def refuse(self, what: str, node) -> Unsupported:
        pos = getattr(node, "pos", None)
        return Unsupported(f"the clingo translation has no {what}",
                           pos if isinstance(pos, Pos) and pos.line else self.rule.pos)

    def term(self, t: ast.Term, values: dict[int, str]) -> str:
        if getattr(t, "type", "") in ("float", "unsigned"):
            raise self.refuse(f"{t.type} values (clingo's numbers are integers)", t)
        match t:
            case ast.Var(name):
                return "V_" + name.replace("?", "_q_")
            case ast.Wildcard():
                return "_"
            case ast.Num(v):
                return str(v)
            case ast.Str(v):
                return quote(v)
            case ast.BinOp(op, left, right) if op in _OPS:
                return f"({self.term(left, values)} {_OPS[op]} {self.term(right, values)})"
            case ast.BinOp(op):
                raise self.refuse(f"operator `{op}`", t)
            case ast.Negative(operand):
                return f"-({self.term(operand, values)})"
            case ast.Aggregate():
                return values[id(t)]
            case ast.Functor(name, args) if name in _FUNCTORS:
                self.functions.add(name)
                return f"@{name}({', '.join(self.term(a, values) for a in args)})"
            case ast.Functor(name):
                raise self.refuse(f"functor `{name}`", t)
        raise self.refuse(f"term `{type(t).__name__}`", t)

    def atom(self, a: ast.Atom, values: dict[int, str]) -> str:
        return atom_text(a.rel, (self.term(x, values) for x in a.args))

    def literals(self, body: tuple[ast.Literal, ...], nested: bool) -> list[str]:
        out: list[str] = []
        for lit in body:
            values: dict[int, str] = {}
            for agg in ast.literal_aggregates(lit):
                if nested:
                    raise self.refuse("aggregate inside an aggregate", agg)
                out.extend(self.aggregate(agg, values))
            match lit:
                case ast.Atom():
                    out.append(self.atom(lit, values))
                case ast.Negation(atom):
                    out.append("not " + self.atom(atom, values))
                case ast.Comparison(op, left, right) if op in _COMPARE:
                    out.append(f"{self.term(left, values)} {_COMPARE[op]} {self.term(right, values)}")
                case ast.Comparison(op, left, right) if op.lstrip("!") in _TESTS:
                    test = op.lstrip("!")  # match(pattern, text), contains(part, text): 1 or 0
                    self.functions.add(test)
                    holds = 0 if op.startswith("!") else 1
                    out.append(f"@{test}({self.term(left, values)}, {self.term(right, values)}) = {holds}")
                case _:
                    raise self.refuse(f"literal `{getattr(lit, 'op', type(lit).__name__)}`", lit)
        return out

    def aggregate(self, agg: ast.Aggregate, values: dict[int, str]) -> list[str]:
        """`A = #f { element : condition }` (plus a guard for min/max), and A stands for the aggregate."""
        if agg.func not in ("count", "sum", "min", "max"):
            raise self.refuse(f"aggregate `{agg.func}`", agg)
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


def rule_to_asp(rule: ast.Rule, functions: set[str] | None = None) -> str:
    """One rule in clingo syntax; the `@f` functions it calls are added to `functions`."""
    return _RuleTranslator(rule, functions).translate()


def refuse_semantics(checked: CheckedRules) -> None:
    """Raise `Unsupported` for what the program declares that the translation cannot keep."""
    for rel, decl in checked.decls.items():
        if "eqrel" in decl.qualifiers or decl.choice:
            what = "eqrel" if "eqrel" in decl.qualifiers else "choice-domain"
            raise Unsupported(f"the clingo translation has no {what} (relation {rel})", decl.pos)
        if odd := [t for t in decl.types if t in ("float", "unsigned")]:
            raise Unsupported(f"the clingo translation has no {odd[0]} columns (relation {rel})", decl.pos)
    for stratum in checked.strata:
        if stratum.subsumptions:
            raise Unsupported("the clingo translation has no subsumption", stratum.subsumptions[0].pos)


def script(functions: Iterable[str]) -> str:
    """The `#script (python)` block that gives clingo the `@f` functions the rules call."""
    names = sorted(functions)
    if not names:
        return ""
    imports = ", ".join(f"asp_{n} as {n}" for n in names)
    return f"#script (python)\nfrom {__name__} import {imports}\n#end.\n"


def program_to_asp(checked: CheckedRules, show: Iterable[str] | None = None, with_script: bool = False) -> str:
    """Every rule of the checked program in clingo syntax; `show` limits the printed relations;
    `with_script` adds the `#script` block of the `@f` functions the rules call. A construct
    the translation cannot keep raises `Unsupported`, naming it and its file:line."""
    refuse_semantics(checked)
    functions: set[str] = set()
    lines = [f"% {rule.pos}\n{rule_to_asp(rule, functions)}" for rule in checked.program.rules]
    if with_script and functions:
        lines.insert(0, script(functions).rstrip("\n"))
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
        control.ground([("base", [])], context=FUNCTIONS)
        relations: dict[str, set] = {rel: set() for rel in self.checked.decls}

        def on_model(model):
            for symbol in model.symbols(atoms=True):
                rel = self._relation.get(symbol.name)
                if rel is not None:
                    relations[rel].add(tuple(_python(a) for a in symbol.arguments))

        control.solve(on_model=on_model)
        return Model(relations)


# ---- the `@f` functions (`script`): clingo symbols in, a clingo symbol out ----------------


def asp_match(pattern, text):
    import clingo

    return clingo.Number(int(_values.match(pattern.string, text.string)))


def asp_contains(part, text):
    import clingo

    return clingo.Number(int(_values.contains(part.string, text.string)))


def asp_to_number(text):
    """The number, or no value at all (Soufflé stops) where the symbol holds none: clingo
    grounds a rule's literals in an order of its own, so it may ask before the rule's
    `match` has kept the symbol out (collective.dl's fold_axis)."""
    import clingo

    try:
        return clingo.Number(_values.parse_number(text.string, "number"))
    except _values.EvaluationError:
        return []


def asp_to_string(number):
    import clingo

    return clingo.String(str(number.number))


def asp_cat(*parts):
    import clingo

    return clingo.String("".join(p.string for p in parts))


def asp_strlen(text):
    import clingo

    return clingo.Number(_values.strlen(text.string))


def asp_substr(text, start, length):
    import clingo

    return clingo.String(_values.substr(text.string, start.number, length.number))


def asp_min(*args):
    return min(args)


def asp_max(*args):
    return max(args)


FUNCTIONS = SimpleNamespace(**{name: globals()[f"asp_{name}"] for name in _FUNCTORS + _TESTS})  # the grounding context


def _python(symbol):
    import clingo

    if symbol.type == clingo.SymbolType.Number:
        return symbol.number
    if symbol.type == clingo.SymbolType.String:
        return symbol.string
    raise ValueError(f"clingo derived a value that is neither number nor symbol: {symbol}")
