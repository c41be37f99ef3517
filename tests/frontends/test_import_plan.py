"""The plan an import applies is the one transformers applies (the model's `tp_plan`): its
lm_head and input embedding split as transformers splits them, a base model's plan found
under whatever prefix it has, an entry that would leave a module it names replicated
refused; and benchmarks/import_coverage.py's rule that fails a program its plan did not shape."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from tprules.runtime import Program
from tprules.runtime.values.compare import errors
from tprules.runtime.values.inputs import program_inputs
from tprules.runtime.values.reference import reference
from tprules.workspace import Workspace

from .cli import LLAMA_PLAN, leftovers
from .tiny import facts, make_model

ROOT = Path(__file__).resolve().parents[2]


def _coverage():
    spec = importlib.util.spec_from_file_location("import_coverage", ROOT / "benchmarks" / "import_coverage.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _matches_torch(folder) -> float:
    prog = Program.from_workspace(Workspace(folder))
    _, rel = errors(reference(prog, program_inputs(prog)).get("logits"), np.load(folder / "expected" / "logits.npy"))
    return rel


def test_lm_head_and_embedding_are_split_as_transformers_splits_them(imported):
    folder = imported("llama", 2)
    placed = {t for t, _ in facts(folder, "placed")}
    assert {"lm_head.weight@0", "lm_head.weight@1", "model.embed_tokens.weight@0", "model.embed_tokens.weight@1"} <= placed
    folds = dict(facts(folder, "fold"))
    kinds = dict(facts(folder, "collective"))
    ops = dict(facts(folder, "op"))
    gather = next(o for o, c in folds.items() if c == "lm_head")  # colwise_gather_output: the logits all-gathered
    assert kinds["lm_head"] == "all_gather" and ops[gather] == "cat"
    (whole,) = [t for o, t in facts(folder, "writes") if o == gather]
    assert sorted((i, t) for o, i, t in facts(folder, "reads") if o == gather) == [("0", f"{whole}@0"), ("1", f"{whole}@1")]
    assert [n for t, _, n in facts(folder, "shape") if t == whole][-1] == "128"  # the whole vocabulary
    embed = next(o for o, c in folds.items() if c == "model.embed_tokens")  # embedding_rowwise: an all-reduce
    assert "model.embed_tokens" not in kinds and ops[embed] == "sum"
    assert _matches_torch(folder) <= 1e-4


@pytest.fixture(scope="module")
def llama4_text(tmp_path_factory):
    return make_model(tmp_path_factory.mktemp("l4") / "model", "llama4_text", num_local_experts=2,
                      intermediate_size_mlp=128)


def test_a_base_model_under_another_prefix_is_split_not_replicated(llama4_text, tmp_path):
    """llama4_text: the plan's keys are under `model.`, its base_model_prefix is language_model."""
    from tprules.frontends.drivers.hf import import_hf

    report = import_hf(llama4_text, 2, tmp_path / "p", seq=4)
    modules = {c for _, c in facts(tmp_path / "p", "fold")}
    assert {"model.layers.0.self_attn.o_proj", "model.layers.1.self_attn.o_proj", "model.layers.0.feed_forward.experts",
            "lm_head", "model.embed_tokens"} <= modules
    assert report.folds == len(modules) >= 6
    assert _matches_torch(tmp_path / "p") <= 1e-4


def test_a_plan_file_is_read_under_the_base_model_that_has_its_modules(llama4_text, tmp_path):
    from tprules.frontends.drivers.hf import import_hf

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(LLAMA_PLAN))  # relative to the base model, `model` (not language_model)
    import_hf(llama4_text, 2, tmp_path / "p", seq=4, plan=plan)
    assert {c for _, c in facts(tmp_path / "p", "fold")} == {f"model.layers.{i}.self_attn.o_proj" for i in (0, 1)}
    assert _matches_torch(tmp_path / "p") <= 1e-4


def _top_level(monkeypatch, moved: str) -> None:
    """LlamaForCausalLM's own plan naming `layers.*.{moved}` from the top, as if it were the
    base model's (the prefix a base model's plan is read at, wrong): model.layers.*.{moved}
    is named by nothing else."""
    from transformers import LlamaConfig, LlamaForCausalLM

    base = {k: v for k, v in LlamaConfig.base_model_tp_plan.items() if k != f"layers.*.{moved}"}
    monkeypatch.setattr(LlamaConfig, "base_model_tp_plan", base)
    monkeypatch.setattr(LlamaForCausalLM, "_tp_plan", {"lm_head": "colwise_gather_output",
                                                       f"layers.*.{moved}": "rowwise"})


def test_an_entry_that_would_leave_its_module_replicated_is_one_line(cli, hf_model, tmp_path, monkeypatch):
    _top_level(monkeypatch, "mlp.down_proj")
    status, out, err = cli("import", "hf", hf_model("llama"), "--tp", "2", "--out", tmp_path / "out")
    assert (status, out) == (2, "")
    assert len(err.splitlines()) == 1
    assert "import: LlamaForCausalLM: the plan entry layers.*.mlp.down_proj (rowwise) matches no module of " \
           "LlamaForCausalLM; model.layers.*.mlp.down_proj, which it names under another path, would be replicated" \
           in err
    assert leftovers(tmp_path, "out") == []


def test_an_entry_for_a_module_this_configuration_does_not_build_is_skipped(hf_model, tmp_path, monkeypatch):
    """As transformers skips it (its warning: the rule matches nothing and is not applied):
    nothing the plan meant to split is left whole."""
    from transformers import LlamaConfig

    from tprules.frontends.drivers.hf import import_hf

    plan = {**LlamaConfig.base_model_tp_plan, "layers.*.mlp.experts": "moe_tp_experts"}
    monkeypatch.setattr(LlamaConfig, "base_model_tp_plan", plan)
    report = import_hf(hf_model("llama"), 2, tmp_path / "p", seq=4)
    assert report.folds == 6


def test_a_plan_entry_naming_no_module_names_its_style(cli, hf_model, tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({**LLAMA_PLAN, "layers.*.mlp.gate": "colwise"}))
    status, _, err = cli("import", "hf", hf_model("llama"), "--tp", "2", "--out", tmp_path / "out", "--plan", plan)
    assert status == 2 and len(err.splitlines()) == 1
    assert "the plan names 1 module path the model does not have: layers.*.mlp.gate (colwise)" in err


# -- benchmarks/import_coverage.py's rule ------------------------------------------------


def _folder(tmp_path, folds: list[str], spine: list[str]) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    if folds:
        (tmp_path / "fold.facts").write_text("".join(f"{o}\t{o}\n" for o in folds))
    (tmp_path / "spine.facts").write_text("".join(f"{t}\n" for t in spine))
    return tmp_path


def test_the_coverage_rule_fails_a_program_with_no_collective(tmp_path):
    shaped = _coverage().shaped
    assert shaped(_folder(tmp_path / "a", [], ["x"]), 2, {}) == "no collective at TP 2: the plan split nothing"
    assert shaped(_folder(tmp_path / "b", [], ["x"]), 1, {}) is None  # one chip: nothing to communicate
    assert shaped(_folder(tmp_path / "c", ["allreduce_x"], ["x"]), 2, {}) is None


def test_the_coverage_rule_fails_a_replicated_lm_head_the_plan_splits(tmp_path):
    shaped = _coverage().shaped
    sharded = {"lm_head.weight": "lm_head colwise_gather_output"}
    folder = _folder(tmp_path / "a", ["allreduce_x"], ["lm_head.weight", "x"])
    assert shaped(folder, 2, sharded) == "replicates what the model's plan splits: lm_head.weight (lm_head " \
                                         "colwise_gather_output)"
    assert shaped(_folder(tmp_path / "b", ["allreduce_x"], ["x"]), 2, sharded) is None


def test_the_coverage_rule_reads_the_plan_transformers_applies(hf_model, imported, tmp_path):
    coverage = _coverage()
    sharded = coverage.plan_sharded(hf_model("llama"))
    assert sharded == {"lm_head.weight": "lm_head colwise_gather_output",
                       "model.embed_tokens.weight": "model.embed_tokens embedding_rowwise"}
    assert coverage.shaped(imported("llama", 2), 2, sharded) is None
    plan = tmp_path / "plan.json"  # a --plan that leaves lm_head and the embedding whole: the program
    plan.write_text(json.dumps(LLAMA_PLAN))  # is not the one transformers runs
    why = coverage.shaped(imported("llama", 2, plan=plan, seq=4), 2, sharded)
    assert why is not None and why.startswith("replicates what the model's plan splits: lm_head.weight")


@pytest.mark.parametrize("model_type", ["gemma"])
def test_a_table_tied_to_lm_head_is_split_once(imported, model_type):
    folder = imported(model_type, 2)  # Gemma ties lm_head to the embedding: one weight, split on the vocabulary
    tables = {t for o, _, t in facts(folder, "reads") if o.startswith("embedding@")}  # the lookup's table (and ids)
    assert tables == {"lm_head.weight@0", "lm_head.weight@1", "input_ids"}  # the one tied weight, by its first name
    assert not any(t.startswith("model.embed_tokens.weight") for t, _ in facts(folder, "tensor"))
    assert {c for _, c in facts(folder, "fold")} >= {"lm_head", "model.embed_tokens"}
    assert _matches_torch(folder) <= 1e-4
