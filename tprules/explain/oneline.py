"""One-line explanations of verdict tuples, for diffs of verdicts (`tprules golden`, `tprules diff`).

Built from the explainer's proofs and why-not trees, never written by hand:

- a tuple that holds: the rule that derives it, followed through pass-through rules such as
  `refused(F, R) :- base_refused(F, R).`, with the body's bindings; a statement is shown
  with its place;
- `legal(f)` that does not hold: the refusals that block it, each with its deriving rule;
- any other tuple that does not hold: each rule that could derive it and the literal where
  it fails.

>>> ex = Explainer.of(Workspace("facts/megatron-mlp-tp2"))                 # doctest: +SKIP
>>> verdict_line(ex, "refused", ("mm2_bias", "cycle")).text               # doctest: +SKIP
'rules/base.dl:66 (via rules/tp.dl:8) with X = allreduce (collective), B = bias (spine)'
"""

from __future__ import annotations

from dataclasses import dataclass

from ..datalog.lang import ast
from .proof import Attempt, Derived, Elided, Proof, Shown, WhyNot, where
from .terms import constant

FAILURES_SHOWN = 3  # failing rules named in one line
BLOCKERS_SHOWN = 4  # blocking refusals named in one line


@dataclass(frozen=True)
class Line:
    """Why one tuple holds or does not, in one line."""

    atom: str
    holds: bool
    rules: tuple[str, ...]  # file:line of the rules the line names, deciding rule first
    text: str

    def to_json(self) -> dict:
        return {"atom": self.atom, "holds": self.holds, "rules": list(self.rules), "text": self.text}


def verdict_line(explainer, rel: str, values: tuple) -> Line:
    """The one-line explanation of `rel(values)` over the explainer's model (holds or not)."""
    atom = ast.Atom(rel, tuple(constant(v) for v in values))
    answer = explainer.explain(atom)
    plain = _Plain(explainer, values)
    if answer.holds:
        rules, text = plain.proof(answer.proofs[0])
    else:
        rules, text = plain.why_not(answer.why_not)
    return Line(answer.atom, answer.holds, rules, text)


class _Plain:
    """Proof and why-not trees flattened to one line. `known` are the asked tuple's values
    (the fusion, the reason): bindings to them are left out, they are in the atom already."""

    def __init__(self, explainer, known: tuple):
        self.explainer = explainer
        self.known = set(known)
        self._statements = {o for o, _ in explainer.prover.facts.tuples("op")}
        self._rules_at = {r.pos: r for r in explainer.checked.program.rules}

    def value(self, value) -> str:
        if isinstance(value, str) and value in self._statements:
            return f"{value} ({self.explainer.place(value)})"
        return str(value)

    def bindings(self, pairs) -> str:
        return ", ".join(f"{name} = {self.value(v)}" for name, v in pairs if v not in self.known)

    # -- a tuple that holds -------------------------------------------------------------

    def proof(self, node: Proof) -> tuple[tuple[str, ...], str]:
        chain = deriving_chain(node)
        if not chain:  # a fact, or a subtree the depth limit cut
            return (), _leaf(node)
        rule = chain[-1]
        via = [where(d.pos) for d in reversed(chain[:-1])]
        text = where(rule.pos) + (f" (via {', '.join(via)})" if via else "")
        shown = self.bindings(rule.bindings)
        text += f" with {shown}" if shown else f": {rule.rule}"
        return (where(rule.pos), *via), text

    # -- a tuple that does not hold -----------------------------------------------------

    def why_not(self, node: WhyNot) -> tuple[tuple[str, ...], str]:
        if not node.attempts:
            return (), node.note
        failures = list(self._failures(node, ()))
        blocked = [(via, a) for via, a in failures if a.blocking]
        if blocked:
            return self._blocked(blocked)
        # A rule that fails at a relation empty in this whole model (a Python shim's answers
        # when the rules answer) says nothing about this tuple: named only when nothing else is.
        telling = [(via, a) for via, a in failures if self._empty_at(a) is None]
        if not telling:
            chains = "; ".join(f"{' → '.join([*via, where(a.pos)])} from {self._empty_at(a)}, which is empty"
                               for via, a in failures)
            named = tuple(dict.fromkeys(where(a.pos) for _, a in failures))
            return named, f"no rule derives it: only {chains}"
        failures = telling
        rules: list[str] = []
        parts: list[str] = []
        for via, attempt in failures[:FAILURES_SHOWN]:
            rules.append(where(attempt.pos))
            chain = " → ".join([*via, where(attempt.pos)])
            if attempt.failed is None:
                parts.append(f"{chain}: {attempt.reason}")
            else:
                parts.append(f"{chain} fails at {attempt.failed}{_others(attempt.reached - 1)}")
        more = len(failures) - FAILURES_SHOWN
        return tuple(dict.fromkeys(rules)), "; ".join(parts) + (f"; and {more} more rules" if more > 0 else "")

    def _failures(self, node: WhyNot, via: tuple[str, ...]):
        """(rules passed through, attempt) for each failing rule; a rule whose body is one
        positive atom (a rule that only renames) passes through to that atom's rules."""
        for attempt in node.attempts:
            nested = attempt.nested
            if isinstance(nested, WhyNot) and nested.attempts and self._renames(attempt):
                yield from self._failures(nested, via + (where(attempt.pos),))
            else:
                yield via, attempt

    def _empty_at(self, attempt: Attempt) -> str | None:
        """The relation the attempt fails at when it has no tuple at all in the model."""
        if attempt.failed is None or attempt.failed.startswith("!"):
            return None
        rel = attempt.failed.split("(", 1)[0].strip()
        decl = self.explainer.checked.decls.get(rel)
        if decl is None or self.explainer.holds(ast.Atom(rel, tuple(ast.Wildcard() for _ in decl.attrs))):
            return None
        return rel

    def _renames(self, attempt: Attempt) -> bool:
        rule = self._rules_at.get(attempt.pos)
        return rule is not None and len(rule.body) == 1 and isinstance(rule.body[0], ast.Atom)

    def _blocked(self, blocked) -> tuple[tuple[str, ...], str]:
        rules: list[str] = []
        parts: list[str] = []
        proofs = [p for _, a in blocked for p in a.blocking]
        for proof in proofs[:BLOCKERS_SHOWN]:
            found, why = self.proof(proof)
            rules.extend(found)
            extra = [str(v) for v in getattr(proof, "values", ()) if v not in self.known]
            name = f"{getattr(proof, 'rel', '')} {' '.join(extra)}".strip() or proof.text
            parts.append(f"{name} ({why})")
        more = sum(len(a.blocking) + a.blocking_more for _, a in blocked) - min(len(proofs), BLOCKERS_SHOWN)
        text = "blocked by " + "; ".join(parts) + (f"; and {more} more" if more > 0 else "")
        return tuple(dict.fromkeys(rules)), text


def deriving_chain(node: Proof) -> list[Derived]:
    """The derived nodes from the root down to the rule that decides: a node whose only child
    is a derived tuple with the same values (a rule that only renames) passes through."""
    chain: list[Derived] = []
    while isinstance(node, Derived):
        chain.append(node)
        if len(node.children) == 1 and isinstance(node.children[0], Derived) \
                and node.children[0].values == node.values:
            node = node.children[0]
            continue
        break
    return chain


def _others(n: int) -> str:
    """How many other bindings reach the same failing literal."""
    if n <= 0:
        return ""
    return " (as does 1 other binding)" if n == 1 else f" (as do {n} other bindings)"


def _leaf(node: Proof) -> str:
    if isinstance(node, (Elided, Shown)):
        return node.text
    at = where(getattr(node, "pos", None))
    return f"fact {at}" if at else getattr(node, "text", "")
