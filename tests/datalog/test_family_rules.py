"""A rule folder written the way Soufflé users write one (issue 27): the SPEC §2
declarations in one file that schema.dl `#include`s, and the base chip's refusals as a
component per shim family (`.init cuda = QuantizingBackend`, `.init cpu = Backend`, with
inheritance and a `#define` that writes three rules). It gives the project rules' verdicts,
and every command names the original file and line, and the instance."""

from __future__ import annotations

import pytest
from conftest import DATA, FACTS

from tprules.explain.render import to_text
from tprules.golden.corpus import SNAPSHOTS_DIR as GOLDEN
from tprules.golden.corpus import example_programs, meant_for
from tprules.repl.session import Session

RULES = DATA / "family_rules"


@pytest.mark.parametrize("program, shim", [("megatron-mlp-tp2", None), ("int8-mlp-tp2", None),
                                           ("int8-mlp-tp2", "cpu:x86:F32"), ("llama-layer-tp4", None),
                                           ("async-tp-mlp-tp2", "cuda-lane:h200:Bf16SymmMem")])
def test_the_family_rules_give_the_project_rules_verdicts(cli, program, shim):
    extra = ["--shim", shim] if shim else []
    status, ours, err = cli("check", FACTS / program, "--rules", RULES, "--format", "json", *extra)
    assert status == 0, err
    assert ours == cli("check", FACTS / program, "--format", "json", *extra)[1]


def test_why_names_the_original_lines_and_the_instance(cli):
    status, out, err = cli("why", FACTS / "int8-mlp-tp2", 'refused("square_mm2_0", "quantized_inside")',
                           "--rules", RULES, "--depth", "3")
    assert status == 0, err
    assert "base_refused(F, R) :- cuda.refused(F, R)." in out
    assert "family_rules/base.dl:60" in out
    assert ("cuda.refused(\"square_mm2_0\", \"quantized_inside\")  tests/data/family_rules/base.dl:47" in out
            or "family_rules/base.dl:47" in out)
    assert "// instance cuda of component QuantizingBackend (.init at " in out
    assert "family_rules/base.dl:52:7)" in out


def test_a_rule_written_by_a_macro_names_the_line_of_its_use(cli):
    status, out, err = cli("why", FACTS / "int8-mlp-tp2", 'refused("unary_chain_9", "too_many_members")',
                           "--rules", RULES, "--depth", "3")
    assert status == 0, err
    assert "family_rules/base.dl:39" in out  # the FUSION_LIMIT(...) line, not the #define's


def test_golden_holds_with_the_family_rules(cli):
    status, out, err = cli("golden", "--rules", RULES)
    assert status == 0, out + err
    # every snapshot on disk, each program on each shim it is meant for, was compared and matched
    meant = {f"{p.name} on {shim}" for p in example_programs() for shim in meant_for(p)}
    on_disk = [s for p in GOLDEN.iterdir() if p.is_dir() for s in p.iterdir() if s.is_dir()]
    matched = {line.split(None, 1)[1] for line in out.splitlines() if line.startswith("ok ")}
    assert matched == meant and len(meant) == len(on_disk) > 0
    assert out.endswith(f"{len(on_disk)} snapshots: {len(on_disk)} match, 0 differ, 0 missing, 0 stale\n")


def test_the_repl_asks_an_instance_relation():
    session = Session(FACTS / "int8-mlp-tp2", RULES)
    answer = to_text(session.handle('?- cuda.refused(F, "quantized_inside").'), width=1000)
    assert '"square_mm2_0"' in answer and "1 answer" in answer
    rules = session.handle(":rules cuda.refused")
    text = rules if isinstance(rules, str) else to_text(rules, width=1000)
    assert "tests/data/family_rules/base.dl:47  cuda.refused(F, \"quantized_inside\") :-" in text
    assert "instance cuda of component QuantizingBackend" in text


def test_an_include_of_a_missing_file_is_one_line(cli, tmp_path):
    for path in RULES.iterdir():
        (tmp_path / path.name).write_text(path.read_text())
    (tmp_path / "decls.dlh").unlink()
    status, out, err = cli("check", FACTS / "megatron-mlp-tp2", "--rules", tmp_path)
    assert status == 2 and out == ""
    (line,) = err.splitlines()
    assert line.endswith('schema.dl:2:1: syntax error: #include "decls.dlh": no such file in ' + str(tmp_path))


def test_an_include_folder_given_with_dash_i(cli, tmp_path):
    rules, shared = tmp_path / "rules", tmp_path / "shared"
    rules.mkdir()
    shared.mkdir()
    for path in RULES.iterdir():
        (shared if path.suffix == ".dlh" else rules).joinpath(path.name).write_text(path.read_text())
    assert cli("check", FACTS / "megatron-mlp-tp2", "--rules", rules)[0] == 2
    status, out, err = cli("check", FACTS / "megatron-mlp-tp2", "--rules", rules, "-I", shared)
    assert status == 0, err
