"""A program folder that describes its own shim (SPEC §2): its description shadows the
library's shim of the same name as a whole, at every entry point.

Each folder under tests/data/own_shim/ is one case (tests/data/own_shim/generate.py shows how
each was made from facts/megatron-mlp-tp2): `program/`, and for the error cases the exact
`expected.err` and `status`; for the others `expected.json`, the verdicts of
`tprules check program --format json`. Cases run from inside their folder.

`own_copy_changed` is the library's cuda-lane:h100:Bf16 copied into the program with three
changes, each seen in one verdict: class `add` runs alone (bias_residual: not_fusible),
max_members is 3 (everything: too_many_members), and matmul reads operand 0 as int8
(gelu_mm2_1: quantized_inside).
"""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import DATA, FACTS, RULES
from helpers import case_dirs, case_ids

from tprules.paths import display_path

CASES = case_dirs(DATA / "own_shim")
ERRORS = [c for c in CASES if (c / "status").exists()]
JUDGED = [c for c in CASES if (c / "expected.json").exists()]
CHANGED = DATA / "own_shim" / "own_copy_changed"
SHOWN = display_path(CHANGED / "program")  # as headers and proofs name the folder
H100 = "cuda-lane:h100:Bf16"


def test_every_case_has_an_expectation():
    assert sorted(ERRORS + JUDGED) == CASES


@pytest.mark.parametrize("case", ERRORS, ids=case_ids(ERRORS))
@pytest.mark.parametrize("command", ["check", "plan", "why", "lint"])
def test_a_bad_description_is_one_line_exit_2(case, command, cli, monkeypatch):
    monkeypatch.chdir(case)
    args = [command, "program"] + (['legal("gelu_0_1")'] if command == "why" else [])
    status, out, err = cli(*args)
    assert (status, out, err) == (int((case / "status").read_text()), "", (case / "expected.err").read_text())


@pytest.mark.parametrize("case", JUDGED, ids=case_ids(JUDGED))
def test_verdicts_come_from_the_programs_description(case, cli, monkeypatch):
    monkeypatch.chdir(case)
    status, out, err = cli("check", "program", "--format", "json")
    assert (status, err) == (0, "")
    assert json.loads(out) == json.loads((case / "expected.json").read_text())


def verdicts(data: dict) -> dict[str, tuple[str, ...]]:
    return {f["fusion"]: tuple(f["reasons"]) for f in data["fusions"]}


def test_each_changed_number_shows_in_one_verdict(cli):
    _, out, _ = cli("check", FACTS / "megatron-mlp-tp2", "--format", "json")
    library = verdicts(json.loads(out))
    _, out, _ = cli("check", CHANGED / "program", "--format", "json")
    own = verdicts(json.loads(out))
    assert library["bias_residual"] == () and own["bias_residual"] == ("not_fusible",)  # the level
    assert "too_many_members" not in library["everything"] and "too_many_members" in own["everything"]  # the limit
    assert library["gelu_mm2_1"] == () and own["gelu_mm2_1"] == ("quantized_inside",)  # the quantized operand
    assert own["mm1_gelu_0"] == library["mm1_gelu_0"] == ()


def test_check_header_and_json_say_where_the_shim_comes_from(cli):
    _, out, _ = cli("check", CHANGED / "program")
    assert out.splitlines()[0].startswith(f"check {SHOWN}   shim {H100} (program)   rules ")
    _, out, _ = cli("check", FACTS / "megatron-mlp-tp2")
    assert f"shim {H100} (library)" in out.splitlines()[0]
    _, out, _ = cli("check", FACTS / "megatron-mlp-tp2", "--format", "json")
    assert json.loads(out)["shim_source"] == "library"
    _, out, _ = cli("check", CHANGED / "program", "--format", "json")
    assert json.loads(out)["shim_source"] == "program"


def test_a_program_shim_is_the_default_when_it_is_the_only_one(cli):
    _, out, _ = cli("check", DATA / "own_shim" / "own_new_shim" / "program", "--format", "json")
    assert (json.loads(out)["shim"], json.loads(out)["shim_source"]) == ("cuda-lane:b200:Fp8", "program")


def test_library_shims_stay_the_librarys_beside_a_program_shim(cli):
    _, out, _ = cli("check", CHANGED / "program", "--shim", "cpu:x86:F32", "--format", "json")
    assert (json.loads(out)["shim"], json.loads(out)["shim_source"]) == ("cpu:x86:F32", "library")


def test_plan_follows_the_programs_numbers(cli):
    status, out, _ = cli("plan", CHANGED / "program", "--format", "json")
    assert status == 0
    data = json.loads(out)
    assert data["shim_source"] == "program"
    groups = [g["members"] for g in data["groups"]]
    assert max(map(len, groups)) <= 3  # max_members 3
    fused = [g for g in groups if len(g) > 1]
    assert not any({"bias", "residual"} & set(g) for g in fused)  # class add runs alone
    assert not any({"gelu_0", "mm2_0"} <= set(g) or {"gelu_1", "mm2_1"} <= set(g) for g in fused)  # int8 operand
    _, library, _ = cli("plan", FACTS / "megatron-mlp-tp2", "--format", "json")
    assert any({"bias", "residual"} <= set(g["members"]) for g in json.loads(library)["groups"])
    _, text, _ = cli("plan", CHANGED / "program")
    assert f"shim {H100} (program)" in text.splitlines()[0]


def test_run_uses_the_programs_shim(cli):
    # own_new_shim's kernels are the example's (compiled once per test session); a program
    # shim with an int8 operand costs minutes of Numba compilation, so its reading is
    # checked on the runtime's program below instead.
    program = DATA / "own_shim" / "own_new_shim" / "program"
    status, out, _ = cli("run", program, "--device", "cpu", "--format", "json")
    data = json.loads(out)
    assert (status, data["ok"], data["shim"], data["shim_source"]) == (0, True, "cuda-lane:b200:Fp8", "program")
    _, text, _ = cli("run", program, "--device", "cpu")
    assert "shim cuda-lane:b200:Fp8 (program)" in text.splitlines()[0]


def test_run_reads_operands_quantized_as_the_programs_shim_says():
    from tprules.program.model import RunProgram
    from tprules.workspace import Workspace

    own = RunProgram.from_workspace(Workspace(CHANGED / "program"))
    library = RunProgram.from_workspace(Workspace(FACTS / "megatron-mlp-tp2"))
    assert own.statement("mm2_1").quantized == ((0, "int8_two_pass"),) and own.shim_source == "program"
    assert library.statement("mm2_1").quantized == () and library.shim_source == "library"


def test_why_proves_from_the_programs_lines(cli):
    status, out, _ = cli("why", CHANGED / "program", 'refused("bias_residual", "not_fusible")')
    assert status == 0
    assert out.splitlines()[0].startswith(f"why {SHOWN}   shim {H100} (program)")
    assert f'supports("{H100}", "add", "alone")  fact {SHOWN}/supports.facts:2' in out
    _, out, _ = cli("why", CHANGED / "program", 'legal("bias_residual")', "--format", "json")
    assert json.loads(out)["shim_source"] == "program"


def test_repl_answers_from_the_programs_description(cli, monkeypatch):
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO('?- supports(S, "add", L).\n?- limit(S, "max_members", N).\n'))
    status, out, _ = cli("repl", CHANGED / "program")
    assert status == 0
    answers = [line.split() for line in out.splitlines() if line.startswith(f'"{H100}"')]
    assert answers == [[f'"{H100}"', '"alone"'], [f'"{H100}"', "3"]]


def test_golden_snapshots_the_programs_verdicts(cli, tmp_path):
    program = tmp_path / "own_copy_changed"
    shutil.copytree(CHANGED / "program", program)
    snapshots = tmp_path / "golden"
    assert cli("golden", "--snapshots", snapshots, "--update", program)[0] == 0
    refused = (snapshots / "own_copy_changed" / H100.replace(":", "_") / "refused.tsv").read_text()
    assert "bias_residual\tnot_fusible\n" in refused and "gelu_mm2_1\tquantized_inside\n" in refused
    assert cli("golden", "--snapshots", snapshots, program)[0] == 0
    with open(program / "limit.facts", "w") as f:  # the program's own limit moves: golden sees it
        f.write(f"{H100}\tmax_members\t16\n")
    status, out, _ = cli("golden", "--snapshots", snapshots, program)
    assert status == 1 and "everything" in out


def test_diff_judges_with_the_programs_shim(cli, tmp_path):
    new = tmp_path / "rules"
    shutil.copytree(RULES, new)
    base = (new / "base.dl").read_text()
    start = base.index('base_refused(F, "not_fusible")')
    end = base.index("\n\n", start)
    (new / "base.dl").write_text(base[:start] + base[end:])
    status, out, _ = cli("diff", "--old", RULES, "--new", new, CHANGED / "program", "--format", "json")
    changed = {c["fusion"] for c in json.loads(out)["changes"]}
    assert status == 1 and "bias_residual" in changed
    assert all(c["shim"] == H100 for c in json.loads(out)["changes"])
    # The library's h100 runs add fused: the same rule edit changes nothing for bias_residual there.
    _, out, _ = cli("diff", "--old", RULES, "--new", new, FACTS / "megatron-mlp-tp2", "--format", "json")
    assert "bias_residual" not in {c["fusion"] for c in json.loads(out)["changes"]}


def test_fact_shim_load_answers_from_the_program_folder():
    from tprules.shim import FactShim, Manifest, Support, TensorGraph, TensorParallelShim

    own = FactShim.load(H100, CHANGED / "program")
    library = FactShim.load(H100)
    assert (own.source, library.source) == ("program", "library")
    assert (own.supports("add"), library.supports("add")) == (Support.ALONE, Support.FUSED)
    g = TensorGraph.load(CHANGED / "program")
    mm = next(op for op in g.ops if op.name == "mm2_1")
    assert str(own.activation(mm, 0, g)) == "int8_two_pass" and library.activation(mm, 0, g) is None
    tp = TensorParallelShim(own, Manifest.load(CHANGED / "program"))
    assert tp.fits(g.fuse("f", ["mm1_0", "gelu_0", "mm2_0", "mm1_1"]), g).reasons[-1] == "too_many_members"
    assert "too_many_members" not in TensorParallelShim(library, Manifest.load(CHANGED / "program")).fits(
        g.fuse("f", ["mm1_0", "gelu_0", "mm2_0", "mm1_1"]), g).reasons


def test_fact_shim_load_reports_a_bad_program_description():
    from tprules.errors import BadInput
    from tprules.shim import FactShim

    with pytest.raises(BadInput, match="does not answer class matmul"):
        FactShim.load(H100, DATA / "own_shim" / "partial_description" / "program")


def test_the_shim_api_is_exported_from_the_package():
    import tprules
    import tprules.shim

    for name in ("TensorParallelShim", "FactShim", "Manifest", "TensorGraph", "Op", "Support", "Fit"):
        assert getattr(tprules, name) is getattr(tprules.shim, name)
        assert name in tprules.__all__ and name in dir(tprules)
    with pytest.raises(AttributeError):
        tprules.NoSuchName  # noqa: B018
