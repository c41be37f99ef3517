"""Tiny Hugging Face models, made by transformers itself from a small config (nothing is
downloaded)."""

from __future__ import annotations

from pathlib import Path

# hidden 64, 2 layers, 4 heads of 16, 2 key/value heads; weights larger than the usual
# 0.02 so that attention and the MLP move the logits well beyond the tolerance
TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, vocab_size=128, head_dim=16, max_position_embeddings=64,
            pad_token_id=0, bos_token_id=1, eos_token_id=2, initializer_range=0.15)
MUST_WORK = ("llama", "qwen2", "gemma")
# issue 21's: two mixtures of experts, gathered q/k/v (OLMo 2), a full-width rotary with
# gathered fused projections (Phi-3), a vocabulary-parallel embedding (GPT-NeoX)
MUST_WORK_STYLES = ("mixtral", "qwen3_moe", "olmo2", "phi3", "gpt_neox")
MOE = dict(num_local_experts=4, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32)


# A tiny GLM-4-MoE's DeepSeek-V3 routing: 4 groups of 2 experts, the top 2 groups, top-2
# experts among theirs (a scatter of the groups' mask, a gather of the router's weights).
GROUP_ROUTING = dict(n_routed_experts=8, num_experts_per_tok=2, n_group=4, topk_group=2, moe_intermediate_size=32,
                     first_k_dense_replace=0, n_shared_experts=1)


# A tiny DeepSeek-V3's multi-head latent attention (as many key/value heads as heads, heads of
# the rotary width) and routing: its first layer dense, the rest mixtures of experts.
LATENT_MOE = dict(GROUP_ROUTING, first_k_dense_replace=1, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16,
                  kv_lora_rank=32, q_lora_rank=32, head_dim=8, num_key_value_heads=4)


# A tiny Bamba's Mamba fields (a Mamba mixer in layer 0, attention in layer 1).
MAMBA = dict(mamba_n_heads=8, mamba_d_head=16, mamba_d_state=16, mamba_chunk_size=4, mamba_n_groups=1,
             attn_layer_indices=[1])


def make_model(folder: Path, model_type: str, weights: bool = True, **overrides) -> Path:
    import torch
    import transformers
    from transformers import CONFIG_MAPPING, AutoModelForCausalLM

    transformers.utils.logging.disable_progress_bar()
    moe = MOE if model_type in ("mixtral", "qwen3_moe") else {}
    config = CONFIG_MAPPING[model_type](**{**TINY, **moe, **overrides})
    if not weights:
        config.save_pretrained(folder)
        return folder
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config).save_pretrained(folder)
    return folder


def facts(folder: Path, relation: str) -> list[list[str]]:
    """The rows of an imported program's `relation.facts` (none where the file is absent)."""
    path = folder / f"{relation}.facts"
    return [line.split("\t") for line in path.read_text().splitlines()] if path.exists() else []
