"""Proof trees are real proofs, why-nots name exactly what blocks, on examples and random TP programs.

Every check below reads the model by brute force (no indexes, no solver), so it does not
trust the code it tests.
"""

from __future__ import annotations

import operator
import re
import tempfile
from pathlib import Path

import pytest
from conftest import FACTS
from hypothesis import HealthCheck, given, settings
from strategies import tp_programs

from tprules.datalog.lang import ast
from tprules.datalog.lang.constant import constant_value
from tprules.datalog.lang.printer import print_rule
from tprules.explain.explainer import Explainer
from tprules.explain.proof import AggregateValue, Checked, Computed, Derived, Elided, Fact, Shown, Unproven, WhyNot
from tprules.explain.query import read_atom
from tprules.explain.terms import atom_text
from tprules.workspace import Workspace

EXAMPLES = sorted(p.name for p in FACTS.iterdir() if (p / "op.facts").exists())
REASONS = ("collective_fold", "spans_chips", "chip_and_spine", "unsupported", "not_fusible", "too_many_members",
           "too_many_inputs", "too_many_matmuls", "quantized_inside", "cycle", "shared_partial", "too_narrow")
_COMPARE = {"=": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
            ">=": operator.ge, "match": lambda pattern, text: re.fullmatch(pattern, text) is not None}


# ---- an independent proof checker ---------------------------------------------------------


def _value(term, env):
    match term:
        case ast.Var(name):
            return env[name]
        case ast.Num(v) | ast.Str(v):
            return v
        case ast.BinOp("+", a, b):
            return _value(a, env) + _value(b, env)
        case ast.BinOp("-", a, b):
            return _value(a, env) - _value(b, env)
        case ast.BinOp("*", a, b):
            return _value(a, env) * _value(b, env)
        case ast.BinOp("%", a, b):  # C's remainder (rules/collective.dl takes it of numbers >= 0)
            return _value(a, env) % _value(b, env)
        case ast.Functor("to_number", (a,)):
            return int(_value(a, env))
    raise NotImplementedError(term)


def _matches(atom: ast.Atom, values: tuple, env: dict) -> bool:
    for arg, v in zip(atom.args, values):
        if isinstance(arg, ast.Wildcard):
            continue
        if isinstance(arg, ast.Var) and arg.name not in env:
            return False  # every variable of a proven body atom is bound in the node's bindings
        if _value(arg, env) != v:
            return False
    return True


class ProofChecker:
    def __init__(self, ws: Workspace, explainer: Explainer):
        self.ws, self.model, self.facts = ws, ws.model, ws.program.facts
        self.prover = explainer.prover
        self.rules = {(r.pos.file, r.pos.line, print_rule(r)): r for r in ws.checked.program.rules}
        self.stratum = {rel: s for s in ws.checked.strata for rel in s.relations}
        self._files: dict[str, list[str]] = {}

    def _lines(self, name: str) -> list[str]:
        if name not in self._files:
            self._files[name] = Path(name).read_text().split("\n")  # as shown: relative to the working folder
        return self._files[name]

    def check(self, node) -> None:
        match node:
            case Fact(_, rel, values, pos, in_rules):
                if in_rules:
                    rule = next(r for r in self.ws.checked.program.rules if r.pos == pos)
                    assert rule.is_fact and rule.head.rel == rel
                    assert tuple(constant_value(a) for a in rule.head.args) == values
                else:  # the named line of the named file holds the tuple
                    text = self._lines(pos.file)[pos.line - 1]
                    assert text.split("\t") == [str(v) for v in values], f"{pos}: {text!r} is not {values}"
            case Computed(_, rel, values, _):
                assert values in self.facts.tuples(rel) and self.facts.where(rel, values) is None
            case Derived():
                self._check_derived(node)
            case Shown(text, _) | Elided(_, text, _):
                assert text  # expanded elsewhere
            case Unproven():
                raise AssertionError(f"no proof found for {node.text}")
            case _:
                raise AssertionError(f"unexpected node at a tuple's place: {node}")

    def _check_derived(self, node: Derived) -> None:
        rule = self.rules[(node.pos.file, node.pos.line, node.rule)]
        env = dict(node.bindings)
        assert node.values in self.model.tuples(node.rel)
        assert tuple(_value(a, env) for a in rule.head.args) == node.values
        children = iter(node.children)
        for lit in rule.body:
            match lit:
                case ast.Atom(rel):
                    child = next(children)
                    values = self._values_of(child)
                    assert child.text == atom_text(rel, values) and _matches(lit, values, env)
                    assert values in self.model.tuples(rel)
                    self._check_rank(node, rel, values)
                    self.check(child)
                case ast.Negation(atom):
                    child = next(children)
                    assert isinstance(child, Checked) and child.kind == "negation"
                    assert not any(_matches(atom, t, env) for t in self.model.tuples(atom.rel))
                case ast.Comparison(op, left, right):
                    aggs = ast.literal_aggregates(lit)
                    for _ in aggs:
                        assert isinstance(next(children), AggregateValue)
                    if not aggs:
                        child = next(children)
                        assert isinstance(child, Checked) and child.kind == "comparison"
                        assert _COMPARE[op](_value(left, env), _value(right, env))
        assert next(children, None) is None

    def _values_of(self, child) -> tuple:
        if isinstance(child, (Fact, Computed, Derived)):
            return child.values
        return tuple(a.value for a in read_atom(child.text, self.ws.checked).args)  # Elided, Shown

    def _check_rank(self, node: Derived, rel: str, values: tuple) -> None:
        stratum = self.stratum.get(node.rel)
        if stratum is not None and stratum.recursive and rel in stratum.relations:
            assert self.prover.rank(rel, values) < self.prover.rank(node.rel, node.values), "not well-founded"


def check_everything(ws: Workspace, per_relation: int = 40) -> None:
    """Every derived tuple (a sample per relation) has a checked proof; why-nots name what blocks."""
    explainer = Explainer.of(ws, depth=None)
    checker = ProofChecker(ws, explainer)
    for rel in ws.checked.derived:
        for values in sorted(ws.model.tuples(rel))[:per_relation]:
            explainer.prover.begin()
            checker.check(explainer.prover.prove(rel, values))
    candidates = sorted({f for f, _ in ws.model.tuples("member")})
    refused = ws.model.tuples("refused")
    for f in candidates:
        atom = read_atom(f'legal("{f}")', ws.checked)
        blockers = sorted(t for t in refused if t[0] == f)
        answer = explainer.explain(atom)
        assert answer.holds == (not blockers)
        if blockers:
            (attempt,) = answer.why_not.attempts
            assert attempt.failed == f'!refused("{f}", _)'
            assert [b.values for b in attempt.blocking] == blockers
            for proof in attempt.blocking:
                checker.check(proof)
        for reason in REASONS:
            if (f, reason) not in refused:
                why_not = explainer.why_not(read_atom(f'refused("{f}", "{reason}")', ws.checked))
                _no_attempt_holds(why_not)


def _no_attempt_holds(node) -> None:
    if isinstance(node, WhyNot):
        for attempt in node.attempts:
            assert attempt.failed is not None, f"{attempt.rule}: {attempt.reason}"
            if attempt.nested is not None:
                _no_attempt_holds(attempt.nested)


# ---- the cases ---------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ["fast", "compiled"])  # a columnar model and a model of tuples
@pytest.mark.parametrize("example", EXAMPLES)
def test_every_proof_checks_on_the_examples(example, engine):
    check_everything(Workspace(FACTS / example, engine=engine), per_relation=60)


@pytest.mark.parametrize("engine", ["fast", "compiled"])
def test_every_proof_checks_under_a_shim_that_declares_collective_kernels(engine):
    """rules/collective.dl's proofs (kernel, block, the guards) on the example made for them."""
    ws = Workspace(FACTS / "async-tp-mlp-tp2", shim="cuda-lane:h200:Bf16SymmMem", engine=engine)
    assert {"kernel", "block"} <= set(ws.checked.derived) and ws.model.tuples("kernel")
    check_everything(ws, per_relation=60)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tp_programs(max_statements=10))
def test_every_proof_checks_on_random_tp_programs(builder):
    with tempfile.TemporaryDirectory() as tmp:
        directory = builder.write(Path(tmp) / "p")
        for engine in ("fast", "compiled"):
            check_everything(Workspace(directory, engine=engine))


def test_explanations_are_deterministic():
    def answer():
        ws = Workspace(FACTS / "megatron-mlp-tp2")
        return Explainer.of(ws).explain(read_atom('refused("everything", R)', ws.checked))

    assert answer() == answer()


def _pairs(shallow, full):
    """Walk a depth-limited tree beside the unlimited one: (elided node, the full node at its place)."""
    if isinstance(shallow, Elided):
        yield shallow, full
        return
    for a, b in zip(getattr(shallow, "children", ()), getattr(full, "children", ())):
        yield from _pairs(a, b)


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_subproofs_expand_what_the_depth_limit_elided(depth):
    ws = Workspace(FACTS / "megatron-mlp-tp2")
    full = Explainer.of(ws, depth=None)
    limited = Explainer.of(ws, depth=depth)
    atom = read_atom('refused("mm1_mm2_0", "cycle")', ws.checked)
    (whole,) = full.explain(atom).proofs
    (cut,) = limited.explain(atom).proofs
    pairs = list(_pairs(cut, whole))
    assert pairs, "the depth limit elided nothing"
    for elided, node in pairs:
        assert elided.text == node.text
        expanded = limited.subproof(elided.id)
        assert isinstance(expanded, Derived) and expanded.text == node.text and expanded.rule == node.rule


def test_a_tuple_proven_twice_is_expanded_once():
    ws = Workspace(FACTS / "megatron-mlp-tp2")
    explainer = Explainer.of(ws, depth=None)
    proofs = explainer.explain(read_atom('refused("everything", R)', ws.checked)).proofs
    seen, shown = [], []

    def walk(node):
        if isinstance(node, Derived):
            seen.append(node.text)
        if isinstance(node, Shown):
            shown.append(node.text)
        for child in getattr(node, "children", ()):
            walk(child)

    for proof in proofs:
        walk(proof)
    assert len(seen) == len(set(seen))
    assert shown and set(shown) <= set(seen)


def test_elided_ids_are_stable_per_tuple():
    ws = Workspace(FACTS / "megatron-mlp-tp2")
    explainer = Explainer.of(ws, depth=1)
    first = explainer.explain(read_atom('refused("everything", R)', ws.checked))
    again = explainer.explain(read_atom('refused("everything", R)', ws.checked))
    assert first == again
    ids = [c.id for p in first.proofs for c in p.children if isinstance(c, Elided)]
    assert len(ids) > len(set(ids))  # on_chip("gelu_1", 1) is elided under two reasons, with one id
