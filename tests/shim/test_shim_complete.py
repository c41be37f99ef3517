"""`tprules shim complete`: a program whose own shim answers SPEC §4's seventeen classes
hears about every missing class in one run, gets the missing answers appended, and then
checks."""

from __future__ import annotations

import json

import pytest

from tprules import ops

SPEC = [c.name for c in ops.CLASSES.values() if c.spec]
# the classes beyond SPEC §4: 18 for issue 20's models, 3 for issue 21's MoE, 6 for issue 22's ATen ops,
# 2 for MoE routing's gather and scatter, 2 for the grouped experts (issue 36)
BEYOND = 31


@pytest.fixture
def spec_shim(program_copy):
    """megatron-mlp-tp2 with its own shim `mychip`, written against SPEC §4 alone."""
    folder = program_copy("megatron-mlp-tp2")
    with open(folder / "shim.facts", "a") as f:
        f.write("mychip\n")
    (folder / "supports.facts").write_text("".join(f"mychip\t{c}\tfused\n" for c in SPEC))
    return folder


def test_every_missing_class_is_named_in_one_run(cli, spec_shim):
    status, out, err = cli("check", spec_shim, "--shim", "mychip")
    missing = [c.name for c in ops.CLASSES.values() if not c.spec]
    assert (status, out) == (2, "")
    assert len(SPEC) == 17 and len(missing) == BEYOND
    assert err.splitlines() == [
        f"{spec_shim}/shim.facts:3: ill-formed: shim mychip does not answer class {c} of the class registry: "
        f"add a line 'mychip<TAB>{c}<TAB>fused|alone|none' to supports.facts" for c in missing]


def test_complete_adds_the_missing_answers_and_then_the_program_checks(cli, spec_shim):
    status, out, err = cli("shim", "complete", spec_shim, "--level", "alone")
    added = [c.name for c in ops.CLASSES.values() if not c.spec]
    assert (status, err) == (0, "")
    assert out.splitlines() == [f"{spec_shim}: added {BEYOND} answers:"] + [f"  mychip\t{c}\talone" for c in added]
    lines = (spec_shim / "supports.facts").read_text().splitlines()
    assert lines == [f"mychip\t{c}\tfused" for c in SPEC] + [f"mychip\t{c}\talone" for c in added]
    status, out, err = cli("check", spec_shim, "--shim", "mychip")
    assert (status, err) == (0, "") and "shim mychip (program)" in out


def test_complete_on_a_shim_that_misses_nothing_changes_nothing(cli, spec_shim):
    assert cli("shim", "complete", spec_shim, "--level", "none")[0] == 0
    before = (spec_shim / "supports.facts").read_text()
    status, out, err = cli("shim", "complete", spec_shim, "--level", "fused")
    assert (status, err) == (0, "")
    assert out == f"{spec_shim}: shim mychip answers every class of the class registry; nothing added\n"
    assert (spec_shim / "supports.facts").read_text() == before


def test_an_added_level_is_the_one_asked(cli, spec_shim):
    cli("shim", "complete", spec_shim, "--level", "none")
    status, out, _ = cli("check", spec_shim, "--shim", "mychip", "--format", "json")
    assert status == 0
    assert "\tnone" in (spec_shim / "supports.facts").read_text()


@pytest.mark.parametrize("make, args, message", [
    (lambda tmp: tmp / "nowhere", ["--level", "fused"], "no such program folder"),
    (None, ["--level", "fused"], "has no shim of its own"),
])
def test_bad_input_is_one_line_exit_2(cli, program_copy, tmp_path, make, args, message):
    folder = make(tmp_path) if make is not None else program_copy("megatron-mlp-tp2")
    before = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else None
    status, out, err = cli("shim", "complete", folder, *args)
    assert (status, out) == (2, "")
    assert len(err.splitlines()) == 1 and message in err
    assert (sorted(p.name for p in folder.iterdir()) if folder.is_dir() else None) == before


def test_a_missing_trailing_newline_is_kept_apart(cli, spec_shim):
    path = spec_shim / "supports.facts"
    path.write_text(path.read_text().rstrip("\n"))
    assert cli("shim", "complete", spec_shim, "--level", "fused")[0] == 0
    assert len(path.read_text().splitlines()) == 17 + BEYOND
    assert cli("check", spec_shim, "--shim", "mychip")[0] == 0


def test_a_bad_level_is_one_line_exit_2(spec_shim, capsys):
    from tprules.cli import main

    before = (spec_shim / "supports.facts").read_text()
    with pytest.raises(SystemExit) as done:  # argparse's own error, as the command line shows it
        main(["shim", "complete", str(spec_shim), "--level", "sometimes"])
    err = capsys.readouterr().err
    assert done.value.code == 2 and len(err.splitlines()) == 1 and "invalid choice: 'sometimes'" in err
    assert (spec_shim / "supports.facts").read_text() == before


def test_complete_refuses_a_level_it_does_not_know(spec_shim):
    from tprules.errors import UsageError
    from tprules.shim.complete import complete

    with pytest.raises(UsageError, match="--level sometimes"):
        complete(spec_shim, "sometimes")


def test_a_shim_described_only_by_its_collective_kernels_is_completed(cli, program_copy):
    """A program that declares collective kernels for its own shim (collective_kernel.facts,
    SPEC §2) describes that shim: complete finds it there and answers every class, and then
    a candidate that is exactly the declared pattern checks legal."""
    folder = program_copy("sp-mlp-tp2")
    (folder / "shim.facts").write_text("symm\n")
    (folder / "collective_kernel.facts").write_text("symm\tall_gather_matmul\n")
    with open(folder / "member.facts", "a") as f:
        f.write("ag\tallgather\nag\tmm1_0\nag\tmm1_1\n")
    status, out, err = cli("check", folder)
    assert (status, out) == (2, "") and "shim symm is described nowhere" in err
    status, out, err = cli("shim", "complete", folder, "--level", "fused")
    assert (status, err) == (0, "") and out.splitlines()[0] == f"{folder}: added {17 + BEYOND} answers:"
    status, out, err = cli("check", folder, "--format", "json")
    assert (status, err) == (0, "")
    verdicts = {v["fusion"]: v["reasons"] for v in json.loads(out)["fusions"]}
    assert verdicts["ag"] == [] and verdicts["mm2_scatter"] == ["collective_fold"]


def test_no_shim_of_its_own_names_every_file_that_could_describe_one(cli, program_copy):
    status, out, err = cli("shim", "complete", program_copy("megatron-mlp-tp2"), "--level", "fused")
    assert status == 2 and "collective_kernel.facts" in err and "views.facts" in err
