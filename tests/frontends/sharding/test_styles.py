"""Every plan style transformers registers, imported as it means it (frontends/sharding/styles.py):
the programs match torch's forward, and hold the collectives the style asks for."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tprules.runtime import Program
from tprules.runtime.values.compare import errors
from tprules.runtime.values.inputs import program_inputs
from tprules.runtime.values.reference import reference
from tprules.workspace import Workspace

from ..cli import LLAMA_PLAN
from ..tiny import facts

PHI3_PACKED = {"layers.*.self_attn.qkv_proj": "colwise_gather_output", "layers.*.self_attn.o_proj": "rowwise_split_input",
               "layers.*.mlp.gate_up_proj": "packed_colwise", "layers.*.mlp.down_proj": "rowwise"}
MLP = {"layers.*.mlp.gate_proj": "colwise", "layers.*.mlp.up_proj": "colwise", "layers.*.mlp.down_proj": "rowwise"}
# name → (model type, plan (None: the model's own, lm_head's colwise_gather_output with it),
# what the program must hold: its all-gathers, slices of a split input, a vocabulary-parallel lookup)
CASES = {
    "olmo2_gather_and_split_input": ("olmo2", None, {"all_gather": 7, "slices": True}),
    "phi3_full_width_rotary_gather": ("phi3", None, {"all_gather": 5, "slices": True}),
    "phi3_packed_colwise": ("phi3", PHI3_PACKED, {"all_gather": 2}),
    "gpt_neox_vocab_parallel": ("gpt_neox", None, {"offsets": True, "all_gather": 1}),
    "llama_embedding_colwise": ("llama", {**LLAMA_PLAN, "embed_tokens": "embedding_colwise"}, {"all_gather": 1}),
    "llama_rep": ("llama", {"layers.*.self_attn.q_proj": "colwise_rep", "layers.*.self_attn.k_proj": "colwise_rep",
                            "layers.*.self_attn.v_proj": "colwise_rep", "layers.*.self_attn.o_proj": "rowwise_rep",
                            "layers.*.mlp.gate_proj": "colwise_rep", "layers.*.mlp.up_proj": "colwise_rep",
                            "layers.*.mlp.down_proj": "rowwise_rep"}, {"all_gather": 10, "slices": True}),
    "llama_all_reduce_local_params": ("llama", {**LLAMA_PLAN, **MLP, "layers.*.mlp": "all_reduce",
                                                "layers.*.self_attn": "local_params"}, {}),
    # transformers 5.25's per-head colwise (MiniCPM5-MoE's k_proj, v_proj): at TP 4 the 2
    # key/value heads each on 2 chips
    "llama_unit_colwise": ("llama", {**LLAMA_PLAN, "layers.*.self_attn.k_proj": "unit_colwise",
                                     "layers.*.self_attn.v_proj": "unit_colwise"}, {}),
}


def _import(imported, tmp_path, model_type, plan, tp, **options):
    if plan is not None:
        path = tmp_path / "plan.json"
        path.write_text(json.dumps(plan))
        options["plan"] = path
    return imported(model_type, tp, **options) if plan is None else _fresh(tmp_path, model_type, tp, **options)


def _fresh(tmp_path, model_type, tp, **options):
    from tprules.frontends.drivers.hf import import_hf

    from ..tiny import make_model

    out = tmp_path / "program"
    import_hf(make_model(tmp_path / model_type, model_type), tp, out, **options)
    return out


@pytest.mark.parametrize("tp", [2, 4])
@pytest.mark.parametrize("case", sorted(CASES))
def test_each_style_matches_torch(imported, tmp_path, case, tp):
    model_type, plan, holds = CASES[case]
    folder = _import(imported, tmp_path, model_type, plan, tp)
    prog = Program.from_workspace(Workspace(folder))
    _, rel = errors(reference(prog, program_inputs(prog)).get("logits"), np.load(folder / "expected" / "logits.npy"))
    assert rel <= 1e-4
    kinds = [k for _, k in facts(folder, "collective")]
    assert kinds.count("all_gather") == len(kinds) == holds.get("all_gather", 0)
    ops = dict((o, c) for o, c in facts(folder, "op"))
    for o, c in facts(folder, "fold"):
        assert ops[o] == ("cat" if c in dict(facts(folder, "collective")) else "sum")
    if holds.get("slices"):
        assert any(o.startswith("split_") for o in ops)
    if holds.get("offsets"):
        assert sorted(v for o, k, v in facts(folder, "attr") if k == "offset") == [str(k * 128 // tp) for k in range(tp)]
