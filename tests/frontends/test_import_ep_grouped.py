"""`import hf --ep --experts grouped_mm`: transformers' grouped experts under its EP plan, as
its AllReduceEP runs them: each chip holds E/N experts whole, sorts its own routing slots
over local ids (the sentinel E/N where it does not hold the expert: sorted last, past every
offset), one grouped matmul per projection over its own experts, one all-reduce. Against
torch on four MoE families at EP 2 and 4, and on every command."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tprules.runtime import Program, execute
from tprules.runtime.values.inputs import program_inputs
from tprules.runtime.values.reference import reference
from tprules.workspace import Workspace

from .cli import assert_refused, plan_file
from .layers.test_stamp import _same_folders
from .test_import_ep import EXPERTS, _matches_torch
from .tiny import LATENT_MOE, facts, make_model

# the tiny models beside conftest's (mixtral, qwen3_moe): 4 experts, top 2; DeepSeek-V3's
# first layer dense, its second 8 routed experts and a shared one; GPT-OSS's experts with biases
MODELS = {"olmoe": (dict(num_experts=4, num_experts_per_tok=2), 1),
          "deepseek_v3": (LATENT_MOE, 2),
          "gpt_oss": (dict(num_local_experts=4, num_experts_per_tok=2, layer_types=["full_attention"] * 2), 1)}


@pytest.fixture(scope="module")
def grouped(hf_model, tmp_path_factory):
    """`grouped("olmoe", 2)`: that model imported in the grouped form under its EP plan."""
    from tprules.frontends.drivers.hf import import_hf

    done: dict[tuple, Path] = {}

    def get(model_type: str, chips: int, experts: str = "grouped_mm") -> Path:
        key = (model_type, chips, experts)
        if key not in done:
            root = tmp_path_factory.mktemp(f"{model_type}-ep{chips}-{experts}")
            overrides, layers = MODELS.get(model_type, ({}, 1))
            source = make_model(root / "model", model_type, **overrides) if overrides else hf_model(model_type)
            import_hf(source, chips, root / "program", ep=True, experts=experts, layers=layers, seq=4)
            done[key] = root / "program"
        return done[key]

    return get


@pytest.mark.parametrize("model_type, chips", [("mixtral", 2), ("mixtral", 4), ("qwen3_moe", 2), ("qwen3_moe", 4),
                                               ("olmoe", 2), ("deepseek_v3", 2), ("deepseek_v3", 4), ("gpt_oss", 2)])
def test_the_reference_matches_torch(grouped, model_type, chips):
    folder = grouped(model_type, chips)
    assert _matches_torch(folder) <= 1e-4
    ops = facts(folder, "op")
    per_chip = [[o for o, c in ops if c == "grouped_matmul" and o.endswith(f"@{k}")] for k in range(chips)]
    assert all(len(mms) == len(per_chip[0]) >= 2 for mms in per_chip)  # each chip's own, per projection
    assert not [o for o, c in ops if c == "grouped_matmul" and "@" not in o]  # none on the spine
    assert facts(folder, "fold")


def _named(folder: Path):
    ops = dict(facts(folder, "op"))
    reads = {(o, int(i)): t for o, i, t in facts(folder, "reads")}
    writes = dict(facts(folder, "writes"))
    shapes = {(t, int(a)): int(n) for t, a, n in facts(folder, "shape")}
    return ops, reads, writes, shapes


def test_each_chip_sorts_its_own_slots_over_local_ids(grouped):
    """Chip k's local ids are id - 2k for experts [2k, 2k+2), the sentinel 2 for the others
    (transformers' local_index); its grouped matmuls read its 2 experts and the offsets of its
    held slots only, and the rows past the last offset (the sentinel slots) are zero."""
    folder = grouped("mixtral", 2)
    ops, reads, writes, shapes = _named(folder)
    prog = Program.from_workspace(Workspace(folder))
    values = reference(prog, program_inputs(prog))
    ids = reads[("ep_shift_getitem_1@0", 0)]
    whole = values.get(ids)
    for k in range(2):
        held = whole // 2 == k
        local = values.get(f"{ids}_ep_local@{k}")
        assert np.array_equal(local, np.where(held, whole - 2 * k, 2))
        mms = [o for o, c in ops.items() if c == "grouped_matmul" and o.endswith(f"@{k}")]
        assert len(mms) == 2  # gate_up and down
        for mm in mms:
            assert shapes[(reads[(mm, 1)], 0)] == 2  # the chip's 2 experts
            offsets = values.get(reads[(mm, 2)])
            counts = np.bincount(local[held].astype(np.int64), minlength=2)
            assert offsets.tolist() == np.cumsum(counts).tolist()
            out = values.get(writes[mm])
            assert not out[int(offsets[-1]):].any() and out[:int(offsets[-1])].any()


def test_the_fused_program_runs_and_every_command_works(cli, grouped):
    folder = grouped("mixtral", 2)
    for device in ("cpu", "sim"):
        report = execute(Workspace(folder), device=device)
        (out,) = report.outputs
        assert report.ok and out.expected.ok and out.expected.max_rel_err <= 1e-4, device
    status, out, _ = cli("check", folder, "--format", "json")
    assert status == 0
    verdicts = {f["fusion"]: f for f in json.loads(out)["fusions"]}
    assert verdicts["ep_from_getitem_1@0__ep_unwrap_getitem_1@0"]["legal"]
    status, out, _ = cli("why", folder, 'refused("div__ep_mask_div@0", R)')
    assert status == 0 and "chip_and_spine" in out
    status, out, _ = cli("plan", folder, "--format", "json")
    assert status == 0
    groups = json.loads(out)["groups"]
    for k in range(2):  # the sentinel ids with the routing mask, and the offsets' slice with the counts
        (ids,) = [g for g in groups if f"ep_unwrap_getitem_1@{k}" in g["members"]]
        assert ids["place"] == f"chip:{k}" and f"ep_mask_div@{k}" in ids["members"]
        (first,) = [g for g in groups if f"ep_first_cumsum_1@{k}" in g["members"]]
        assert first["place"] == f"chip:{k}" and len(first["members"]) > 1


@pytest.mark.skipif(not (Path(sys.executable).parent / "mpiexec").exists() and shutil.which("mpiexec") is None,
                    reason="needs MPI: pip install -e '.[mpi]'")
def test_on_two_mpi_ranks_matches_torch(grouped):
    done = subprocess.run([sys.executable, "-m", "tprules", "run", grouped("qwen3_moe", 2), "--ranks", "2",
                           "--format", "json"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["ok"] and data["outputs"][0]["expected"]["ok"]


def test_each_chip_reads_its_experts_weights_once(cli, grouped, imported):
    """plan --show cost: each grouped matmul kernel of a chip reads the chip's own experts
    (gate_up [2, 256, 64] and down [2, 64, 128] in f32: 192 KiB, all it holds), once; on
    one chip the kernel reads all 4 experts'."""
    status, _, err = cli("plan", grouped("mixtral", 2), "--show", "cost")
    assert status == 0
    assert "[inputs] each chip's own: chip 0 192.0 KiB, chip 1 192.0 KiB (together 384.0 KiB)" in err
    kernels = [x for x in err.splitlines() if x.startswith("[cost]") and "grouped_matmul" in x]
    assert len(kernels) == 2 and all("192.0 KiB of weights read" in x for x in kernels)
    status, _, err = cli("plan", imported("mixtral", 1, layers=1, seq=4), "--show", "cost")
    (one,) = [x for x in err.splitlines() if x.startswith("[cost]") and "grouped_matmul" in x]
    assert "384.0 KiB of weights read" in one


@pytest.mark.parametrize("experts", ["grouped_mm", "batched_mm"])
def test_ep_layers_stamp_as_the_full_trace(tmp_path, experts):
    """Three MoE layers of one kind: the dispatch's statements of every layer renamed with it."""
    from tprules.frontends.drivers.hf import import_hf

    source = make_model(tmp_path / "model", "mixtral", weights=False, num_hidden_layers=3)
    options = dict(ep=True, experts=experts, seq=4, no_data=True)
    stamped = import_hf(source, 2, tmp_path / "stamped", **options)
    traced = import_hf(source, 2, tmp_path / "traced", every_layer=True, **options)
    assert stamped.traced is not None and stamped.traced < 3 and traced.kinds is None
    assert _same_folders(tmp_path / "stamped", tmp_path / "traced") == []
    assert len([o for o, _ in facts(tmp_path / "stamped", "op") if o.startswith("ep_mask_")]) == 3 * 2


def test_an_expert_weight_kept_whole_is_refused(cli, hf_model, tmp_path):
    plan = plan_file(tmp_path, {"layers.*.mlp.experts.gate_up_proj": "grouped_gemm",
                                "layers.*.mlp.experts": "ep_dispatch_experts"})
    assert_refused(cli, tmp_path, ["import", "hf", hf_model("mixtral"), "--ep", "--tp", "2", "--experts", "grouped_mm",
                                   "--plan", plan, "--layers", "1", "--out", tmp_path / "out"],
                   f"ep_dispatch_experts at {EXPERTS}: {EXPERTS}.down_proj is read by expert id, but the plan keeps "
                   "it whole")
