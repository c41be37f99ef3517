"""Issue 34's "must work": torchtitan's Llama 3 TP plan (sequence parallel on, loss parallel off)
on a small torchtitan-style Llama (facts/recipes/llama3_debug.py), through
`tprules import torch` and `tprules run` as users run them.

- TP 2 and 4 run on cpu within 1e-4 relative of the module's own forward, computed here;
- the facts hold the collectives DTensor inserts for that plan, each by kind, axis and
  module path: the embedding's partial sum reduce-scattered over the sequence, each block's
  input all-gathered before attention and before the feed-forward, wo's and w2's partial
  sums reduce-scattered, the final norm's output all-gathered into the output projection
  and its vocabulary shards all-gathered; no all-reduce;
- the norms and residuals run on sequence shards;
- the simulator (TP 2) and two MPI ranks (TP 2 and 4) give the same output;
- torch.repeat_interleave of the KV heads imports as the same program as torchtitan's
  expand-and-reshape.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tprules.cli import main  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RECIPES = ROOT / "facts" / "recipes"
RECIPE = RECIPES / "llama3_debug.py"
LAYERS = 2
TOLERANCE = 1e-4

mpi = pytest.mark.skipif(not (Path(sys.executable).parent / "mpiexec").exists() and shutil.which("mpiexec") is None,
                         reason="needs MPI: pip install -e '.[mpi]'")


def tprules(*args, env=None, timeout=600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tprules", *map(str, args)], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=env)


def _forward() -> np.ndarray:
    """The module's own forward on the recipe's inputs, here, not through the importer."""
    sys.path.insert(0, str(RECIPES))
    try:
        import importlib.util

        spec = importlib.util.spec_from_file_location("_llama3_debug_forward", RECIPE)
        recipe = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(recipe)
    finally:
        sys.path.remove(str(RECIPES))
    with torch.no_grad():
        return recipe.model()(*recipe.inputs()).numpy()


@pytest.fixture(scope="module")
def forward() -> np.ndarray:
    return _forward()


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """`imported(tp)`: the program folder of the recipe imported at that TP."""
    done: dict[int, Path] = {}

    def get(tp: int) -> Path:
        if tp not in done:
            out = tmp_path_factory.mktemp(f"titan-tp{tp}") / "program"
            assert main(["import", "torch", str(RECIPE), "--tp", str(tp), "--out", str(out)]) == 0
            done[tp] = out
        return done[tp]

    return get


def _program(folder: Path):
    from tprules.program.model import Program
    from tprules.workspace import Workspace

    return Program.from_workspace(Workspace(folder))


def _relative(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.max(np.abs(got - want)) / np.max(np.abs(want)))


def _checked_run(folder: Path, out: Path, forward: np.ndarray, *options, env=None) -> dict:
    done = tprules("run", folder, *options, "--format", "json", "--save", out, env=env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    (output,) = report["outputs"]
    assert report["ok"] and output["tensor"] == "output" and output["expected"]["max_rel_err"] <= TOLERANCE
    assert _relative(np.load(out / "output.npy"), forward) <= TOLERANCE
    return report


@pytest.mark.parametrize("tp", [2, 4])
def test_the_plan_runs_on_cpu_as_the_module_computes(imported, forward, tp, tmp_path):
    folder = imported(tp)
    assert _relative(np.load(folder / "expected" / "output.npy"), forward) <= 1e-6  # the importer's own forward
    _checked_run(folder, tmp_path / "out", forward, "--device", "cpu")


def _torch_collectives() -> list[tuple[str, int, str]]:
    """(kind, axis, module) of each collective DTensor inserts for torchtitan's plan."""
    want = [("reduce_scatter", 1, "tok_embeddings")]  # RowwiseParallel: Partial → Shard(1)
    for i in range(LAYERS):
        want += [("all_gather", 1, f"layers.{i}.attention"),  # PrepareModuleInput: Shard(1) → Replicate
                 ("reduce_scatter", 1, f"layers.{i}.attention.wo"),  # RowwiseParallel: Partial → Shard(1)
                 ("all_gather", 1, f"layers.{i}.feed_forward"),
                 ("reduce_scatter", 1, f"layers.{i}.feed_forward.w2")]
    want += [("all_gather", 1, "output"),  # ColwiseParallel(input_layouts=Shard(1)): to Replicate
             ("all_gather", 2, "output")]  # its Shard(-1) output to Replicate
    return sorted(want)


@pytest.mark.parametrize("tp", [2, 4])
def test_the_facts_hold_the_collectives_where_torch_puts_them(imported, tp):
    prog = _program(imported(tp))
    got = sorted((kind, int(prog.statement(fold).attr("axis")), prog.statement(fold).attr("module"))
                 for fold, kind in prog.folds.items())
    assert got == _torch_collectives()
    assert "all_reduce" not in Counter(prog.folds.values())


@pytest.mark.parametrize("tp", [2, 4])
def test_the_norms_and_residuals_run_on_sequence_shards(imported, tp):
    prog = _program(imported(tp))
    seq, dim = 8, 64
    for module in [f"layers.{i}.{norm}" for i in range(LAYERS) for norm in ("attention_norm", "ffn_norm")] + ["norm"]:
        shapes = {(prog.tensors[s.writes].home, prog.tensors[s.writes].shape) for s in prog.statements
                  if s.attr("module") == module and s.cls == "mul" and len(prog.tensors[s.writes].shape) == 3}
        assert shapes == {(k, (1, seq // tp, dim)) for k in range(tp)}, module
    residual = [s for s in prog.statements if s.attr("module") == f"layers.{LAYERS - 1}" and s.cls == "add"]
    assert {prog.tensors[s.writes].shape for s in residual} == {(1, seq // tp, dim)}
    assert sorted(prog.tensors[s.writes].home for s in residual) == sorted(list(range(tp)) * 2)


def test_a_candidate_spans_layers_only_through_the_residual(imported):
    """What one layer hands the next is its residual sum (module `layers.N`). A statement that
    one layer computes and every later layer reads (a chip's block of a shared constant) would
    pair with readers across the program, and the rules' cycle search walks every statement
    between a candidate's members: quadratic in depth at 70B."""
    import re

    prog = _program(imported(2))
    members: dict[str, list[tuple[int, str]]] = {}
    for line in (imported(2) / "member.facts").read_text().splitlines():
        fusion, statement = line.split("\t")
        module = prog.statement(statement).attr("module") or ""
        layer = re.match(r"layers\.(\d+)", module)
        if layer:
            members.setdefault(fusion, []).append((int(layer.group(1)), module))
    spanning = [m for m in members.values() if len({i for i, _ in m}) > 1]
    assert spanning  # the residual of layer 0 meets layer 1's norm
    for m in spanning:
        first = min(i for i, _ in m)
        assert {module for i, module in m if i == first} == {f"layers.{first}"}, m


def test_the_simulator_gives_the_module_forward(imported, forward, tmp_path):
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    _checked_run(imported(2), tmp_path / "out", forward, "--device", "sim", env=env)


@mpi
@pytest.mark.parametrize("tp", [2, 4])
def test_two_mpi_ranks_give_the_module_forward(imported, forward, tp, tmp_path):
    report = _checked_run(imported(tp), tmp_path / "out", forward, "--ranks", "2")
    assert [r["chips"] for r in report["ranks"]] == [list(range(r, tp, 2)) for r in range(2)]


def test_repeat_interleave_of_the_kv_heads_imports_as_the_same_program(imported, forward, tmp_path):
    recipe = tmp_path / "interleave.py"
    recipe.write_text(f"""import dataclasses
import sys

sys.path.insert(0, {str(RECIPES)!r})
import llama3_debug as base  # noqa: E402

inputs, PLAN = base.inputs, base.PLAN


def model():
    return base.model(dataclasses.replace(base.ARGS, kv_repeat="interleave"))
""")
    out = tmp_path / "program"
    assert main(["import", "torch", str(recipe), "--tp", "2", "--out", str(out)]) == 0
    for name in ("op.facts", "reads.facts", "writes.facts", "shape.facts", "fold.facts", "collective.facts"):
        assert (out / name).read_text() == (imported(2) / name).read_text(), name
    _checked_run(out, tmp_path / "out", forward, "--device", "cpu")


def test_no_data_writes_the_program_a_data_import_writes(imported, tmp_path):
    """--no-data builds the module on meta tensors, where torch picks scaled_dot_product_attention's
    math form; on cpu it picks its flash kernel, whose decomposition lays the output out with two
    more permutes. The full-size figures are taken with --no-data, so both are one program."""
    out = tmp_path / "program"
    assert main(["import", "torch", str(RECIPE), "--tp", "2", "--out", str(out), "--no-data"]) == 0
    names = sorted(p.name for p in imported(2).glob("*.facts"))
    assert {"op.facts", "reads.facts", "writes.facts", "fold.facts", "collective.facts", "placed.facts",
            "shape.facts", "attr.facts", "member.facts"} <= set(names)
    assert names == sorted(p.name for p in out.glob("*.facts"))
    for name in names:
        assert (out / name).read_text() == (imported(2) / name).read_text(), name


def test_kv_heads_fewer_than_chips_are_refused_at_the_style_that_cuts_them(tmp_path):
    """4 key/value heads of 8 features on 8 chips: wk's colwise block is half a head on each
    chip, which the forward's view(bs, seq, -1, head_dim) cannot hold (torch would fail there);
    refused at the first style whose output a view cuts, before the norms' broadcasts."""
    done = tprules("import", "torch", RECIPE, "--tp", "8", "--out", tmp_path / "p")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (f"{RECIPE.relative_to(ROOT)}: import: llama3_debug: ColwiseParallel at layers.0.attention.wk: "
                           "its output's 32 features are 4 groups of 8 (a view at layers.0.attention), which do not "
                           "split over --tp 8 chips\n")
    assert not (tmp_path / "p").exists()
