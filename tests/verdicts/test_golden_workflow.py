"""The golden workflow of `tprules golden`: missing and stale snapshots fail with what to do,
`--update` accepts (printing what changed), a mismatch shows each changed tuple explained."""

from __future__ import annotations

import shutil

import pytest
from conftest import FACTS, ROOT

from tprules.golden import corpus
from tprules.golden.corpus import meant_for, shim_folder

GOLDEN = ROOT / "tests" / "golden"
H100, CPU = "cuda-lane:h100:Bf16", "cpu:x86:F32"


@pytest.fixture
def snap(tmp_path):
    return tmp_path / "golden"


@pytest.fixture
def accepted(cli, snap):
    """megatron-mlp-tp2's snapshots written by `--update` into a private folder."""
    program = FACTS / "megatron-mlp-tp2"
    status, out, err = cli("golden", "--update", "--snapshots", snap, program)
    assert (status, err) == (0, "")
    return program, snap / program.name


def test_the_shims_a_program_is_meant_for():
    assert meant_for(FACTS / "int8-mlp-tp2") == ["cuda-lane:rtx3060:TwoPassInt8"]  # its own shim.facts
    assert meant_for(FACTS / "megatron-mlp-tp4") == [H100]  # none: the default shim
    assert meant_for(FACTS / "llama-layer-tp4") == [H100, CPU]  # several, in file order
    assert shim_folder("cuda-lane:rtx3060:TwoPassInt8") == "cuda-lane_rtx3060_TwoPassInt8"


def test_a_missing_snapshot_fails_and_says_how_to_write_it(cli, snap):
    program = FACTS / "megatron-mlp-tp2"
    status, out, err = cli("golden", "--snapshots", snap, program)
    assert (status, err) == (1, "")
    assert f"MISSING  megatron-mlp-tp2 on {H100}: no snapshot at {snap}/megatron-mlp-tp2/cuda-lane_h100_Bf16" in out
    assert f"to accept the outputs of the rules now: tprules golden --update --snapshots {snap} {program}" in out
    assert "0 match, 0 differ, 2 missing, 0 stale" in out


def test_update_writes_what_check_then_accepts(cli, accepted):
    program, folder = accepted
    for shim in (H100, CPU):
        for rel in ("legal", "refused", "groups"):  # the same as the project's own snapshots
            assert (folder / shim_folder(shim) / f"{rel}.tsv").read_text() == \
                (GOLDEN / program.name / shim_folder(shim) / f"{rel}.tsv").read_text()
    status, out, _ = cli("golden", "--snapshots", folder.parent, program)
    assert status == 0 and out.startswith(f"ok       megatron-mlp-tp2 on {H100}\nok       megatron-mlp-tp2 on {CPU}\n")


def test_a_mismatch_shows_each_changed_tuple_explained_and_update_accepts_it(cli, accepted):
    program, folder = accepted
    refused = folder / shim_folder(H100) / "refused.tsv"
    lines = refused.read_text().splitlines()
    refused.write_text("".join(f"{line}\n" for line in lines if line != "gelu_0_1\tspans_chips"))
    status, out, _ = cli("golden", "--snapshots", folder.parent, program)
    assert status == 1
    assert f"FAIL     megatron-mlp-tp2 on {H100}: refused +1 ({folder}/{shim_folder(H100)})" in out
    assert "  refusals changed: spans_chips +1\n" in out
    assert "  gelu_0_1: no verdict → refused spans_chips; members gelu_0 (chip:0), gelu_1 (chip:1)\n" in out
    assert ('    + refused("gelu_0_1", "spans_chips")  '
            'rules/tp.dl:15 with A = gelu_0 (chip:0), B = gelu_1 (chip:1)') in out
    status, out, _ = cli("golden", "--update", "--snapshots", folder.parent, program)
    assert status == 0
    assert f"updated  megatron-mlp-tp2 on {H100}: refused +1" in out and "1 updated, 0 new, 1 unchanged" in out
    assert refused.read_text().splitlines() == lines


def test_a_file_out_of_order_fails_and_update_sorts_it(cli, accepted):
    program, folder = accepted
    legal = folder / shim_folder(CPU) / "legal.tsv"
    lines = legal.read_text().splitlines()
    legal.write_text("\n".join(reversed(lines)))
    status, out, _ = cli("golden", "--snapshots", folder.parent, program)
    assert status == 1 and "  legal.tsv is missing or not sorted one tuple a line" in out
    assert cli("golden", "--update", "--snapshots", folder.parent, program)[0] == 0
    assert legal.read_text() == "".join(f"{line}\n" for line in lines)


def test_a_snapshot_of_a_shim_no_longer_meant_for_is_stale(cli, accepted):
    program, folder = accepted
    (folder / "old_shim").mkdir()
    (folder / "old_shim" / "legal.tsv").write_text("x\n")
    status, out, _ = cli("golden", "--snapshots", folder.parent, program)
    assert status == 1
    assert f"STALE    {folder}/old_shim: not a shim megatron-mlp-tp2 is meant for: it is meant for {H100}, {CPU}" in out
    status, out, _ = cli("golden", "--update", "--snapshots", folder.parent, program)
    assert status == 0 and f"removed  {folder}/old_shim" in out and not (folder / "old_shim").exists()


def test_a_program_that_no_longer_exists_is_stale(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    snap = tmp_path / "golden"
    shutil.copytree(GOLDEN, snap)
    (snap / "retired-program" / shim_folder(H100)).mkdir(parents=True)
    status, out, _ = cli("golden", "--snapshots", snap)
    assert status == 1
    assert f"STALE    {snap}/retired-program: snapshots of a program that no longer exists: no program " \
           "facts/retired-program" in out
    assert f"to accept the outputs of the rules now: tprules golden --update --snapshots {snap}\n" in out
    status, out, _ = cli("golden", "--update", "--snapshots", snap)
    assert status == 0 and f"removed  {snap}/retired-program" in out
    assert not (snap / "retired-program").exists() and (snap / "README.md").exists()
    assert cli("golden", "--snapshots", snap)[0] == 0


def test_an_edited_rule_names_where_it_now_fails(cli, rules_copy):
    tp = rules_copy / "tp.dl"
    tp.write_text(tp.read_text().replace("on_spine(B), !kernel", "on_spine(B), is_fold(B), !kernel"))
    status, out, _ = cli("golden", "--rules", rules_copy, FACTS / "megatron-mlp-tp2")
    assert status == 1
    assert "  refusals changed: chip_and_spine -2\n" in out
    assert (f'    - refused("mm2_bias", "chip_and_spine")  {rules_copy}/tp.dl:19 fails at is_fold("bias")') in out


def test_the_plan_groups_are_pinned(cli, rules_copy):
    """A refusal gone lets the planner merge across it: the groups change shows."""
    tp = rules_copy / "tp.dl"
    tp.write_text(tp.read_text().replace('refused(F, "collective_fold") :- member(F, O), is_fold(O), !kernel(F, _).', ""))
    status, out, _ = cli("golden", "--rules", rules_copy, FACTS / "int8-mlp-tp2")
    assert status == 1
    assert "  plan groups (place, members):\n    - chip:0  mm2_0\n    - collective  allreduce\n" in out


def test_update_writes_nothing_when_a_program_does_not_load(cli, accepted, program_copy):
    program, folder = accepted
    refused = folder / shim_folder(H100) / "refused.tsv"
    refused.write_text("")
    broken = program_copy("int8-mlp-tp2")
    (broken / "chips.facts").write_text("two\n")
    status, out, err = cli("golden", "--update", "--snapshots", folder.parent, program, broken)
    assert (status, out) == (2, "") and "chips.facts:1" in err
    assert refused.read_text() == ""


@pytest.mark.parametrize("examples", ["no program in it", "no such folder"])
def test_no_example_programs_is_one_line_of_error_not_a_pass(cli, tmp_path, monkeypatch, examples):
    """`tprules golden` with no DIR checks the example programs: finding none is bad input
    (exit 2), never every snapshot matching, and `--update` removes no snapshot as stale."""
    folder = tmp_path / "facts"
    if examples == "no program in it":
        (folder / "shims").mkdir(parents=True)  # the shim library alone is no program
    monkeypatch.setattr(corpus, "EXAMPLES_DIR", folder)
    snap = tmp_path / "golden"
    shutil.copytree(GOLDEN, snap)
    for update in ([], ["--update"]):
        status, out, err = cli("golden", "--snapshots", snap, *update)
        assert (status, out) == (2, "")
        (line,) = err.splitlines()
        assert line.endswith(f"no example programs under {folder}: nothing to check "
                             "(name the program folders: tprules golden DIR...)")
    assert sorted(p.name for p in snap.iterdir()) == sorted(p.name for p in GOLDEN.iterdir())
