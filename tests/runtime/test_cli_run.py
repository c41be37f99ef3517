"""`tprules run` as scripts use it: output formats, --save, exit statuses, devices missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from plans import FACTS, example

from tprules.program.builder import ProgramBuilder
from tprules.runtime import Program
from tprules.runtime.values.inputs import program_inputs
from tprules.runtime.values.reference import reference
from tprules.workspace import Workspace

ROOT = FACTS.parent


def test_text_report(cli):
    from tprules.planner import plan

    ws, _ = example("megatron-mlp-tp2")
    groups = plan(ws).groups
    status, out, err = cli("run", FACTS / "megatron-mlp-tp2")
    lines = out.splitlines()
    assert status == 0 and err == ""
    assert "megatron-mlp-tp2 on cpu" in lines[0] and "shim cuda-lane:h100:Bf16" in lines[0]
    assert lines[1].startswith(f"plan: {len(groups)} groups -> {len(groups)} kernels (")
    # a chip runs its own groups and the all-reduce; chip 0 the spine's too, once for both chips
    per_chip = [sum(g.place in (f"chip:{c}", "collective") or (g.place == "spine" and c == 0) for g in groups)
                for c in range(2)]
    chip_rows = [line.split() for line in lines if line.split()[:1] in (["0"], ["1"])]
    assert [row[:3] for row in chip_rows] == [[str(c), str(n), str(n)] for c, n in enumerate(per_chip)]
    (row,) = [line.split() for line in lines if line.split()[:1] == ["out"]]
    assert row[1:3] == ["8x16", "0"] and row[-1] == "ok"  # a spine output: chip 0 computed it for both
    assert lines[-1].endswith("2 transfers (1.0 KiB); the output matches the reference")


def test_json_report(cli):
    status, out, _ = cli("run", FACTS / "int8-mlp-tp2", "--format", "json")
    report = json.loads(out)
    assert status == 0
    assert {"max_abs_err", "outputs", "kernels", "chips", "shim", "ok"} <= set(report)
    assert report["shim"] == "cuda-lane:rtx3060:TwoPassInt8"
    tolerances = {o["tensor"]: o["tolerance"] for o in report["outputs"]}
    assert tolerances["out"] == 1e-3  # after the quantized matmuls
    assert [c["chip"] for c in report["chips"]] == [0, 1]


def test_save_writes_every_program_output(cli, tmp_path):
    status, out, _ = cli("run", FACTS / "int8-mlp-tp2", "--save", tmp_path / "out", "--format", "json")
    outputs = [o["tensor"] for o in json.loads(out)["outputs"]]
    assert sorted(p.stem for p in (tmp_path / "out").glob("*.npy")) == sorted(outputs) == ["e3", "out", "ue7"]
    _, prog = example("int8-mlp-tp2")
    ref = reference(prog, program_inputs(prog))
    for name in outputs:
        np.testing.assert_allclose(np.load(tmp_path / "out" / f"{name}.npy"), ref.get(name), rtol=1e-5, atol=1e-6)


def test_unfused_runs_one_kernel_per_statement(cli):
    status, out, _ = cli("run", FACTS / "llama-layer-tp4", "--unfused", "--format", "json")
    assert status == 0 and json.loads(out)["kernels"] == 62


def test_inputs_from_data_files_reach_the_outputs(cli, tmp_path):
    b = ProgramBuilder(chips=2)
    x = b.tensor("x", [2, 2], spine=True, data=np.array([[1, -2], [3, -4]], np.float32))
    parts = [b.stmt(f"r{c}", "relu", [x], b.tensor(f"p{c}", [2, 2], chip=c)) for c in range(2)]
    b.fold("ar", parts, b.tensor("y", [2, 2], spine=True), "c")
    status, out, _ = cli("run", b.write(tmp_path / "p"), "--save", tmp_path / "out")
    assert status == 0
    assert np.load(tmp_path / "out" / "y.npy").tolist() == [[2, 0], [6, 0]]


def test_an_input_file_of_the_wrong_shape_is_bad_input(cli, tmp_path):
    b = ProgramBuilder(chips=1)
    b.stmt("n", "neg", [b.tensor("x", [2, 2], spine=True, data=np.zeros((3,), np.float32))],
           b.tensor("y", [2, 2], spine=True))
    status, out, err = cli("run", b.write(tmp_path / "p"))
    assert status == 2 and out == ""
    assert "data/x.npy" in err and "has shape [3]; the facts say [2, 2]" in err


def test_cuda_with_the_simulator_on_is_a_clean_error(cli):
    # the tests run with NUMBA_ENABLE_CUDASIM=1 (conftest), which --device cuda must not mistake for a GPU
    status, out, err = cli("run", FACTS / "megatron-mlp-tp2", "--device", "cuda")
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("device: ") and "--device sim" in err


def test_cuda_without_a_gpu_is_a_clean_error():
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    done = subprocess.run([sys.executable, "-m", "tprules", "run", "facts/megatron-mlp-tp2", "--device", "cuda"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    if done.returncode == 0:
        pytest.skip("this machine has a CUDA GPU")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("device: ") and "GPU" in done.stderr


def test_repeat_must_be_positive(cli):
    status, _, err = cli("run", FACTS / "megatron-mlp-tp2", "--repeat", "0")
    assert status == 2 and "--repeat" in err


def test_show_kernels_prints_the_generated_sources(cli):
    status, out, err = cli("run", FACTS / "megatron-mlp-tp2", "--show", "kernels", "--format", "json")
    assert status == 0 and json.loads(out)["ok"]
    assert err.count("# --- group ") == json.loads(out)["kernels"] and "def kernel(" in err


def test_the_kernel_cache_is_outside_the_repository(cli):
    from tprules.config import cache_dir

    cli("run", FACTS / "megatron-mlp-tp2")
    assert list((cache_dir() / "kernels" / "cpu").glob("k_*.py"))
    assert not list(ROOT.glob("**/k_*.py"))


def test_the_rules_matter_for_folds(cli, rules_copy):
    """With collective_fold deleted from the rules the planner fuses a fold; its kernel sums
    only the local partial and run reports the mismatch."""
    tp = rules_copy / "tp.dl"
    text = tp.read_text()
    rule = 'refused(F, "collective_fold") :- member(F, O), is_fold(O), !kernel(F, _).'
    assert rule in text
    tp.write_text(text.replace(rule, ""))
    ws = Workspace(FACTS / "megatron-mlp-tp2", rules_copy)
    from tprules.planner import plan

    folds = {s.name for s in Program.from_workspace(ws).statements if s.fold}
    fused_folds = [g for g in plan(ws).groups if len(g.members) > 1 and folds & set(g.members)]
    status, out, _ = cli("run", FACTS / "megatron-mlp-tp2", "--rules", rules_copy, "--format", "json")
    assert fused_folds, "the planner fused no fold"
    assert status == 1 and not json.loads(out)["ok"]



def test_a_mismatch_exits_1_and_says_which_output(cli, monkeypatch):
    """A planner that fuses a fold (what the rules refuse) makes run fail, whatever planner it is."""
    from plans import fused_plan

    import tprules.planner

    _, prog = example("megatron-mlp-tp2")
    monkeypatch.setattr(tprules.planner, "plan", lambda ws, **_: fused_plan(prog, [["allreduce", "bias", "residual"]]))
    status, out, err = cli("run", FACTS / "megatron-mlp-tp2")
    assert status == 1 and err == ""
    (row,) = [line.split() for line in out.splitlines() if line.split()[:1] == ["out"]]
    assert row[-1] == "MISMATCH"
    assert "MISMATCH: 1 of 1 outputs differ from the reference (out)" in out.splitlines()[-1]


def test_the_simulator_needs_no_setting_even_after_numba_was_imported():
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    code = ("import numba, sys; from tprules.cli import main; "
            "sys.exit(main(['run', 'facts/megatron-mlp-tp2', '--device', 'sim', '--unfused', '--format', 'json']))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["device"].startswith("sim")


def test_show_timing_says_where_the_time_went(cli):
    """`--show timing`: one line per kind of kernel, its runs summing to the kernels every chip ran."""
    status, out, err = cli("run", FACTS / "megatron-mlp-tp2", "--show", "timing", "--format", "json")
    report = json.loads(out)
    lines = [line.split() for line in err.splitlines() if line.startswith("[timing]")]
    assert status == 0 and lines[0][1:3] == ["kernel", "kind"]
    per_kind = {row[1]: int(row[2]) for row in lines[1:-1]}
    assert sum(per_kind.values()) == sum(c["kernels"] for c in report["chips"]) == int(lines[-1][4])
    assert set(per_kind) == set(report["kinds"])


def test_show_timing_on_a_device_that_does_not_time_kernels(cli):
    status, _, err = cli("run", FACTS / "megatron-mlp-tp2", "--device", "sim", "--show", "timing")
    assert status == 0 and "kernels are not timed one by one on this device" in err
