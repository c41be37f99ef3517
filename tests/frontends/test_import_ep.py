"""`import hf --ep`: the EP plans transformers ships (`base_model_ep_plan`, applied in place of
the TP plan as `enable_expert_parallel` does): whole experts per chip (grouped_gemm), the
routing slots masked per chip at the experts' boundary and one all-reduce
(ep_dispatch_experts); a tiny Mixtral and Qwen3-MoE against torch, on every command, in the
default experts form (grouped_mm); the dispatch's own statements in the batched_mm form
(`BATCHED`; the grouped form's: test_import_ep_grouped.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tprules.runtime import Program, execute
from tprules.runtime.values.compare import errors
from tprules.runtime.values.inputs import program_inputs
from tprules.runtime.values.reference import reference
from tprules.workspace import Workspace

from .cli import assert_refused, plan_file
from .tiny import facts, make_model

ONE_LAYER = dict(layers=1, seq=4)
BATCHED = dict(experts="batched_mm")  # each slot's weights gathered by its clamped local id
EXPERTS = "model.layers.0.mlp.experts"


@pytest.fixture(scope="module")
def ep(hf_model, tmp_path_factory):
    """`ep("mixtral", 2)`: that model imported under its EP plan on 2 chips."""
    from tprules.frontends.drivers.hf import import_hf

    done: dict[tuple, Path] = {}

    def get(model_type: str, chips: int, plan: str | None = None, **options) -> Path:
        key = (model_type, chips, plan, tuple(sorted(options.items())))
        if key not in done:
            out = tmp_path_factory.mktemp(f"{model_type}-ep{chips}") / "program"
            import_hf(hf_model(model_type), chips, out, plan=plan, ep=plan is None, **{**ONE_LAYER, **options})
            done[key] = out
        return done[key]

    return get


def _matches_torch(folder: Path) -> float:
    prog = Program.from_workspace(Workspace(folder))
    _, rel = errors(reference(prog, program_inputs(prog)).get("logits"), np.load(folder / "expected" / "logits.npy"))
    return rel


@pytest.mark.parametrize("model_type, chips", [("mixtral", 2), ("qwen3_moe", 2), ("qwen3_moe", 4)])
def test_the_reference_matches_torch(ep, model_type, chips):
    assert _matches_torch(ep(model_type, chips)) <= 1e-4


@pytest.mark.parametrize("model_type", ["mixtral", "qwen3_moe"])
def test_whole_experts_per_chip_and_one_all_reduce_named_by_the_experts(ep, model_type):
    folder = ep(model_type, 2, **BATCHED)
    assert [c for _, c in facts(folder, "fold")] == [EXPERTS]  # the EP plan names nothing else: no other collective
    shapes = {(t, int(a)): int(n) for t, a, n in facts(folder, "shape")}
    placed = {t: int(k) for t, k in facts(folder, "placed")}
    for weight in ("gate_up_proj", "down_proj"):
        assert shapes[(f"{EXPERTS}.{weight}@0", 0)] == shapes[(f"{EXPERTS}.{weight}@1", 0)] == 4 // 2
        assert placed[f"{EXPERTS}.{weight}@1"] == 1
    spine = {t for (t,) in facts(folder, "spine")}
    assert "model.layers.0.self_attn.q_proj.weight" in spine and "lm_head.weight" in spine  # not in the EP plan
    modules = {o for o, key, _ in facts(folder, "attr") if key == "module"}
    assert modules == {o for o, _ in facts(folder, "op")}  # every statement names its module path
    added = [o for o, _ in facts(folder, "op") if o.startswith("ep_")]
    assert len(added) == 2 * 6  # per chip: shift, local ids, two bounds, held, masked weights
    assert {m for o, key, m in facts(folder, "attr") if key == "module" and o in added} == {EXPERTS}


def test_each_chip_maps_its_experts_to_local_ids_and_masks_the_rest(ep):
    """Chip k's ids of experts [2k, 2k+2) are their local ids, the others' weights 0; the
    chips' masked weights sum to the router's."""
    folder = ep("mixtral", 2, **BATCHED)
    prog = Program.from_workspace(Workspace(folder))
    values = reference(prog, program_inputs(prog))
    (ids,) = [t for o, _, t in facts(folder, "reads") if o == "ep_shift_getitem_1@0"]
    (weights,) = [t for o, i, t in facts(folder, "reads") if o == "ep_mask_div@0" and i == "0"]
    whole_ids, whole_w = values.get(ids), values.get(weights)
    for k in range(2):
        held = (whole_ids // 2) == k
        local = values.get(f"getitem_1_ep_local@{k}")
        assert (local[held] == whole_ids[held] - 2 * k).all() and local.min() >= 0 and local.max() <= 1
        assert np.array_equal(values.get(f"div_ep@{k}"), np.where(held, whole_w, 0))
    assert np.allclose(values.get("div_ep@0") + values.get("div_ep@1"), whole_w)


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_the_fused_program_matches_torch(ep, device):
    report = execute(Workspace(ep("mixtral", 2, seq=2)), device=device)
    (out,) = report.outputs
    assert report.ok and out.expected.ok and out.expected.max_rel_err <= 1e-4


@pytest.mark.skipif(not (Path(sys.executable).parent / "mpiexec").exists() and shutil.which("mpiexec") is None,
                    reason="needs MPI: pip install -e '.[mpi]'")
def test_on_two_mpi_ranks_matches_torch(ep):
    done = subprocess.run([sys.executable, "-m", "tprules", "run", ep("qwen3_moe", 2), "--ranks", "2", "--format",
                           "json"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["ok"] and data["outputs"][0]["expected"]["ok"]


def test_the_masked_routing_is_fused_on_its_chip(cli, ep):
    folder = ep("mixtral", 2)
    status, out, _ = cli("plan", folder, "--format", "json")
    assert status == 0
    groups = json.loads(out)["groups"]
    for k in range(2):
        (group,) = [g for g in groups if f"ep_mask_div@{k}" in g["members"]]
        assert group["place"] == f"chip:{k}" and len(group["members"]) > 1
        assert {f"ep_shift_getitem_1@{k}", f"ep_held_getitem_1@{k}"} <= set(group["members"])
    status, out, _ = cli("check", folder, "--format", "json")
    verdicts = {f["fusion"]: f for f in json.loads(out)["fusions"]}
    assert verdicts["ep_from_getitem_1@0__ep_held_getitem_1@0"]["legal"]
    assert verdicts["div__ep_mask_div@0"]["reasons"] == ["chip_and_spine"]  # the router's weights stay on the spine
    status, out, _ = cli("why", folder, 'refused("div__ep_mask_div@0", R)')
    assert status == 0 and "chip_and_spine" in out and "ep_mask_div@0" in out


TP_EXPERTS = {"layers.*.mlp.experts.gate_up_proj": "packed_colwise", "layers.*.mlp.experts.down_proj": "rowwise",
              "layers.*.mlp.experts": "moe_tp_experts"}


def test_the_cost_of_ep_against_tp_experts(cli, ep, tmp_path):
    """The same all-reduce (the experts' output), and each chip holds half the experts'
    weights either way: E/N whole experts (EP) or 1/N of every expert (TP); both in the
    batched_mm form."""
    plan = tmp_path / "tp-experts.json"
    plan.write_text(json.dumps(TP_EXPERTS))
    lines = {}
    for name, folder in (("ep", ep("mixtral", 2, **BATCHED)), ("tp", ep("mixtral", 2, plan=str(plan), **BATCHED))):
        status, _, err = cli("plan", folder, "--show", "cost")
        assert status == 0
        lines[name] = [x for x in err.splitlines() if "all-reduce of" in x or x.startswith("[inputs]")]
    reduce = [x.split("; + ")[1].split(" ms ")[1] for x in lines["ep"][1:]]
    assert reduce == ["all-reduce of 1.0 KiB over 2 chips, 1.0 KiB into each (NVLink 4, ring)"]  # 4 x 64 f32
    assert lines["tp"][1:] and [x.split("; + ")[1].split(" ms ")[1] for x in lines["tp"][1:]] == reduce
    # gate_up [4, 256, 64] and down [4, 64, 128] in f32: 384 KiB of experts, half on each chip
    assert lines["ep"][0].startswith("[inputs] each chip's own: chip 0 192.0 KiB, chip 1 192.0 KiB (together 384.0 KiB)")
    assert lines["tp"][0] == lines["ep"][0]


# name → (how to make SOURCE and the extra arguments, what the one line says)
BAD = {
    "experts_not_divisible": (lambda tmp, m: (m("qwen3_moe"), ["--tp", "3"]),
                              "Qwen3MoeForCausalLM: 4 experts do not split over --tp 3 chips under the EP plan"),
    "no_ep_plan": (lambda tmp, m: (m("llama"), []),
                   "LlamaForCausalLM: LlamaConfig has no base_model_ep_plan (--ep)"),
    "tp_style_refused_in_ep_plan": (
        lambda tmp, m: (m("mixtral"), ["--plan", plan_file(tmp, TP_EXPERTS)]),
        "layers.*.mlp.experts moe_tp_experts (transformers refuses it in an EP plan (deprecated)"),
    "ep_router": (lambda tmp, m: (m("mixtral"), ["--plan", plan_file(tmp, {"layers.*.mlp.gate": "ep_router"})]),
                  "layers.*.mlp.gate ep_router (transformers refuses it in an EP plan (deprecated)"),
    "experts_kept_whole": (
        lambda tmp, m: (m("mixtral"), ["--plan", plan_file(tmp, {"layers.*.mlp.experts.gate_up_proj": "grouped_gemm",
                                                             "layers.*.mlp.experts": "ep_dispatch_experts"})]),
        "ep_dispatch_experts at model.layers.0.mlp.experts: model.layers.0.mlp.experts.down_proj is read by expert "
        "id, but the plan keeps it whole"),
    "nothing_split_by_expert": (
        lambda tmp, m: (m("mixtral"), ["--plan", plan_file(tmp, {"layers.*.mlp.experts": "ep_dispatch_experts"})]),
        "ep_dispatch_experts at model.layers.0.mlp.experts: none of its parameters is split by expert (grouped_gemm)"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_line_and_leaves_no_dir(cli, hf_model, tmp_path, case):
    setup, message = BAD[case]
    source, extra = setup(tmp_path, hf_model)
    args = ["import", "hf", source, "--ep", "--out", tmp_path / "out", "--layers", "1", *extra]
    if "--tp" not in extra:
        args += ["--tp", "2"]
    assert_refused(cli, tmp_path, args, message)


def test_the_report_says_ep(cli, hf_model, tmp_path):
    status, out, _ = cli("import", "hf", hf_model("qwen3_moe"), "--tp", "2", "--ep", "--layers", "1", "--out",
                         tmp_path / "p")
    assert status == 0 and out.splitlines()[0].endswith(": EP 2, batch 1, seq 8")
    assert json.loads((tmp_path / "p" / "source.json").read_text())["ep"] is True


def test_a_made_model_with_eight_experts_at_ep_4(tmp_path):
    from tprules.frontends.drivers.hf import import_hf

    source = make_model(tmp_path / "m8", "mixtral", num_local_experts=8, num_experts=8, num_hidden_layers=1)
    import_hf(source, 4, tmp_path / "p", ep=True, seq=4)
    shapes = {(t, int(a)): int(n) for t, a, n in facts(tmp_path / "p", "shape")}
    assert shapes[(f"{EXPERTS}.gate_up_proj@3", 0)] == 2
    assert _matches_torch(tmp_path / "p") <= 1e-4
