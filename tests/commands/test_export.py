"""`tprules export DIR OUT`: what Soufflé needs to run the same rules on the same program."""

from __future__ import annotations

import shlex
import subprocess

import pytest
from conftest import FACTS, RULES
from helpers import needs_souffle, read_tsv, run_souffle, tprules_verdicts


def test_export_writes_rules_every_input_and_the_computed_ones(cli, tmp_path):
    out = tmp_path / "export"
    status, stdout, err = cli("export", FACTS / "relocated-head-tp2", out)
    assert (status, err) == (0, "")
    text = (out / "rules.dl").read_text()
    for path in RULES.glob("*.dl"):
        assert path.read_text() in text
    names = {p.stem for p in (out / "facts").glob("*.facts")}
    assert {"op", "reads", "writes", "member", "section", "relocated", "supports", "target", "topo"} <= names
    assert (out / "facts" / "target.facts").read_text() == "cuda-lane:h100:Bf16\n"
    topo = [line.split("\t") for line in (out / "facts" / "topo.facts").read_text().splitlines()]
    assert sorted(int(n) for _, n in topo) == list(range(len(topo)))  # one position per statement
    assert (out / "out").is_dir()


def test_export_names_the_shim_asked_for(cli, tmp_path):
    out = tmp_path / "export"
    assert cli("export", FACTS / "megatron-mlp-tp2", out, "--shim", "cpu:x86:F32")[0] == 0
    assert (out / "facts" / "target.facts").read_text() == "cpu:x86:F32\n"


@needs_souffle
def test_the_printed_souffle_command_runs(cli, tmp_path):
    example = FACTS / "megatron-mlp-tp2"
    status, stdout, _ = cli("export", example, tmp_path / "export")
    command = stdout.split("run: ", 1)[1].strip()
    assert command.startswith("souffle ")
    subprocess.run(shlex.split(command), check=True, capture_output=True, timeout=300)
    legal, _ = tprules_verdicts(example)
    assert read_tsv(tmp_path / "export" / "out" / "legal.csv") == legal


def test_export_of_a_folder_that_includes_runs_on_eval(cli, tmp_path):
    """The family rules (components, #include, #define) export as Soufflé reads them: the
    included file beside rules.dl; tprules eval runs the export like Soufflé would."""
    from conftest import DATA

    out = tmp_path / "ex"
    status, _, err = cli("export", FACTS / "int8-mlp-tp2", out, "--rules", DATA / "family_rules")
    assert status == 0, err
    assert (out / "decls.dlh").is_file()
    status, printed, err = cli("eval", out / "rules.dl", "-F", out / "facts", "-D", "-")
    assert status == 0, err
    assert "square_mm2_0\tquantized_inside" in printed


def test_export_writes_a_subsumptive_clause_back_as_souffle_reads_it(cli, tmp_path):
    """A rule folder with a subsumptive clause (issue 27) exports it in Soufflé's syntax;
    tprules eval runs the export and deletes the dominated tuples."""
    import shutil

    rules = tmp_path / "rules"
    shutil.copytree(RULES, rules)
    clause = "hop(x, d1) <= hop(x, d2) :- d2 < d1."
    (rules / "zz_hops.dl").write_text(".decl hop(x: number, d: number)\n.output hop\n"
                                      f"hop(1, 5). hop(1, 2). hop(2, 7).\n{clause}\n")
    out = tmp_path / "ex"
    status, _, err = cli("export", FACTS / "megatron-mlp-tp2", out, "--rules", rules)
    assert status == 0, err
    assert clause in (out / "rules.dl").read_text()
    status, printed, err = cli("eval", out / "rules.dl", "-F", out / "facts", "-D", "-")
    assert status == 0, err
    assert "hop\nx\td\n===============\n1\t2\n2\t7\n===============" in printed


@needs_souffle
@pytest.mark.parametrize("program", ["megatron-mlp-tp2", "int8-mlp-tp2", "llama-layer-tp4"])
def test_souffle_runs_the_family_rules_export_as_tprules_does(cli, tmp_path, program):
    """Components, `#include`, `#define`, records and a subsumptive clause (issue 27), as
    `tprules export` writes them: Soufflé reads the export and writes every output relation
    (verdicts, records, the subsumptive relation) exactly as `tprules eval` of it does."""
    from conftest import DATA

    out = tmp_path / "ex"
    status, _, err = cli("export", FACTS / program, out, "--rules", DATA / "family_rules")
    assert status == 0, err
    run_souffle(out / "rules.dl", out / "facts", out / "souffle")
    status, _, err = cli("eval", out / "rules.dl", "-F", out / "facts", "-D", out / "tprules")
    assert status == 0, err
    names = sorted(p.name for p in (out / "souffle").iterdir())
    assert {"legal.csv", "refused.csv", "hop.csv", "steps.csv"} <= set(names)
    assert names == sorted(p.name for p in (out / "tprules").iterdir())
    for name in names:
        assert read_tsv(out / "souffle" / name) == read_tsv(out / "tprules" / name), name
    assert read_tsv(out / "souffle" / "legal.csv") == tprules_verdicts(FACTS / program)[0]
