"""One-line explanations of verdict tuples (tprules.explain.oneline), as `golden` and `diff` print them."""

from __future__ import annotations

import pytest
from conftest import FACTS

from tprules.explain.explainer import Explainer
from tprules.explain.oneline import verdict_line
from tprules.workspace import Workspace

CASES = [
    # a tuple that holds: the deciding rule, through the pass-through refused :- base_refused
    ("megatron-mlp-tp2", ("refused", ("mm2_bias", "cycle")), True, ("rules/base.dl:66", "rules/tp.dl:8"),
     "rules/base.dl:66 (via rules/tp.dl:8) with X = allreduce (collective), B = bias (spine)"),
    ("megatron-mlp-tp2", ("refused", ("gelu_0_1", "spans_chips")), True, ("rules/tp.dl:15",),
     "rules/tp.dl:15 with A = gelu_0 (chip:0), B = gelu_1 (chip:1), CA = 0, CB = 1"),
    ("int8-mlp-tp2", ("refused", ("unary_chain_9", "too_many_members")), True, ("rules/base.dl:24", "rules/tp.dl:8"),
     "rules/base.dl:24 (via rules/tp.dl:8) with S = cuda-lane:rtx3060:TwoPassInt8, L = 8, N = 9"),
    # legal that holds: a rule with no binding beyond the fusion shows its text
    ("megatron-mlp-tp2", ("legal", ("bias_residual",)), True, ("rules/tp.dl:24",),
     "rules/tp.dl:24: legal(F) :- candidate(F), !refused(F, _)."),
    # legal that does not hold: the refusals that block it
    ("megatron-mlp-tp2", ("legal", ("mm2_bias",)), False, ("rules/tp.dl:19", "rules/base.dl:66", "rules/tp.dl:8"),
     "blocked by refused chip_and_spine (rules/tp.dl:19 with A = mm2_0 (chip:0), B = bias (spine)); "
     "refused cycle (rules/base.dl:66 (via rules/tp.dl:8) with X = allreduce (collective), B = bias (spine))"),
    # a refusal that does not hold: where each rule that could derive it fails
    ("megatron-mlp-tp2", ("refused", ("gelu_0_1", "chip_and_spine")), False, ("rules/tp.dl:19",),
     'rules/tp.dl:19 fails at on_spine("gelu_0") (as do 3 other bindings)'),
    ("megatron-mlp-tp2", ("refused", ("bias_residual", "cycle")), False, ("rules/base.dl:66",),
     'rules/tp.dl:8 → rules/base.dl:66 fails at escapes("bias_residual", X)'),
]


@pytest.fixture(scope="module")
def explainers():
    made = {}

    def get(name, rules=None):
        if (name, rules) not in made:
            ws = Workspace(FACTS / name, rules)
            made[(name, rules)] = Explainer(ws.checked, ws.model, ws.program.facts, ws.program.position, depth=4)
        return made[(name, rules)]

    return get


@pytest.mark.parametrize("program, tuple_, holds, rules, text", CASES,
                         ids=[f"{rel}-{'-'.join(values)}" for _, (rel, values), *_ in CASES])
def test_one_line(program, tuple_, holds, rules, text, explainers):
    line = verdict_line(explainers(program), *tuple_)
    assert (line.holds, line.rules, line.text) == (holds, rules, text)


def test_a_refusal_whose_rule_is_gone(explainers, rules_copy):
    tp = rules_copy / "tp.dl"
    tp.write_text(tp.read_text().replace('refused(F, "collective_fold") :- member(F, O), is_fold(O), !kernel(F, _).', ""))
    line = verdict_line(explainers("megatron-mlp-tp2", rules_copy), "refused", ("mm2_allreduce", "collective_fold"))
    assert not line.holds
    assert line.text == (f"no rule derives it: only {rules_copy}/tp.dl:8 → {rules_copy}/base.dl:13 "
                         "from base_refusal, which is empty")
