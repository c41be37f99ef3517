"""`tprules import hf --decode` beyond keys and values: a hybrid model's recurrent states
(Mamba's conv and SSM state, a gated-delta layer's) as cache inputs and updated outputs; the
own cache class of a model whose forward demands it (MiniMax's, made static); the
functions of the position a step tabulates that a prefill folds (DeepSeek-V2's complex
rotary, a strided write into the rotary's frequencies); an expert put of one element."""

from __future__ import annotations

import numpy as np
import pytest

from tprules.program.model import Program
from tprules.runtime.values.compare import errors
from tprules.runtime.values.inputs import program_inputs
from tprules.runtime.values.reference import reference
from tprules.workspace import Workspace

from .cli import leftovers
from .tiny import MAMBA, make_model

LINEAR = dict(linear_key_head_dim=16, linear_value_head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4,
              layer_types=["linear_attention", "full_attention"])
MLA = dict(qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16, kv_lora_rank=32, q_lora_rank=32, head_dim=8,
           num_key_value_heads=4, first_k_dense_replace=2)
# model type → (its tiny config's own fields, its recurrent layer, the states that layer's cache holds)
HYBRID = {
    "bamba": (MAMBA, 0, ("conv", "recurrent")),  # a Mamba-2 mixer, then attention
    "qwen3_next": (dict(LINEAR, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                        shared_expert_intermediate_size=32), 0, ("conv", "recurrent")),  # gated delta, then attention
    # attention, then lightning attention: its own cache class (MiniMaxCache), its state in a list
    "minimax": (dict(num_local_experts=4, num_experts_per_tok=2, layer_types=["full_attention", "linear_attention"]),
                1, ("linear",)),
}
POSITIONS = {
    "deepseek_v2": MLA,  # torch.polar of the position's frequencies, complex rotary
    # Qwen3.5's interleaved M-RoPE: the text's frequencies written into every third element
    "qwen3_5_text": dict(LINEAR, layer_types=["full_attention", "full_attention"]),
    # Llama 4's chunked attention: its mask compares the position's chunk with the cache's (a boolean table)
    "llama4_text": dict(num_local_experts=4, num_experts_per_tok=1, attention_chunk_size=8),
}


def _step(folder):
    prog = Program.from_workspace(Workspace(folder))
    values = reference(prog, program_inputs(prog))
    return prog, {out: errors(values.get(out), np.load(folder / "expected" / f"{out}.npy"))[1] for out in prog.outputs}


@pytest.mark.parametrize("model_type", sorted(HYBRID))
def test_a_hybrid_models_recurrent_state_is_a_cache_input_and_output(tmp_path, model_type):
    from tprules.frontends.drivers.decode import import_decode

    fields, layer, kinds = HYBRID[model_type]
    folder = tmp_path / "step"
    import_decode(make_model(tmp_path / "src", model_type, **fields), 2, folder, past=5, cache_len=8)
    prog, rel = _step(folder)
    names = {t.split("@")[0] for t in prog.inputs}
    assert {f"model.layers.{layer}.{k}_cache" for k in kinds} <= names
    assert {f"model.layers.{1 - layer}.key_cache", f"model.layers.{1 - layer}.value_cache"} <= names
    assert {f"model.layers.{layer}.{k}_cache_new" for k in kinds} <= {t.split("@")[0] for t in prog.outputs}
    assert max(rel.values()) <= 1e-4, rel
    # torch's prefill left a state: the step starts from it, not from zeros
    state = np.load(folder / "data" / f"model.layers.{layer}.{kinds[-1]}_cache.npy")
    assert np.abs(state).sum() > 0


@pytest.mark.parametrize("model_type", sorted(POSITIONS))
def test_a_function_of_the_position_is_tabulated(tmp_path, model_type):
    from tprules.frontends.drivers.decode import import_decode

    folder = tmp_path / "step"
    import_decode(make_model(tmp_path / "src", model_type, **POSITIONS[model_type]), 1, folder, past=5, cache_len=8)
    _, rel = _step(folder)
    assert max(rel.values()) <= 1e-4, rel


def test_a_top1_expert_of_one_token_puts_one_element(tmp_path):
    """The grouped experts' inverse permutation of one (token, expert) pair: arange(1) traced
    as a 0-d value put at the ids (broadcast)."""
    from tprules.frontends.drivers.decode import import_decode

    folder = tmp_path / "step"
    src = make_model(tmp_path / "src", "olmoe", num_experts=4, num_experts_per_tok=1, intermediate_size=32)
    import_decode(src, 2, folder, past=3, cache_len=4)
    _, rel = _step(folder)
    assert max(rel.values()) <= 1e-4, rel


def test_a_cache_that_cannot_be_static_is_one_line(cli, tmp_path):
    """DeepSeek-V4's compressed attention layers have no static layer in transformers."""
    src = make_model(tmp_path / "v4", "deepseek_v4", weights=False)
    status, out, err = cli("import", "hf", src, "--tp", "2", "--decode", "--out", tmp_path / "out")
    assert (status, out) == (2, "")
    assert len(err.splitlines()) == 1 and "--decode: transformers cannot make its cache static" in err, err
    assert leftovers(tmp_path, "out") == []
