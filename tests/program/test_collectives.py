"""The all-gather and the reduce-scatter (SPEC §1): a fold of either kind is refused as
collective_fold like an all-reduce's, and check, why, the REPL and plan name its kind."""

from __future__ import annotations

import json

from conftest import ROOT

GATHER = ROOT / "facts" / "gather-mlp-tp2"
SCATTER = ROOT / "facts" / "sp-mlp-tp2"


def test_a_gather_fold_in_a_fusion_is_refused_and_check_names_its_kind(cli):
    status, out, _ = cli("check", GATHER)
    assert status == 0
    row = next(line for line in out.splitlines() if line.startswith("gelu_allgather "))
    assert "refused  collective_fold" in row and "allgather (collective) all-gather mlp_hidden" in row
    status, out, _ = cli("check", GATHER, "--format", "json")
    fusions = {f["fusion"]: f for f in json.loads(out)["fusions"]}
    assert fusions["allgather_mm2"]["reasons"] == ["collective_fold"]
    assert fusions["allgather_mm2"]["collectives"] == ["all-gather mlp_hidden", ""]


def test_why_names_the_fold_and_the_collectives_kind(cli):
    status, out, _ = cli("why", GATHER, 'refused("gelu_allgather", "collective_fold")')
    lines = out.splitlines()
    assert status == 0
    assert lines[1] == ("fusion gelu_allgather: gelu_0 (chip:0), allgather (collective) all-gather mlp_hidden; "
                        "refused: collective_fold")
    assert any('fold("allgather", "mlp_hidden")' in line for line in lines)
    status, out, _ = cli("why", GATHER, 'refused("gelu_allgather", "collective_fold")', "--format", "json")
    members = json.loads(out)["fusions"][0]["members"]
    assert members[1] == {"statement": "allgather", "place": "collective", "note": "all-gather mlp_hidden"}


def test_an_all_reduce_without_a_collective_fact_shows_as_before(cli):
    status, out, _ = cli("why", ROOT / "facts" / "megatron-mlp-tp2", 'refused("mm2_allreduce", "collective_fold")')
    assert "allreduce (collective); refused" in out.splitlines()[1]


def test_plan_names_the_kind_of_each_collective(cli):
    _, gather, _ = cli("plan", GATHER)
    _, reduce, _ = cli("plan", ROOT / "facts" / "megatron-mlp-tp2")
    assert "[collective: all-gather mlp_hidden]" in gather
    assert "[collective: all-reduce mlp_out]" in reduce


def test_the_cost_model_counts_an_all_gathers_bytes():
    from tprules.codegen.cost import estimate
    from tprules.codegen.lowering.lower import lower
    from tprules.planner.plan import Group
    from tprules.program.model import Program
    from tprules.workspace import Workspace

    prog = Program.from_workspace(Workspace(GATHER))
    kernel = lower(Group("g", ("allgather",), "collective"), prog)
    # the joined 8x32 float32 stored, and each 8x16 slice read once (a buffer smaller than the
    # pass that reads it is read from memory once, not once per element of the result)
    assert estimate(kernel).bytes == 8 * 32 * 4 + 2 * 8 * 16 * 4


def test_a_reduce_scatter_fold_in_a_fusion_is_refused_and_check_names_its_kind(cli):
    status, out, _ = cli("check", SCATTER)
    assert status == 0
    rows = {line.split()[0]: line for line in out.splitlines() if line.split()[:1]}
    assert "refused  collective_fold" in rows["mm2_scatter"]
    assert "scatter (collective) reduce-scatter sp_out" in rows["mm2_scatter"]
    # a chip's slice of the sum, fused with what follows on that chip, holds no fold: legal
    assert "legal" in rows["block_norm_0"] and "scatter_0 (chip:0)" in rows["block_norm_0"]
    status, out, _ = cli("check", SCATTER, "--format", "json")
    fusions = {f["fusion"]: f for f in json.loads(out)["fusions"]}
    assert fusions["scatter_slice"]["reasons"] == ["collective_fold"]
    assert fusions["scatter_slice"]["collectives"] == ["reduce-scatter sp_out", ""]


def test_why_and_the_repl_name_a_reduce_scatter(cli):
    import subprocess
    import sys

    status, out, _ = cli("why", SCATTER, 'refused("mm2_scatter", "collective_fold")', "--format", "json")
    members = json.loads(out)["fusions"][0]["members"]
    assert members[1] == {"statement": "scatter", "place": "collective", "note": "reduce-scatter sp_out"}
    done = subprocess.run([sys.executable, "-m", "tprules", "repl", str(SCATTER)], cwd=ROOT, capture_output=True,
                          text=True, input='why refused("scatter_slice", R)\n', timeout=120)
    assert ("fusion scatter_slice: scatter (collective) reduce-scatter sp_out, scatter_0 (chip:0); "
            "refused: collective_fold") in done.stdout
    _, plan, _ = cli("plan", SCATTER)
    assert "[collective: reduce-scatter sp_out]" in plan and "[collective: all-gather sp_in]" in plan


def test_a_reduce_scatter_on_four_chips_is_well_formed_and_runs(tmp_path):
    """facts/generate.py's sequence-parallel MLP at TP 4: each chip's slice takes its block."""
    import importlib.util

    from tprules.runtime import execute
    from tprules.workspace import Workspace

    spec = importlib.util.spec_from_file_location("facts_generate", ROOT / "facts" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    ws = Workspace(module.sp_mlp(4).write(tmp_path / "sp4"))
    report = execute(ws, device="cpu")
    assert report.ok and report.transfers == 4 * 3 * 2  # the gather's and the scatter's blocks, 3 into each chip
    assert report.moved_bytes == 2 * 4 * 3 * (2 * 16 * 4)  # each a 2x16 float32 block
