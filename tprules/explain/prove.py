"""Proof trees of tuples that hold, found over an evaluated model (provenance as its own pass).

For a derived tuple, the first rule (in source order) with bindings whose body holds in
the model gives the node; its children prove the body literals. In a recursive stratum
the body's tuples of the same stratum must come from strictly earlier rounds
(`Model.rounds`), so every proof is well-founded and as short as the evaluation's own
derivation. Input facts are leaves with their fact file:line; facts written in rule
files are leaves with the rule file:line.
"""

from __future__ import annotations

from ..datalog.analysis.checked import CheckedRules
from ..datalog.facts.base import FactBase
from ..datalog.lang import ast
from ..datalog.lang.constant import constant_value
from ..datalog.lang.printer import print_rule_origin, print_term
from ..program.schema import COMPUTED
from .proof import AggregateValue, Checked, Computed, Derived, Elided, Fact, Proof, Shown, Unproven
from .solve import Solver
from .terms import atom_text, bindings, instantiated, substitute

DEFAULT_DEPTH = 6  # levels of derived tuples shown before subproofs are elided
AGGREGATE_SHOWN = 12  # contributions of an aggregate shown under it
COMPUTED_NOTES = {"target": "the shim asked", "topo": "topological order"}  # short words for proof leaves


class Prover:
    """Builds proof trees; keeps the ids of elided subtrees so they can be expanded later."""

    def __init__(self, checked: CheckedRules, model, facts: FactBase, depth: int | None = DEFAULT_DEPTH):
        self.checked, self.model, self.facts = checked, model, facts
        self.solver = Solver(model)
        self.depth = depth  # None: no limit
        self._stratum = {rel: s for s in checked.strata for rel in s.relations}
        self.rules: dict[str, list[ast.Rule]] = {}
        self.rule_facts: dict[str, dict[tuple, ast.Rule]] = {}
        for rule in checked.program.rules:
            if rule.is_fact:
                values = tuple(constant_value(a) for a in rule.head.args)
                self.rule_facts.setdefault(rule.head.rel, {}).setdefault(values, rule)
            else:
                self.rules.setdefault(rule.head.rel, []).append(rule)
        self._instances: dict[tuple[str, tuple], tuple | None] = {}
        self._ids: dict[tuple, int] = {}
        self.elided: dict[int, tuple] = {}  # id → ("proof", rel, tuple) | ("why-not", atom)
        self._shown: set[tuple[str, tuple]] = set()  # derived tuples expanded in the current explanation

    def begin(self) -> None:
        """Start a new explanation: tuples proven in earlier ones are expanded again."""
        self._shown.clear()

    # -- elision -----------------------------------------------------------------------

    def elide(self, key: tuple, text: str, what: str) -> Elided:
        number = self._ids.get(key)
        if number is None:
            number = self._ids[key] = len(self._ids) + 1
            self.elided[number] = key
        return Elided(number, text, what)

    def cut(self, level: int) -> bool:
        return self.depth is not None and level > self.depth

    # -- proofs ------------------------------------------------------------------------

    def is_derived(self, rel: str) -> bool:
        return rel in self.rules

    def prove(self, rel: str, values: tuple, level: int = 1) -> Proof:
        """The proof of a tuple that holds; `level` 1 is the root."""
        text = atom_text(rel, values)
        pos = self.facts.where(rel, values)
        if pos is not None:
            return Fact(text, rel, values, pos)
        rule_fact = self.rule_facts.get(rel, {}).get(values)
        if rule_fact is not None:
            return Fact(text, rel, values, rule_fact.pos, in_rules=True)
        if rel in COMPUTED and rel not in self.rules:
            return Computed(text, rel, values, COMPUTED_NOTES.get(rel, COMPUTED[rel].meaning))
        if rel not in self.rules:
            return Fact(text, rel, values, None)
        if self.cut(level):
            return self.elide(("proof", rel, values), text, "proof")
        found = self.instance(rel, values)
        if found is None:
            return Unproven(text, "no rule instance derives it from earlier tuples (the model and the rules disagree)")
        rule, env, matched = found
        if (rel, values) in self._shown:
            return Shown(text, rule.pos)
        self._shown.add((rel, values))
        children = tuple(self._children(rule, env, matched, level))
        return Derived(text, rel, values, rule.pos, print_rule_origin(rule), bindings(rule, env), children)

    def instance(self, rel: str, values: tuple):
        """(rule, bindings, {literal index: tuple}) of the first rule instance deriving the tuple."""
        key = (rel, values)
        if key not in self._instances:
            self._instances[key] = self._find_instance(rel, values)
        return self._instances[key]

    def _find_instance(self, rel: str, values: tuple):
        admit = self._admit(rel, values)
        stratum = self._stratum.get(rel)
        late = frozenset(stratum.relations) if stratum is not None and stratum.recursive else frozenset()
        for rule in self.rules.get(rel, ()):
            unified = unify(rule.head, values)
            if unified is None:
                continue
            env, deferred = unified
            for sol, matched in self.solver.solutions(rule.body, env, head=rule.head, admit=admit, late=late):
                if all(self.solver.value(term, sol) == v for term, v in deferred):
                    return rule, sol, matched
        return None

    def rank(self, rel: str, values: tuple) -> int:
        """The round a tuple of a recursive stratum was first derived in; facts of rule files rank first."""
        if values in self.rule_facts.get(rel, ()):
            return -1
        return self.solver.read.round(rel, values)

    def _admit(self, rel: str, values: tuple):
        stratum = self._stratum.get(rel)
        if stratum is None or not stratum.recursive:
            return None
        mine = self.rank(rel, values)
        same = frozenset(stratum.relations)
        return lambda r, t: r not in same or self.rank(r, t) < mine

    def _children(self, rule: ast.Rule, env: dict, matched: dict, level: int):
        plan = self.solver.plan(rule.body, rule.head)
        for i, lit in enumerate(rule.body):
            match lit:
                case ast.Atom(rel):
                    yield self.prove(rel, matched[i], level + 1)
                case ast.Negation():
                    yield Checked("negation", instantiated(lit, env), "no such tuple")
                case ast.Comparison():
                    yield from self._comparison(plan.lits[i], env, level)

    def _comparison(self, plit, env: dict, level: int):
        """An aggregate node per aggregate, then the comparison itself unless it only names the value."""
        values = {}
        for agg, outer in plit.aggs:
            result = self.solver.aggregate(agg, outer, env)
            values[id(agg)] = result.value
            yield self.aggregate_node(agg, env, result, level)
        cmp = plit.lit
        names_value = cmp.op == "=" and any(isinstance(a, ast.Var) and isinstance(b, ast.Aggregate)
                                            for a, b in ((cmp.left, cmp.right), (cmp.right, cmp.left)))
        if not names_value:
            yield Checked("comparison", instantiated(cmp, env, values), "true")

    def aggregate_node(self, agg: ast.Aggregate, env: dict, result, level: int) -> AggregateValue:
        children, seen = [], set()
        for contribution in result.witnesses[:AGGREGATE_SHOWN]:
            for rel, values in contribution:
                if (rel, values) not in seen:
                    seen.add((rel, values))
                    children.append(self.prove(rel, values, level + 1))
        more = max(0, len(result.witnesses) - AGGREGATE_SHOWN)
        return AggregateValue(print_term(substitute(agg, env)), result.value, tuple(children), more)


def unify(head: ast.Atom, values: tuple):
    """(bindings, [(head term, value) to check after the body]) or None when the head cannot match."""
    env: dict = {}
    deferred = []
    for term, value in zip(head.args, values):
        match term:
            case ast.Var(name):
                if env.setdefault(name, value) != value:
                    return None
            case ast.Num(v) | ast.Str(v):
                if v != value:
                    return None
            case _:
                deferred.append((term, value))
    return env, deferred
