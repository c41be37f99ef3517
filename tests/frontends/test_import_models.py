"""Imported models against torch's own forward: Llama, Qwen2 (q/k/v bias) and Gemma (its
norm and activation) at TP 1, 2 and 4, through tprules' reference executor everywhere and
through the fused kernels on cpu and sim."""

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

from .tiny import MUST_WORK, facts


@pytest.mark.parametrize("tp", [1, 2, 4])
@pytest.mark.parametrize("model_type", MUST_WORK)
def test_the_reference_of_the_imported_program_is_torchs_forward(imported, model_type, tp):
    folder = imported(model_type, tp)
    prog = Program.from_workspace(Workspace(folder))  # well-formed, shapes as SPEC §4 says
    assert prog.chips == tp and prog.outputs == ["logits"] and "input_ids" in prog.inputs
    got = reference(prog, program_inputs(prog)).get("logits")
    torch_logits = np.load(folder / "expected" / "logits.npy")
    _, rel = errors(got, torch_logits)
    assert rel <= 1e-4
    assert np.abs(torch_logits).max() > 1.0  # attention and MLP matter at this size


def test_a_batch_of_two_splits_heads_inside_the_merged_batch_axis(imported):
    folder = imported("llama", 4, batch=2, seq=5)  # bmm reads [batch x heads, seq, head]: heads split inside
    prog = Program.from_workspace(Workspace(folder))
    assert prog.tensors["input_ids"].shape == (2, 5)
    _, rel = errors(reference(prog, program_inputs(prog)).get("logits"), np.load(folder / "expected" / "logits.npy"))
    assert rel <= 1e-4


def test_the_fused_program_on_cpu_matches_torch(imported):
    report = execute(Workspace(imported("llama", 2)), device="cpu")
    (out,) = report.outputs
    assert report.ok and out.expected.ok and out.expected.max_rel_err <= 1e-4
    assert sum(n for k, n in report.kinds.items() if "attention" in k.split("+")) == 2 * 2  # a layer's, a chip's


def test_the_fused_program_in_the_simulator_matches_torch(imported):
    report = execute(Workspace(imported("gemma", 2, layers=1, seq=4)), device="sim")
    (out,) = report.outputs
    assert report.ok and out.expected.ok and out.expected.max_rel_err <= 1e-4


@pytest.mark.skipif(not (Path(sys.executable).parent / "mpiexec").exists() and shutil.which("mpiexec") is None,
                    reason="needs MPI: pip install -e '.[mpi]'")
def test_an_imported_model_on_mpi_ranks_gives_the_one_process_outputs(imported, tmp_path):
    # Qwen2 at TP 4 on 2 ranks (chips 0, 2 and 1, 3): the rank reference computes every
    # imported class (expand, reshape, ...) and the logits match one process and torch.
    folder = imported("qwen2", 4, layers=1, seq=4)
    single = execute(Workspace(folder), device="cpu")
    done = subprocess.run([sys.executable, "-m", "tprules", "run", folder, "--ranks", "2", "--format", "json",
                           "--save", tmp_path / "out"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["ok"] and len({r["pid"] for r in data["ranks"]}) == 2
    assert data["outputs"][0]["expected"]["ok"]
    got, want = np.load(tmp_path / "out" / "logits.npy"), single.values["logits"]
    assert float(np.max(np.abs(got - want))) <= 1e-6 * float(np.max(np.abs(want)))


def test_an_output_off_from_expected_is_a_mismatch(imported, tmp_path):
    from tprules.runtime.values.compare import compare

    folder = shutil.copytree(imported("qwen2", 2), tmp_path / "p")
    prog = Program.from_workspace(Workspace(folder))
    ref = reference(prog, program_inputs(prog))
    device = {"logits": {c: ref.get("logits") for c in range(2)}}  # a device that computes the reference
    (same,) = compare(prog, device, ref)
    assert same.ok and same.expected.ok
    np.save(folder / "expected" / "logits.npy", np.load(folder / "expected" / "logits.npy") * 1.01)
    (off,) = compare(prog, device, ref)
    assert not off.ok and not off.expected.ok and off.max_rel_err == 0.0
    assert off.expected.max_rel_err == pytest.approx(0.01 / 1.01, rel=1e-3)


def test_a_split_weight_is_one_file_per_chip_holding_its_slice(imported, hf_model):
    from safetensors.numpy import load_file

    weights = load_file(hf_model("qwen2") / "model.safetensors")
    data = imported("qwen2", 2) / "data"
    q = "model.layers.0.self_attn.q_proj"
    assert not (data / f"{q}.weight.npy").exists()
    halves = [np.load(data / f"{q}.weight@{k}.npy") for k in (0, 1)]
    np.testing.assert_array_equal(np.concatenate(halves, axis=0), weights[f"{q}.weight"])  # colwise: rows
    bias = [np.load(data / f"{q}.bias@{k}.npy") for k in (0, 1)]
    np.testing.assert_array_equal(np.concatenate(bias), weights[f"{q}.bias"])
    o = "model.layers.0.self_attn.o_proj.weight"
    np.testing.assert_array_equal(np.concatenate([np.load(data / f"{o}@{k}.npy") for k in (0, 1)], axis=1),
                                  weights[o])  # rowwise: columns
    assert (data / "model.norm.weight.npy").exists()  # the spine: one file


def test_fewer_key_value_heads_than_chips_are_replicated(imported):
    data = imported("llama", 4) / "data"  # 2 key/value heads on 4 chips
    k = [np.load(data / f"model.layers.1.self_attn.k_proj.weight@{c}.npy") for c in range(4)]
    assert k[0].shape == (16, 64)  # one head each
    np.testing.assert_array_equal(k[0], k[1])
    np.testing.assert_array_equal(k[2], k[3])
    assert not np.array_equal(k[0], k[2])


def test_the_plan_places_what_the_issue_says(imported):
    folder = imported("llama", 2)
    placed = {t for t, _ in facts(folder, "placed")}
    spine = {t for (t,) in facts(folder, "spine")}
    assert {"input_ids", "logits", "model.norm.weight"} <= spine
    assert {"model.layers.0.mlp.down_proj.weight@1", "model.embed_tokens.weight@1", "lm_head.weight@1"} <= placed
    folds = facts(folder, "fold")
    assert len(folds) == 6  # attention and MLP of two layers, the embedding's all-reduce, the logits' all-gather
    assert {c for _, c in folds} == {f"model.layers.{i}.{m}" for i in (0, 1)
                                      for m in ("self_attn.o_proj", "mlp.down_proj")} | {"model.embed_tokens", "lm_head"}


def test_statements_keep_their_aten_op_and_module_path(imported):
    attrs = {(o, k): v for o, k, v in facts(imported("llama", 2), "attr")}
    classes = dict(facts(imported("llama", 2), "op"))
    (q,) = [o for o, k in attrs if k == "module" and attrs[o, k] == "model.layers.0.self_attn.q_proj"
            and classes[o] == "matmul" and o.endswith("@0")]
    assert attrs[q, "aten"] == "aten.mm.default" and attrs[q, "transpose_b"] == "1"
    assert {classes[o] for o, k in attrs if k == "aten" and attrs[o, k] == "aten.bmm.default"} == {"bmm"}


def test_constant_subgraphs_are_folded_into_marked_inputs(imported):
    folder = imported("gemma", 2)
    source = json.loads((folder / "source.json").read_text())
    folded = set(source["folded"])
    assert len(folded) >= 3  # cos, sin, the causal mask (and Gemma's 1 + w)
    readers = {v for o, k, v in facts(folder, "attr") if k == "folded"}
    assert readers and set(",".join(readers).split(",")) <= folded
    assert {c for _, c in facts(folder, "op")}.isdisjoint({"cos", "sin", "arange"})
    for name in folded:
        assert (folder / "data" / f"{name}.npy").exists() and (name,) in {tuple(r) for r in facts(folder, "spine")}


def test_candidates_are_producer_consumer_pairs_and_siblings(imported):
    folder = imported("llama", 2)
    members: dict[str, list[str]] = {}
    for f, o in facts(folder, "member"):
        members.setdefault(f, []).append(o)
    writer = {t: o for o, t in facts(folder, "writes")}
    reads = facts(folder, "reads")
    pairs = {frozenset(ms) for ms in members.values()}
    for o, _, t in reads:
        if t in writer:
            assert frozenset((writer[t], o)) in pairs
    q, k = "mm@0", "mm_1@0"  # q_proj and k_proj read the same normed hidden state (one view of it)
    assert frozenset((q, k)) in pairs
    assert json.loads((folder / "source.json").read_text())["candidates"] == len(members)


@pytest.mark.parametrize("machine", ["cpu", "gpu"])
@pytest.mark.parametrize("model_type", MUST_WORK)
def test_each_chips_attention_is_one_group(imported, model_type, machine):
    """QKᵀ → scale → mask → softmax → ·V of one chip's heads is one group (the tiny layer's chain
    fits the h100 lane's 16 members, every member counted as SPEC §3 says): the planner merges
    along attention's chain first, and its kernel holds the chain that runs per head and tile
    of rows (codegen/lowering/attention.py)."""
    from tprules.codegen import lower
    from tprules.codegen.ir import AttentionStage
    from tprules.planner import plan as make_plan

    ws = Workspace(imported(model_type, 2))
    prog = Program.from_workspace(ws)
    plan = make_plan(ws, machine=machine)
    softmaxes = [s.name for s in prog.statements if s.cls == "softmax"]
    assert len(softmaxes) == 2 * 2  # two layers, two chips
    for name in softmaxes:
        (group,) = [g for g in plan.groups if name in g.members]
        assert sum(prog.statement(o).cls == "bmm" for o in group.members) == 2, group
        assert sum(isinstance(s, AttentionStage) for s in lower(group, prog).stages) == 1


@pytest.mark.parametrize("model_type", MUST_WORK)
def test_the_gate_and_up_projections_share_a_kernel(imported, model_type):
    """Their activation reads each through a reshape (a view): still the matmul's epilogue, so
    the planner fuses it first and the two projections become siblings of one matmul stage,
    before the up projection's product could join the down projection instead."""
    from tprules.planner import plan as make_plan

    ws = Workspace(imported(model_type, 2))
    prog = Program.from_workspace(ws)
    module = {s.name: dict(s.attrs).get("module", "") for s in prog.statements if s.cls == "matmul"}
    groups = make_plan(ws, machine="cpu").groups
    gated = [g for g in groups if any(module.get(o, "").endswith("mlp.gate_proj") for o in g.members)]
    assert len(gated) == 2 * 2  # two layers, two chips
    for g in gated:
        assert [o for o in g.members if module.get(o, "").endswith("mlp.up_proj")], g
