"""Import once per layer kind: the stamped program equals a full trace, file for file, on
small models of each pattern; the layer kinds are found, not assumed."""

from __future__ import annotations

import numpy as np
import pytest

from ..cli import EXPERTS_PLAN, plan_file
from ..tiny import GROUP_ROUTING, LATENT_MOE, make_model

SLIDING = ["full_attention", "sliding_attention", "sliding_attention", "full_attention", "sliding_attention"]
# name → (model type, TP, config overrides, layer kinds expected)
PATTERNS = {
    "dense_llama": ("llama", 2, {"num_hidden_layers": 4}, 1),
    "dense_qwen2_kv_replicated": ("qwen2", 4, {"num_hidden_layers": 3}, 1),
    "gemma2_alternating_sliding": ("gemma2", 2, {"num_hidden_layers": 5, "sliding_window": 4}, 2),
    "gemma3_one_global_in_three": ("gemma3_text", 2, {"num_hidden_layers": 7, "sliding_window_pattern": 3,
                                                      "sliding_window": 4}, 2),
    "qwen2_layer_types": ("qwen2", 2, {"num_hidden_layers": 5, "use_sliding_window": True, "sliding_window": 4,
                                       "layer_types": SLIDING}, 2),
    "cohere2_sliding_pattern": ("cohere2", 2, {"num_hidden_layers": 5, "sliding_window": 4}, 2),
}


def _import(source, tp, out, **options):
    from tprules.frontends.drivers.hf import import_hf

    return import_hf(source, tp, out, seq=6, **options)


def _same_folders(a, b) -> list[str]:
    """Names of the files that differ (facts and data; source.json says how it was made)."""
    names = {p.relative_to(a) for p in a.rglob("*") if p.is_file()} | \
            {p.relative_to(b) for p in b.rglob("*") if p.is_file()}
    bad = []
    for name in sorted(names):
        if str(name) == "source.json":
            continue
        pa, pb = a / name, b / name
        if not (pa.exists() and pb.exists()):
            bad.append(str(name))
        elif name.suffix == ".npy":
            if not np.array_equal(np.load(pa), np.load(pb)):
                bad.append(str(name))
        elif pa.read_bytes() != pb.read_bytes():
            bad.append(str(name))
    return bad


@pytest.mark.parametrize("pattern", sorted(PATTERNS))
def test_the_stamped_program_is_the_full_trace_statement_for_statement(pattern, tmp_path):
    model_type, tp, overrides, kinds = PATTERNS[pattern]
    source = make_model(tmp_path / "model", model_type, weights=pattern == "dense_llama", **overrides)
    no_data = pattern != "dense_llama"  # one pattern with weights: data/ and expected/ too
    stamped = _import(source, tp, tmp_path / "stamped", no_data=no_data)
    traced = _import(source, tp, tmp_path / "traced", no_data=no_data, every_layer=True)
    assert stamped.kinds == kinds and traced.kinds is None
    assert stamped.traced < overrides["num_hidden_layers"]  # something was stamped
    assert (stamped.statements, stamped.candidates, stamped.tensors, stamped.folds, stamped.folded) == \
           (traced.statements, traced.candidates, traced.tensors, traced.folds, traced.folded)
    assert _same_folders(tmp_path / "stamped", tmp_path / "traced") == []


# Styles that add statements at a module's boundary inside the layers: experts' partials
# folded once (moe_tp_experts, under EXPERTS_PLAN: transformers 5.25's own plans leave the
# experts replicated), a gather and a split input (GLM-4); with DeepSeek-V3's and GLM-4-MoE's
# dense first layer a second layer kind (their own plans, whichever release is installed).
# name → (model type, config overrides, kinds)
BOUNDARY_PATTERNS = {
    "mixtral_experts": ("mixtral", {"num_hidden_layers": 3}, 1),
    "qwen3_moe_experts": ("qwen3_moe", {"num_hidden_layers": 3}, 1),
    "deepseek_v3_dense_first_latent_attention": ("deepseek_v3", {**LATENT_MOE, "num_hidden_layers": 4}, 2),
    "glm4_moe_group_routing": ("glm4_moe", {**GROUP_ROUTING, "first_k_dense_replace": 1, "num_hidden_layers": 4}, 2),
    "glm4_gather_and_split_input": ("glm4", {"num_hidden_layers": 3}, 1),
}


@pytest.mark.parametrize("tp", [1, 2])
@pytest.mark.parametrize("pattern", sorted(BOUNDARY_PATTERNS))
def test_layers_whose_styles_add_statements_are_stamped_as_the_full_trace(pattern, tp, tmp_path):
    model_type, overrides, kinds = BOUNDARY_PATTERNS[pattern]
    no_data = tp == 1  # with weights at TP 2: data/ and expected/ too, and the import's check against torch
    source = make_model(tmp_path / "model", model_type, weights=not no_data, **overrides)
    plan = plan_file(tmp_path, EXPERTS_PLAN) if pattern.endswith("_experts") else None
    stamped = _import(source, tp, tmp_path / "stamped", no_data=no_data, plan=plan)
    traced = _import(source, tp, tmp_path / "traced", no_data=no_data, every_layer=True, plan=plan)
    if plan is not None and tp > 1:
        assert stamped.folds >= 2 * overrides["num_hidden_layers"]  # attention's and the experts' folds, every layer
    assert stamped.kinds == kinds and stamped.traced < overrides["num_hidden_layers"]
    assert (stamped.statements, stamped.candidates, stamped.folds, stamped.folded) == \
           (traced.statements, traced.candidates, traced.folds, traced.folded)
    assert _same_folders(tmp_path / "stamped", tmp_path / "traced") == []


def test_the_nodes_a_trace_erases_count_in_their_layers_numbering(tmp_path):
    """fx numbers a node before dead code is erased: Mixtral's experts in the batched_mm form
    erase two views a layer, so layer 1's views start two numbers after layer 0's last live one."""
    from tprules.frontends.layers.kinds import layer_kinds, reduced
    from tprules.frontends.layers.stamp import Segments
    from tprules.frontends.source.pretrained import build_model, read_source
    from tprules.frontends.source.trace import erased_nodes, trace

    source = make_model(tmp_path / "model", "mixtral", weights=False, num_hidden_layers=3)
    src = read_source(source, None, None)
    model = build_model(src, 0, True, "batched_mm")
    kinds = layer_kinds(model)
    with reduced(model, kinds):
        program = trace(model, 1, 6, src.architecture)
    erased = [e.name for e in erased_nodes(program) if e.name.startswith("view")]
    segments = Segments(program, kinds)
    live = [name for name, q in segments.of.items() if q == 0 and name.startswith("view")]
    assert len(erased) == 2 * 2  # two a layer, two layers traced
    assert segments.count[0]["view"] == len(live) + 2


def test_layers_that_differ_only_in_a_per_layer_config_list_are_two_kinds(tmp_path):
    import torch
    from transformers import CONFIG_MAPPING, AutoModelForCausalLM

    from tprules.frontends.layers.kinds import layer_kinds

    from ..tiny import TINY

    config = CONFIG_MAPPING["qwen2"](**{**TINY, "num_hidden_layers": 5, "use_sliding_window": True,
                                        "sliding_window": 4, "layer_types": SLIDING})
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    kinds = layer_kinds(model)
    assert kinds.kind == (0, 1, 1, 0, 1) and kinds.order == (0, 1, 2, 3)
    config.layer_types = ["full_attention"] * 5
    with torch.device("meta"):
        dense = layer_kinds(AutoModelForCausalLM.from_config(config))
    assert dense.kind == (0,) * 5 and dense.order == (0, 1)


def test_a_model_that_cannot_be_stamped_is_traced_whole(tmp_path, monkeypatch):
    from tprules.frontends.layers import stamp

    def refuse(self, *args, **kwargs):
        raise stamp.CannotStamp("a node between two layers")

    monkeypatch.setattr(stamp.Segments, "__init__", refuse)
    source = make_model(tmp_path / "model", "llama", weights=False, num_hidden_layers=3)
    report = _import(source, 2, tmp_path / "out", no_data=True)
    assert report.kinds is None and report.statements > 0


def test_the_report_says_how_many_layers_were_traced(cli, tmp_path):
    source = make_model(tmp_path / "model", "llama", weights=False, num_hidden_layers=3)
    status, out, err = cli("import", "hf", source, "--tp", "2", "--out", tmp_path / "p", "--no-data")
    assert status == 0 and err == ""  # piped: no progress bar
    assert out.splitlines()[-1] == "1 layer kind: 2 layers traced, the rest stamped"
    status, out, _ = cli("import", "hf", source, "--tp", "2", "--out", tmp_path / "p", "--no-data", "--every-layer")
    assert status == 0 and "stamped" not in out
