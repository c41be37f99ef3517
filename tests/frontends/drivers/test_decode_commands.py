"""Every command on a decode-step program as on a prefill one: check, why, plan, run on cpu,
in the simulator and on two MPI ranks, and compile for sm_90."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tprules.runtime import execute
from tprules.workspace import Workspace


@pytest.fixture(scope="module")
def step(hf_model, tmp_path_factory):
    """Llama at TP 2, one layer: a decode step after 3 tokens, cache 6."""
    from tprules.frontends.drivers.decode import import_decode

    out = tmp_path_factory.mktemp("decode-commands") / "program"
    import_decode(hf_model("llama"), 2, out, past=3, cache_len=6, layers=1)
    return out


def test_check_why_and_plan_answer_on_a_decode_step(cli, step):
    status, out, _ = cli("check", step, "--format", "json")
    fusions = json.loads(out)["fusions"]
    assert status == 0 and any(f["legal"] for f in fusions)
    # the cache's write is the chip's: fusible with the key projection's rotary on that chip
    writes = [f for f in fusions if "index_put" in f["fusion"] and f["fusion"].endswith("@1")]
    assert writes and any(f["legal"] for f in writes)
    status, out, _ = cli("plan", step, "--format", "json")
    groups = json.loads(out)["groups"]
    assert status == 0 and sum(len(g["members"]) for g in groups) == (step / "op.facts").read_text().count("\n")
    refused = next(f["fusion"] for f in fusions if "spans_chips" in f["reasons"])
    status, out, _ = cli("why", step, f'refused("{refused}", "spans_chips")')
    assert status == 0 and "spans_chips" in out and "member.facts" in out


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_the_fused_step_matches_torch(step, device):
    report = execute(Workspace(step), device=device)
    assert report.ok and len(report.outputs) == 1 + 2 * 2  # logits, and a layer's keys and values on each chip
    assert all(o.expected is not None and o.expected.ok for o in report.outputs)


@pytest.mark.skipif(not (Path(sys.executable).parent / "mpiexec").exists() and shutil.which("mpiexec") is None,
                    reason="needs MPI: pip install -e '.[mpi]'")
def test_on_two_ranks_each_keeps_its_chips_cache(step, tmp_path):
    done = subprocess.run([sys.executable, "-m", "tprules", "run", step, "--ranks", "2", "--format", "json",
                           "--save", tmp_path / "out"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["ok"] and len({r["pid"] for r in data["ranks"]}) == 2
    for k in range(2):
        got = np.load(tmp_path / "out" / f"model.layers.0.key_cache_new@{k}.npy")
        assert np.allclose(got, np.load(step / "expected" / f"model.layers.0.key_cache_new@{k}.npy"), rtol=0, atol=1e-5)


def test_the_step_compiles_for_sm_90(step):
    from tests.compile.conftest import python

    probe = python("-c", "from tprules.codegen.cuda import nvvm; nvvm.Compiler(nvvm.parse_arch('sm_90'))")
    if probe.returncode != 0:
        pytest.skip("NVVM is not installed here (pip install -e '.[cuda-compile]')")
    done = python("-m", "tprules", "compile", str(step), "--device", "cuda", "--arch", "sm_90", "--format", "json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["ok"] is True and data["arch"] == "sm_90"
