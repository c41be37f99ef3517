"""Why an atom does not hold: for each rule that could derive it, the first body literal
that fails (the body evaluated in source order over the model), with the bindings up to
there. A failing negation names the tuples that block it, with their proofs; a failing
positive atom of a derived relation is explained in turn, down to the depth limit.
"""

from __future__ import annotations

from dataclasses import replace

from ..datalog.lang import ast
from ..datalog.lang.printer import print_literal, print_rule_origin
from ..program.schema import COMPUTED
from .proof import Attempt, WhyNot
from .prove import Prover, unify
from .terms import atom_text, bindings, instantiated, pattern_key, substitute_atom

BLOCKING_SHOWN = 8  # blocking tuples proven under a failing negation
SEARCH_BUDGET = 200_000  # tuples tried per rule before a why-not search reports what it has


class WhyNotFinder:
    def __init__(self, prover: Prover):
        self.prover = prover
        self.solver = prover.solver
        self._open: list[str] = []  # patterns being explained, to stop at a recursive relation

    def why_not(self, atom: ast.Atom, level: int = 1) -> WhyNot:
        """Why no tuple matches `atom` (constants, variables, `_`)."""
        rel = atom.rel
        text = print_literal(atom)
        rules = self.prover.rules.get(rel, [])
        if not rules:
            return WhyNot(text, rel, self._input_note(rel))
        key = pattern_key(atom)
        self._open.append(key)
        try:
            attempts = []
            for rule in rules:
                unified = _unify_pattern(rule.head, atom)
                if unified is not None:
                    attempts.append(self._attempt(rule, unified, level, atom))
        finally:
            self._open.pop()
        if not attempts:
            where = ", ".join(f"{r.pos.file}:{r.pos.line}" for r in rules)
            return WhyNot(text, rel, f"no rule for {rel} has a head that matches (its rules: {where})")
        count = f"{len(attempts)} rule{'s' if len(attempts) > 1 else ''}"
        return WhyNot(text, rel, f"{count} could derive it; none holds", tuple(attempts))

    def _input_note(self, rel: str) -> str:
        """Why an input relation has no matching tuple, as the root note of a why-not."""
        if rel in COMPUTED:
            return f"{rel} is computed by tprules ({COMPUTED[rel].meaning}); no tuple matches"
        if self.prover.rule_facts.get(rel):
            return f"no fact of {rel} in the rule files matches"
        return f"{rel} is an input relation: {self._no_fact(rel)}"

    def _no_fact(self, rel: str) -> str:
        """The failure of an input atom, naming the files it was looked up in."""
        files = self.prover.facts.files.get(rel)
        if rel in COMPUTED:
            return "no tuple matches (computed by tprules)"
        if files:
            return f"no line of {', '.join(files)} matches"
        return f"no tuple matches (no {rel}.facts: an empty relation)"

    def _attempt(self, rule: ast.Rule, env: dict, level: int, atom: ast.Atom) -> Attempt:
        reach = self.solver.deepest(rule.body, env, rule.head, SEARCH_BUDGET)
        attempt = self._failure(rule, reach, level, atom, env)
        return replace(attempt, reached=max(1, reach.reached)) if attempt.failed is not None else attempt

    def _failure(self, rule: ast.Rule, reach, level: int, atom: ast.Atom, env: dict) -> Attempt:
        text = print_rule_origin(rule)
        bound = bindings(rule, reach.env)
        stopped = f" (search stopped after {SEARCH_BUDGET} tuples; the deepest failure so far)" if reach.stopped else ""
        if reach.holds:
            deleted = self._dominated(rule, env, atom, level)
            if deleted is not None:
                clause, dominating, proof, found = deleted
                return Attempt(rule.pos, text, bindings(rule, found), None,
                               f"its body holds, but the subsumptive clause at {clause.pos.file}:{clause.pos.line} "
                               f"deletes it: {dominating} dominates it", (proof,))
            return Attempt(rule.pos, text, bindings(rule, reach.env), None,
                           "its body holds, but the head's values differ from the atom's")
        if reach.failed is None:
            return Attempt(rule.pos, text, bound, None, "no binding reaches the body" + stopped)
        lit = rule.body[reach.failed]
        match lit:
            case ast.Atom(rel):
                pattern = substitute_atom(lit, reach.env)
                failed = print_literal(pattern)
                if not self.prover.is_derived(rel):
                    return Attempt(rule.pos, text, bound, failed, self._no_fact(rel) + stopped)
                if pattern_key(pattern) in self._open:  # a recursive relation: answered above
                    return Attempt(rule.pos, text, bound, failed, "no tuple matches (asked above)" + stopped)
                return Attempt(rule.pos, text, bound, failed, "no tuple matches" + stopped,
                               nested=self._nested(pattern, level))
            case ast.Negation(atom):
                pattern = substitute_atom(atom, reach.env)
                blockers = self.solver.matching(pattern)
                proofs = tuple(self.prover.prove(atom.rel, t, level + 1) for t in blockers[:BLOCKING_SHOWN])
                noun = "tuple" if len(blockers) == 1 else "tuples"
                return Attempt(rule.pos, text, bound, "!" + print_literal(pattern),
                               f"blocked by {len(blockers)} {noun}" + stopped, proofs,
                               max(0, len(blockers) - BLOCKING_SHOWN))
            case ast.Comparison():
                return self._comparison(rule, text, bound, reach, stopped)
        raise TypeError(lit)

    def _dominated(self, rule: ast.Rule, env: dict, atom: ast.Atom, level: int):
        """(the subsumptive clause, the dominating tuple, its proof, the rule's bindings) when
        the rule derives the atom asked about and a subsumptive clause deleted it; else None."""
        asked = tuple(a.value if isinstance(a, (ast.Num, ast.Str)) else None for a in atom.args)
        clauses = [c for s in self.prover.checked.strata for c in s.subsumptions if c.head.rel == rule.head.rel]
        if None in asked or not clauses:
            return None
        derives = next((found for found, _ in self.solver.solutions(rule.body, env, rule.head)
                        if tuple(self.solver.value(t, found) for t in rule.head.args) == asked), None)
        if derives is None:
            return None
        for clause in clauses:
            unified = unify(clause.head, asked)
            if unified is None:
                continue
            assert clause.dominating is not None  # a subsumptive clause
            # the clause's body: the dominated tuple (gone from the model), then the rest
            for found, _ in self.solver.solutions(clause.body[1:], unified[0], clause.head):
                dominating = tuple(self.solver.value(t, found) for t in clause.dominating.args)
                proof = self.prover.prove(rule.head.rel, dominating, level + 1)
                return clause, atom_text(rule.head.rel, dominating), proof, derives
        return None

    def _comparison(self, rule, text, bound, reach, stopped) -> Attempt:
        plit = self.solver.plan(rule.body, rule.head).lits[reach.failed]
        values = {}
        for agg, outer in plit.aggs:
            result = self.solver.aggregate(agg, outer, reach.env)
            if result.value is None:
                failed = instantiated(plit.lit, reach.env)
                return Attempt(rule.pos, text, bound, failed, f"{agg.func} over no tuples" + stopped)
            values[id(agg)] = result.value
        failed = instantiated(plit.lit, reach.env)
        shown = instantiated(plit.lit, reach.env, values)
        reason = "false" if shown == failed else f"false: {shown}"
        return Attempt(rule.pos, text, bound, failed, reason + stopped)

    def _nested(self, pattern: ast.Atom, level: int):
        if self.prover.cut(level + 1):
            return self.prover.elide(("why-not", pattern), print_literal(pattern), "why-not")
        return self.why_not(pattern, level + 1)


def _unify_pattern(head: ast.Atom, atom: ast.Atom) -> dict | None:
    """Bindings of the head's variables from the atom's constants; None when they cannot match."""
    env: dict = {}
    for term, want in zip(head.args, atom.args):
        if not isinstance(want, (ast.Num, ast.Str)):
            continue
        match term:
            case ast.Var(name):
                if env.setdefault(name, want.value) != want.value:
                    return None
            case ast.Num(v) | ast.Str(v):
                if v != want.value:
                    return None
    return env
