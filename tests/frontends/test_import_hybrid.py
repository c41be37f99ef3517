"""A hybrid of Mamba-2 and attention layers (a tiny Bamba: layer 0 a Mamba mixer, layer 1
attention): the mixer imports as the statements it traces to (the causal conv1d, the chunked
scan's running sums, exp and batched matmuls), left replicated by the plan so it runs on the
spine; attention and the MLPs split colwise/rowwise. Against torch, on cpu, and on 2 MPI ranks."""

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

from .tiny import MAMBA, make_model

PLAN = {**{f"layers.*.self_attn.{p}_proj": "colwise" for p in "qkv"}, "layers.*.self_attn.o_proj": "rowwise",
        "layers.*.feed_forward.gate_proj": "colwise", "layers.*.feed_forward.up_proj": "colwise",
        "layers.*.feed_forward.down_proj": "rowwise"}


@pytest.fixture(scope="module")
def hybrid(tmp_path_factory):
    from tprules.frontends.drivers.hf import import_hf

    root = tmp_path_factory.mktemp("bamba")
    model = make_model(root / "model", "bamba", **MAMBA)
    (root / "plan.json").write_text(json.dumps(PLAN))
    import_hf(model, 2, root / "program", seq=6, plan=root / "plan.json")
    return root / "program"


def _facts(folder, relation):
    return [line.split("\t") for line in (folder / f"{relation}.facts").read_text().splitlines()]


def test_the_mixer_runs_on_the_spine_and_attention_on_the_chips(hybrid):
    ops = dict(_facts(hybrid, "op"))
    writes = dict(_facts(hybrid, "writes"))
    spine = {t for (t,) in _facts(hybrid, "spine")}
    modules = {o: v for o, k, v in _facts(hybrid, "attr") if k == "module"}
    convs = [o for o, c in ops.items() if c == "conv1d"]
    assert convs and all(writes[o] in spine and modules[o] == "model.layers.0.mamba" for o in convs)
    assert any(c == "matmul" and modules[o].startswith("model.layers.0.mamba") and writes[o] in spine
               for o, c in ops.items())  # the scan's running sums and its projections
    assert _facts(hybrid, "fold")  # attention's and the MLPs' all-reduces
    placed = {t for t, _ in _facts(hybrid, "placed")}
    assert any(modules[o] == "model.layers.1.self_attn" and writes[o] in placed for o in ops)


def test_the_hybrid_matches_torch_in_the_reference_and_on_cpu(hybrid):
    prog = Program.from_workspace(Workspace(hybrid))
    torch_logits = np.load(hybrid / "expected" / "logits.npy")
    _, rel = errors(reference(prog, program_inputs(prog)).get("logits"), torch_logits)
    assert rel <= 1e-4
    report = execute(Workspace(hybrid), device="cpu")
    assert report.ok, [(o.tensor, o.max_rel_err) for o in report.outputs]
    assert [o.expected.ok for o in report.outputs if o.tensor == "logits"] == [True]


@pytest.mark.skipif(not (Path(sys.executable).parent / "mpiexec").exists() and shutil.which("mpiexec") is None,
                    reason="needs MPI: pip install -e '.[mpi]'")
def test_the_hybrid_on_two_ranks_gives_the_reference_outputs(hybrid, tmp_path):
    prog = Program.from_workspace(Workspace(hybrid))
    want = reference(prog, program_inputs(prog)).get("logits")
    done = subprocess.run([sys.executable, "-m", "tprules", "run", hybrid, "--ranks", "2", "--format", "json",
                           "--save", tmp_path / "out"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["ok"] and len({r["pid"] for r in data["ranks"]}) == 2
    assert [o["expected"]["ok"] for o in data["outputs"] if o["tensor"] == "logits"] == [True]
    got = np.load(tmp_path / "out" / "logits.npy")
    assert float(np.max(np.abs(got - want))) <= 1e-5 * float(np.max(np.abs(want)))
