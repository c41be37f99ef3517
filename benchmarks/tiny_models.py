"""The tiny models of benchmarks/import_coverage.py (and stamp_check.py, the tests): for a
causal-LM model type of the installed transformers, a tiny config that builds a model whose
own forward runs, saved with transformers' own save_pretrained (`tiny_model`).

The generic tiny config (TINY: hidden 64, 2 layers, 4 heads, 2 key/value heads, vocabulary
128); where that does not build, the mixture-of-experts fields too (MOE), then the
multi-head latent attention fields (MLA), then a rotary of 8 (ROTARY); each try with the
small state-space, linear-attention and latent-attention fields of FITTED that its config
defines, the model type's OVERRIDES and TOWERS; a matrix its init leaves all zeros (a
router's gate) drawn instead (`drawn`). Under --decode (DECODE, set by import_coverage's
main), a hybrid config whose layers are all recurrent gets an attention layer second.
"""

from __future__ import annotations

from pathlib import Path

TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, vocab_size=128, head_dim=16, max_position_embeddings=64,
            pad_token_id=0, bos_token_id=1, eos_token_id=2)
# where the generic tiny config does not make a model that runs
ROPE = {"rope_type": "default", "rope_theta": 10000.0}
OVERRIDES = {
    "youtu": dict(qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16, kv_lora_rank=32, q_lora_rank=32, head_dim=8,
                  num_key_value_heads=4),  # multi-head latent attention: as many key/value heads as heads
    "cohere_compass_text": dict(layer_types=None, rope_parameters={"full_attention": ROPE, "sliding_attention": ROPE}),
    "gemma3n_text": dict(layer_types=None, num_kv_shared_layers=0),
    "dots1": dict(n_shared_experts=1),  # no default: its shared expert's width is moe_intermediate_size times it
    "lfm2_moe": dict(layer_types=["full_attention", "conv"], num_dense_layers=1),  # no default layer_types
    # its defaults' 8 input and 8 output layers of 2 run each layer twice a forward: 1 input, 1 looped, 1 output
    "dory": dict(num_hidden_layers=3, n_input_layers=1, n_output_layers=1),
    # the checkpoint's unembedding is padded from unpadded_vocab_size to vocab_size
    "inkling2_text": dict(unpadded_vocab_size=128, swa_num_attention_heads=4, swa_num_key_value_heads=2,
                          swa_head_dim=16, sliding_window_size=8, rel_extent=16),
}
OVERRIDES["inkling2_loop_text"] = OVERRIDES["inkling2_text"]
# transformers 5.25: its indexer's heads (default 12) at most the query heads a key/value head serves (2 here)
OVERRIDES["kolibri1_1"] = dict(index_num_heads=2)
# multimodal configs: their towers, small (Phi-4-multimodal's embedding holds an image and an audio encoder);
# a config with a text_config (Llama 4) gets the tiny fields there
TOWERS = {
    "phi4_multimodal": dict(
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                           image_size=28, patch_size=14, crop_size=28),
        audio_config=dict(hidden_size=32, intermediate_size=64, num_blocks=1, num_attention_heads=2,
                          ext_pw_out_channel=32, depthwise_separable_out_channel=32, nemo_conv_channels=32)),
}
# State-space, linear-attention and latent-attention fields, small; each given only to the
# configs that define it (a Mamba mixer of 8 heads of 16, chunks of 8; MLA's ranks)
FITTED = dict(mamba_n_heads=8, mamba_d_head=16, mamba_d_state=16, mamba_chunk_size=8, mamba_n_groups=1,
              mamba_d_ssm=128, mamba_dt_rank=8, mamba_num_heads=8, mamba_head_dim=16, ssm_state_size=16, n_groups=1,
              chunk_size=8, n_mamba_heads=8, mamba_headdim=16, mamba_ngroups=1, linear_key_head_dim=16,
              linear_value_head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4, linear_head_dim=16,
              linear_num_heads=4, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16, kv_lora_rank=32,
              q_lora_rank=32, qk_head_dim=16)
MOE = dict(num_local_experts=4, num_experts=4, n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32)
# multi-head latent attention (DeepSeek-V2 style): as many key/value heads as heads
MLA = dict(qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16, kv_lora_rank=32, q_lora_rank=32, head_dim=8,
           num_key_value_heads=4)
ROTARY = dict(rotary_dim=8)  # a partial rotary narrower than the tiny head (GPT-J, CodeGen)
WEIGHT_SEEDS = (0, 1)  # each architecture's tiny model is made and imported with each
INPUT_SEED = 1000  # ids of the second input: drawn from INPUT_SEED + the weight seed
# a mixture of experts' second expert count and top-k (its config's own fields only), its
# experts as narrow as MOE's (a default width such as DeepSeek-V2's 1407 does not split over
# 2 chips); a variant transformers cannot build is skipped and named in the row
EXPERTS = dict(num_local_experts=8, num_experts=8, n_routed_experts=8, num_experts_per_tok=1,
               moe_intermediate_size=MOE["moe_intermediate_size"])


def architectures(kind: str = "tp") -> list[str]:
    """The causal-LM model types whose config class has a `base_model_{kind}_plan`."""
    from transformers import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    out = []
    for model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        if model_type not in CONFIG_MAPPING:
            continue
        if getattr(CONFIG_MAPPING[model_type], f"base_model_{kind}_plan", None):
            out.append(model_type)
    return out


def fitted(model_type: str) -> dict:
    """The FITTED fields this model type's config defines; a latent attention (MLA) gets as
    many key/value heads as heads and heads of its rotary width."""
    from transformers import CONFIG_MAPPING

    defined = CONFIG_MAPPING[model_type]().to_dict()
    out = {k: v for k, v in FITTED.items() if k in defined}
    if "kv_lora_rank" in defined:
        out.update(num_key_value_heads=TINY["num_attention_heads"], head_dim=FITTED["qk_rope_head_dim"])
    return out


def experts_fields(model_type: str) -> dict:
    """EXPERTS' fields this model type's config defines (none: not a mixture of experts)."""
    from transformers import CONFIG_MAPPING

    defined = CONFIG_MAPPING[model_type]().to_dict()
    if not any(k in defined for k in ("num_local_experts", "num_experts", "n_routed_experts")):
        return {}
    return {k: v for k, v in EXPERTS.items() if k in defined}


def moe_layers(model_type: str, tp: int) -> dict:
    """Fields for --ep, where a tiny model without an experts layer would have nothing to
    split: the second layer a mixture of experts where the config's defaults keep the first
    layers dense (DeepSeek-V3's first_k_dense_replace 3, a list of MLP kinds, Qwen's
    mlp_only_layers), the first dense; and MOE's experts where the config's own count does
    not split over the chips (FlexOlmo's 7: a checkpoint's choice, not the architecture's)."""
    from transformers import CONFIG_MAPPING

    defined = CONFIG_MAPPING[model_type]().to_dict()
    out: dict = {}
    if "first_k_dense_replace" in defined:
        out["first_k_dense_replace"] = 1
    kinds = defined.get("mlp_layer_types")
    if isinstance(kinds, list) and kinds:
        out["mlp_layer_types"] = [kinds[0], kinds[-1]]
    if defined.get("mlp_only_layers"):
        out["mlp_only_layers"] = [0]
    count = next((defined[k] for k in ("num_local_experts", "num_experts", "n_routed_experts")
                  if isinstance(defined.get(k), int)), None)
    if count is not None and count % tp:
        out.update({k: v for k, v in MOE.items() if k in defined})
    return out


DECODE: dict = {}  # --decode: import_decode's past and cache_len (empty: the prefill)

# Issue 51: a sparse-attention indexer's top-k below the traced 8 tokens, so that the first
# queries (those that see fewer keys than the top-k) tie among masked keys: index_topk 4, or
# a model type's own fields (its indexer layers and a top-k of its blocks) and the prompt
# shorter than that top-k it is also imported at (its traced length)
INDEXER = (dict(index_topk=4), 3)
INDEXERS = {
    # MiniMax-M3's block indexer: blocks of 2 tokens, the top 2 of 4 blocks, its sparse layers; no
    # padding token (whose row of zeros ties its first layer's scores, refused by the import's check:
    # here the masked blocks it picks among in the first queries are the only ties, and harmless)
    "minimax_m3_vl_text": (dict(layer_types=["minimax_m3_sparse"] * 2, index_block_size=2, index_topk_blocks=2,
                                index_local_blocks=1, pad_token_id=None), 4),
    # DeepSeek-V4's compressed sparse attention (a compressed entry per 4 tokens): the top 1 of 2
    "deepseek_v4": (dict(layer_types=["compressed_sparse_attention"] * 2, index_topk=1), 4),
}
# issue 51's own model: a tiny HY-V4 (MoE, MLA, an indexer with 2 heads of 16 and top-4),
# built with torch.manual_seed(1234)
ISSUE_51 = ("hy_v4", dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                          head_dim=16, vocab_size=128, max_position_embeddings=64, n_routed_experts=4,
                          n_shared_experts=1, num_experts_per_tok=2, moe_intermediate_size=64, first_k_dense_replace=1,
                          kv_lora_rank=16, q_lora_rank=32, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16,
                          index_n_heads=2, index_head_dim=16, index_topk=4, pad_token_id=0, bos_token_id=1,
                          eos_token_id=2), 1234)


def indexer(model_type: str) -> tuple[dict, int] | None:
    """A model type's indexer variant (issue 51): its fields and the shorter prompt's length;
    None where its config has no sparse-attention indexer."""
    from transformers import CONFIG_MAPPING

    if model_type in INDEXERS:
        return INDEXERS[model_type]
    config = CONFIG_MAPPING[model_type]()
    defined = config.get_text_config().to_dict()
    return INDEXER if "index_topk" in defined else None


def issue51_model(folder: Path) -> None:
    """Issue 51's HY-V4, saved with save_pretrained (its config as the issue lists it)."""
    import torch
    from transformers import CONFIG_MAPPING, AutoModelForCausalLM

    model_type, fields, seed = ISSUE_51
    torch.manual_seed(seed)
    AutoModelForCausalLM.from_config(CONFIG_MAPPING[model_type](**fields)).eval().save_pretrained(folder)


# --decode: a hybrid model's tiny config whose two layers are both recurrent (Mamba, gated delta)
# holds no keys, and transformers' own decode cannot count its positions (`get_seq_length` asks
# an attention layer): its second layer an attention one, by layer_types or the config's own fields
ATTENTION_LAYER = {"bamba": dict(attn_layer_indices=[1]), "jamba": dict(attn_layer_offset=1, attn_layer_period=2)}


def hybrid_fields(model_type: str, config) -> dict:
    """Under --decode, the fields that make a tiny config's second layer an attention layer
    where none of its layers is (none otherwise)."""
    kinds = list(getattr(config.get_text_config(), "layer_types", None) or [])
    if not DECODE or not kinds or any(("attention" in k and "linear" not in k) or k.startswith("hybrid")
                                      for k in kinds):
        return {}
    return ATTENTION_LAYER.get(model_type, {"layer_types": [kinds[0], "full_attention"]})


def tiny_model(model_type: str, folder: Path, seed: int = 0, experts: dict | None = None, ep: int = 0) -> None:
    import torch
    from transformers import CONFIG_MAPPING, AutoModelForCausalLM

    layers = moe_layers(model_type, ep) if ep else {}  # ep: the chips

    def build(fields):
        fields = {**fields, **fitted(model_type), **OVERRIDES.get(model_type, {}), **layers, **(experts or {})}
        if "text_config" in getattr(CONFIG_MAPPING[model_type], "sub_configs", {}):
            fields = {"text_config": fields}
        config = CONFIG_MAPPING[model_type](**fields, **TOWERS.get(model_type, {}))
        hybrid = hybrid_fields(model_type, config)
        if hybrid:
            fields = {**fields, "text_config": {**fields["text_config"], **hybrid}} if "text_config" in fields else \
                {**fields, **hybrid}
            config = CONFIG_MAPPING[model_type](**fields, **TOWERS.get(model_type, {}))
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config).eval()
        drawn(model, config)
        model.save_pretrained(folder)
        # the tiny config must make a model whose own forward runs, as the importer calls it
        model = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager",
                                                     experts_implementation="batched_mm").eval()
        with torch.no_grad():
            model(torch.zeros((1, 8), dtype=torch.int64), use_cache=False)

    tries = [TINY, {**TINY, **MOE}, {**TINY, **MLA}, {**TINY, **MOE, **MLA}, {**TINY, **MOE, **MLA, **ROTARY}]
    for n, fields in enumerate(tries):  # the generic tiny config, then the MoE, MLA and rotary fields
        try:
            return build(fields)
        except Exception:  # noqa: BLE001 - transformers raises many kinds; the last one is the row's reason
            if n == len(tries) - 1:
                raise


def drawn(model, config) -> None:
    """Weights the model's own init sets to zeros (a router's gate, as afmoe's) drawn like the
    others: a zero router ties every expert, and torch's top-k breaks ties in no documented
    order, so the experts it picks would say nothing about the program."""
    import torch

    std = getattr(config, "initializer_range", None) or 0.02
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim >= 2 and not p.any():
                p.normal_(0.0, std)
