"""Routing that gathers and scatters (issues 21 and 22), against torch's forward: a tiny
GLM-4-MoE with DeepSeek-V3's group-limited routing (four groups of two experts, the top two
groups' mask put into zeros, the experts of the others masked out, the router's weights
taken at the chosen experts) at TP 1 and 2, on the reference and fused on the CPU; and
Llama 4's router (the top scores put back into −inf)."""

from __future__ import annotations

import numpy as np
import pytest

from tprules.runtime import Program, execute
from tprules.runtime.values.compare import errors
from tprules.runtime.values.inputs import program_inputs
from tprules.runtime.values.reference import reference
from tprules.workspace import Workspace

from .test_import_moe import facts
from .tiny import GROUP_ROUTING, make_model

pytest.importorskip("transformers")

# model type → its tiny config's own fields
ROUTERS = {
    "glm4_moe": GROUP_ROUTING,
    "llama4_text": dict(num_local_experts=4, num_experts_per_tok=1, intermediate_size_mlp=128, moe_layers=[0]),
}


@pytest.fixture(scope="module")
def routed(tmp_path_factory):
    from tprules.frontends.drivers.hf import import_hf

    made: dict = {}

    def get(model_type: str, tp: int):
        if (model_type, tp) not in made:
            root = tmp_path_factory.mktemp(f"{model_type}-tp{tp}")
            model = make_model(root / "model", model_type, **ROUTERS[model_type])
            import_hf(model, tp, root / "program", layers=1, seq=4)
            made[model_type, tp] = root / "program"
        return made[model_type, tp]

    return get


def _matches_torch(folder) -> float:
    prog = Program.from_workspace(Workspace(folder))
    _, rel = errors(reference(prog, program_inputs(prog)).get("logits"), np.load(folder / "expected" / "logits.npy"))
    return rel


@pytest.mark.parametrize("tp", [1, 2])
def test_group_limited_routing_matches_torch(routed, tp):
    folder = routed("glm4_moe", tp)
    assert _matches_torch(folder) <= 1e-4
    ops = dict((o, c) for o, c in facts(folder, "op"))
    # the grouped experts' sort puts its values and positions at each id's rank, and its
    # index_put spreads the rows back to their pairs' places: the experts' form, not routing
    sorting = {o for o, _, t in facts(folder, "reads") if t.endswith(("__rank", "__spread"))}
    routing = {o: c for o, c in ops.items() if c in ("put_along", "take_along") and o not in sorting}
    assert sorted(routing.values()) == ["put_along", "take_along"]  # the groups' mask, the weights at the experts
    assert not any("@" in o for o in routing)  # on the spine


def test_group_limited_routing_fused_on_the_cpu_matches_torch(routed):
    report = execute(Workspace(routed("glm4_moe", 2)), device="cpu")
    (out,) = report.outputs
    assert report.ok and out.expected.ok and out.expected.max_rel_err <= 1e-4


def test_the_group_mask_keeps_the_top_groups_experts_only(routed):
    """The mask the scatter writes (a 1 for each of the top two of four groups, per token)
    selects the experts the router then picks from, as torch's group-limited top-k does."""
    folder = routed("glm4_moe", 1)
    prog = Program.from_workspace(Workspace(folder))
    values = reference(prog, program_inputs(prog))
    put = next(s for s in prog.statements if s.cls == "put_along")
    mask = values.get(put.writes)
    assert mask.shape == (4, 4) and (mask.sum(axis=1) == 2).all()
    take = next(s for s in prog.statements if s.cls == "take_along")
    experts = values.get(take.reads[1])
    assert all(mask[t, e // 2] == 1 for t in range(4) for e in experts[t])  # two experts a group


def test_a_router_s_scores_put_into_minus_inf_match_torch(routed):
    folder = routed("llama4_text", 2)
    assert _matches_torch(folder) <= 1e-4
    puts = [o for o, c in facts(folder, "op") if c == "put_along"]
    reads = {(o, int(i)) for o, i, _ in facts(folder, "reads")}
    assert puts and all((o, 2) in reads for o in puts)  # a source: the top scores
