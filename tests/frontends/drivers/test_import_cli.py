"""`tprules import hf` as users run it: its report, bad input (one line, exit 2, no partial
DIR), the missing extra, --no-data, and every command on an imported folder."""

from __future__ import annotations

import json
import shutil
import sys

import pytest

from tprules.cli import main

from ..cli import EXPERTS_PLAN, LLAMA_PLAN, assert_refused, leftovers, plan_file
from ..tiny import make_model


def test_the_report_names_the_model_and_counts(cli, hf_model, tmp_path):
    status, out, err = cli("import", "hf", hf_model("llama"), "--tp", "2", "--out", tmp_path / "p")
    lines = out.splitlines()
    assert status == 0 and err == ""
    assert lines[0].endswith("(LlamaForCausalLM) -> " + str(tmp_path / "p") + ": TP 2, batch 1, seq 8")
    source = json.loads((tmp_path / "p" / "source.json").read_text())
    assert lines[1].startswith(f"{source['statements']} statements (6 folds), {source['candidates']} candidates")
    assert "trace" in lines[2] and lines[2].endswith(" s)")
    # the plan's release (plans change between releases); a Llama has no experts to leave whole
    assert lines[3] == f"plan: {source['plan_from']}" == f"plan: transformers {source['transformers']} (TP plan of " \
                       "LlamaForCausalLM)" and source["replicated_experts"] == []
    status, out, _ = cli("import", "hf", hf_model("llama"), "--tp", "2", "--out", tmp_path / "p", "--format", "json")
    assert status == 0 and json.loads(out)["statements"] == source["statements"]  # an earlier import is replaced
    assert json.loads(out)["plan_from"] == source["plan_from"]


def test_the_report_names_a_plan_file_and_the_experts_it_leaves_whole(cli, hf_model, tmp_path):
    plan = plan_file(tmp_path, LLAMA_PLAN)  # attention only: the experts are replicated
    status, out, err = cli("import", "hf", hf_model("mixtral"), "--tp", "2", "--layers", "1", "--seq", "4",
                           "--plan", plan, "--out", tmp_path / "p")
    assert status == 0 and err == ""
    assert out.splitlines()[3] == f"plan: {plan}; experts replicated on every chip (the plan does not split them): " \
                                  "model.layers.*.mlp.experts"


# name → (how to make SOURCE and the extra arguments, what the one line says)
BAD = {
    "no_config": (lambda tmp, m: (tmp / "empty", []), "config.json: import: no config.json"),
    "no_tp_plan": (lambda tmp, m: (make_model(tmp / "gpt2", "gpt2", weights=False, n_embd=64, n_layer=1, n_head=4), []),
                   "GPT2LMHeadModel: GPT2Config has no base_model_tp_plan; give one with --plan PLAN.json"),
    "heads_not_divisible": (lambda tmp, m: (m("llama"), ["--tp", "8"]),
                            "LlamaForCausalLM: 4 attention heads (2 key/value heads) do not split over --tp 8 chips"),
    "kv_heads_uneven": (lambda tmp, m: (make_model(tmp / "l6", "llama", weights=False, hidden_size=96,
                                                   num_attention_heads=6, num_key_value_heads=3), []),
                        "3 key/value heads (6 attention heads) neither split over --tp 2 chips nor replicate"),
    "corrupt_safetensors": (lambda tmp, m: (_corrupt(tmp, m("llama")), []),
                            "model.safetensors: import: not a readable safetensors file"),
    "plan_style_unknown": (lambda tmp, m: (m("llama"), ["--plan", plan_file(tmp, {**LLAMA_PLAN,
                                                                                 "layers.*.mlp.up_proj": "colwize",
                                                                                 "layers.*.mlp.down_proj": "sideways"})]),
                           "plan.json: import: LlamaForCausalLM: the plan has 2 entries tprules cannot import: "
                           "layers.*.mlp.up_proj colwize (not a style transformers registers); "
                           "layers.*.mlp.down_proj sideways (not a style transformers registers)"),
    "plan_module_missing": (lambda tmp, m: (m("llama"), ["--plan", plan_file(tmp, {**LLAMA_PLAN,
                                                                                 "layers.*.mlp.gate": "colwise"})]),
                            "plan.json: import: LlamaForCausalLM: the plan names 1 module path the model does not "
                            "have: layers.*.mlp.gate"),
    "top_k_over_experts": (lambda tmp, m: (make_model(tmp / "k8", "mixtral", weights=False, num_experts_per_tok=8), []),
                           "MixtralForCausalLM: num_experts_per_tok 8 is more than the 4 experts a router picks from"),
    "experts_width_not_divisible": (
        lambda tmp, m: (make_model(tmp / "i10", "mixtral", weights=False, intermediate_size=10),
                        ["--tp", "4", "--plan", plan_file(tmp, EXPERTS_PLAN)]),  # 5.25's own plan splits no experts
        "gate_up_proj packs 2 parts of 10 on axis 1, each of which does not split into 4 (packed_colwise, --tp 4)"),
    "plan_not_json": (lambda tmp, m: (m("llama"), ["--plan", plan_file(tmp, "{")]), "--plan: cannot read"),
    "vocab_parallel_embedding": (
        lambda tmp, m: (m("llama"), ["--plan", plan_file(tmp, {**LLAMA_PLAN, "embed_tokens": "colwise"})]),
        "LlamaForCausalLM: aten.embedding.default at model.embed_tokens: an embedding table placed "
        "Shard(axis 0 in 2) (vocabulary-parallel embedding is not imported)"),
    "logits_split": (lambda tmp, m: (m("llama"), ["--plan", plan_file(tmp, {**LLAMA_PLAN, "lm_head": "colwise"})]),
                     "the logits would stay split over the chips"),
    "layers_out_of_range": (lambda tmp, m: (m("llama"), ["--layers", "5"]), "--layers 5: the model has 2 decoder layers"),
    "tp_zero": (lambda tmp, m: (m("llama"), ["--tp", "0"]), "usage: --tp takes a count of at least 1; got 0"),
}


def _corrupt(tmp, model):
    copy = shutil.copytree(model, tmp / "corrupt")
    data = (copy / "model.safetensors").read_bytes()
    (copy / "model.safetensors").write_bytes(data[:8] + b"{not json" + data[17:200])
    return copy


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_line_and_leaves_no_dir(cli, hf_model, tmp_path, case):
    setup, message = BAD[case]
    (tmp_path / "empty").mkdir()
    source, extra = setup(tmp_path, hf_model)
    args = ["import", "hf", source, "--out", tmp_path / "out", *extra]
    if "--tp" not in extra:
        args += ["--tp", "2"]
    assert_refused(cli, tmp_path, args, message)


def test_an_op_outside_the_table_names_the_op_and_the_module(cli, hf_model, tmp_path, monkeypatch):
    import torch

    from tprules.frontends.lowering import aten
    from tprules.frontends.lowering import walk as lower

    table = aten.build_table()  # a table of this test's own, without rsqrt
    del table.ops[torch.ops.aten.rsqrt.default]
    monkeypatch.setattr(lower, "op_table", lambda: table)
    status, out, err = cli("import", "hf", hf_model("llama"), "--tp", "2", "--out", tmp_path / "out")
    assert (status, out) == (2, "")
    assert err.strip().endswith("import: LlamaForCausalLM: aten.rsqrt.default at model.layers.0.input_layernorm: "
                                "no registry class for it in the op table (tprules/frontends/lowering/aten.py)")
    assert leftovers(tmp_path, "out") == []


def test_an_existing_folder_that_is_not_an_import_is_left_alone(cli, hf_model, tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    status, _, err = cli("import", "hf", hf_model("llama"), "--tp", "2", "--out", tmp_path / "mine")
    assert status == 2 and "holds no earlier import (source.json)" in err
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"


@pytest.mark.parametrize("module", ["torch", "transformers", "safetensors"])
def test_without_the_extra_import_says_what_to_install(capsys, tmp_path, monkeypatch, module):
    monkeypatch.setitem(sys.modules, module, None)  # `import torch` now fails as if not installed
    status = main(["import", "hf", str(tmp_path), "--tp", "2", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1
    assert f"tprules import needs {module}, which is not installed: pip install -e '.[import]'" in err


def test_no_data_writes_facts_only(cli, imported):
    folder = imported("llama", 2, no_data=True)
    assert not (folder / "data").exists() and not (folder / "expected").exists()
    assert json.loads((folder / "source.json").read_text())["no_data"] is True
    status, out, _ = cli("check", folder, "--format", "json")
    assert status == 0 and len(json.loads(out)["fusions"]) > 100
    with_data = imported("llama", 2)
    for rel in ("op", "reads", "writes", "shape", "member"):  # the same program, traced on meta tensors
        assert (folder / f"{rel}.facts").read_text() == (with_data / f"{rel}.facts").read_text()


def test_every_command_works_on_an_imported_folder(cli, imported, tmp_path):
    folder = imported("qwen2", 2)
    status, out, _ = cli("check", folder, "--format", "json")
    fusions = json.loads(out)["fusions"]
    assert status == 0 and any(f["legal"] for f in fusions) and any("spans_chips" in f["reasons"] for f in fusions)
    status, out, _ = cli("plan", folder, "--format", "json")
    groups = json.loads(out)["groups"]
    statements = (folder / "op.facts").read_text().count("\n")
    assert status == 0 and sum(len(g["members"]) for g in groups) == statements
    refused = next(f["fusion"] for f in fusions if "spans_chips" in f["reasons"])
    status, out, _ = cli("why", folder, f'refused("{refused}", "spans_chips")')
    assert status == 0 and "spans_chips" in out and "member.facts" in out
    status, out, _ = cli("lint", folder)
    assert status == 0 and out.startswith("ok: ") and f"{statements} statements" in out
    snapshots = tmp_path / "golden"
    status, out, _ = cli("golden", "--snapshots", snapshots, "--update", folder)
    assert status == 0 and "new snapshot" in out and "0 updated" in out
    (shim,) = [p for p in (snapshots / folder.name).iterdir()]
    legal = sorted(f["fusion"] for f in fusions if f["legal"])
    assert (shim / "legal.tsv").read_text().split() == legal  # the snapshot holds what check says
    status, out, _ = cli("golden", "--snapshots", snapshots, folder)
    assert status == 0 and "1 match, 0 differ" in out, out
    (shim / "legal.tsv").write_text("\n".join(legal[1:]) + "\n")  # a verdict the snapshot no longer has
    status, out, _ = cli("golden", "--snapshots", snapshots, folder)
    assert status == 1 and "0 match, 1 differ" in out and legal[0] in out, out
    from tprules.config import default_rules_dir

    status, out, _ = cli("diff", "--old", default_rules_dir(), "--new", default_rules_dir(), folder)
    assert status == 0 and "1 judged" in out and f"no verdict differs ({len(fusions)} verdicts compared)" in out, out


def test_the_op_table_is_an_object_not_process_state():
    import torch

    from tprules.frontends.lowering import aten

    shared, own = aten.op_table(), aten.build_table()
    assert shared is aten.op_table() and set(shared.ops) == set(own.ops) and own.skip == shared.skip
    with pytest.raises(TypeError):
        shared.ops[torch.ops.aten.rsqrt.default] = None  # the shared table is read-only
    del own.ops[torch.ops.aten.rsqrt.default]  # a table of one's own changes nothing else
    assert torch.ops.aten.rsqrt.default in aten.op_table().ops and torch.ops.aten.rsqrt.default in aten.build_table().ops
