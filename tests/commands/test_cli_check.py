"""`tprules check` on the README's example: the text table and the JSON of SPEC §5."""

from __future__ import annotations

import json

import pytest
from conftest import DATA, ROOT
from helpers import read_tsv

from tprules.workspace import ENGINES

EXAMPLE = "facts/megatron-mlp-tp2"


def test_check_text_output(cli, monkeypatch):
    monkeypatch.chdir(ROOT)  # paths in the header are shown relative to the working folder
    status, out, err = cli("check", EXAMPLE)
    assert (status, err) == (0, "")
    assert out == (DATA / "cli" / "check-megatron-mlp-tp2.txt").read_text()


SNAPSHOT = ROOT / "tests/golden/megatron-mlp-tp2/cuda-lane_h100_Bf16"  # its default shim


def test_check_text_agrees_with_golden(cli, monkeypatch):
    monkeypatch.chdir(ROOT)
    _, out, _ = cli("check", EXAMPLE)
    rows = {line.split()[0]: line.split()[1] for line in out.splitlines()[3:-2]}
    legal = read_tsv(SNAPSHOT / "legal.tsv")
    refused = {line.split("\t")[0] for line in read_tsv(SNAPSHOT / "refused.tsv")}
    assert rows == {**{f: "legal" for f in legal}, **{f: "refused" for f in refused}}


def test_check_json_has_the_shape_of_spec_5(cli, monkeypatch):
    monkeypatch.chdir(ROOT)
    status, out, err = cli("check", EXAMPLE, "--format", "json")
    assert (status, err) == (0, "")
    data = json.loads(out)
    assert set(data) == {"shim", "shim_source", "fusions"}
    assert (data["shim"], data["shim_source"]) == ("cuda-lane:h100:Bf16", "library")
    ids = [f["fusion"] for f in data["fusions"]]
    assert ids == sorted(ids) and len(ids) == len(set(ids))
    for fusion in data["fusions"]:
        assert {"fusion", "legal", "reasons"} <= set(fusion)  # extra keys are allowed
        assert isinstance(fusion["legal"], bool) and fusion["reasons"] == sorted(fusion["reasons"])
        assert fusion["legal"] == (fusion["reasons"] == [])
    got_legal = sorted(f["fusion"] for f in data["fusions"] if f["legal"])
    got_refused = sorted(f"{f['fusion']}\t{r}" for f in data["fusions"] for r in f["reasons"])
    assert got_legal == read_tsv(SNAPSHOT / "legal.tsv")
    assert got_refused == read_tsv(SNAPSHOT / "refused.tsv")


@pytest.mark.parametrize("engine", ENGINES)
def test_check_json_is_the_same_on_every_engine(cli, monkeypatch, engine):
    monkeypatch.chdir(ROOT)
    fast = json.loads(cli("check", EXAMPLE, "--format", "json")[1])
    other = json.loads(cli("check", EXAMPLE, "--format", "json", "--engine", engine)[1])
    assert other == fast


def test_check_with_another_shim(cli, monkeypatch):
    monkeypatch.chdir(ROOT)
    status, out, err = cli("check", EXAMPLE, "--format", "json", "--shim", "cuda-lane:rtx3060:TwoPassInt8")
    assert (status, err) == (0, "")
    data = json.loads(out)
    assert data["shim"] == "cuda-lane:rtx3060:TwoPassInt8"
    by_id = {f["fusion"]: f["reasons"] for f in data["fusions"]}
    # rtx3060 allows one matmul per fusion (h100: two) and reads matmul operand 0 quantized:
    # mm2_0 reads gelu_0's output, so this legal pair on h100 is refused on rtx3060.
    assert by_id["gelu_mm2_1"] == ["quantized_inside"]
    assert "too_many_matmuls" in by_id["mm1_mm2_0"]


def test_check_of_a_missing_folder_is_bad_input(cli, tmp_path):
    status, out, err = cli("check", tmp_path / "nowhere")
    assert (status, out) == (2, "")
    assert err.count("\n") == 1 and "nowhere" in err


def test_rules_that_judge_a_candidate_neither_way_are_a_rule_error(cli, rules_copy):
    tp = rules_copy / "tp.dl"
    tp.write_text(tp.read_text().replace("legal(F) :- candidate(F), !refused(F, _).",
                                         'legal(F) :- candidate(F), !refused(F, _), F != "bias_residual".'))
    status, out, err = cli("check", ROOT / EXAMPLE, "--rules", rules_copy)
    assert (status, out) == (2, "")
    assert err.endswith("member.facts:5: rule error: the rules derive neither legal nor refused for candidate "
                        "bias_residual; exactly one must hold (SPEC §3)\n")


@pytest.mark.parametrize("size", [1, 3])
def test_check_json_is_written_chunk_by_chunk_as_one_document(capsys, size):
    """`check --format json` writes its verdicts `size` at a time: the same text whatever the
    size, one verdict a line."""
    from tprules.commands.common import emit_json_lines
    from tprules.workspace import Workspace

    table = Workspace(ROOT / EXAMPLE).verdict_table()
    emit_json_lines({"shim": "s"}, "fusions", table.json_chunks(size=size))
    out = capsys.readouterr().out
    emit_json_lines({"shim": "s"}, "fusions", [table.json_lines()])
    assert out == capsys.readouterr().out
    assert len(table) > 3 and json.loads(out) == {"shim": "s", "fusions": [json.loads(v) for v in table.json_lines()]}
    assert [line.strip().rstrip(",") for line in out.splitlines()[3:-2]] == table.json_lines()
    emit_json_lines({"shim": "s"}, "fusions", table.part(0, 0).json_chunks(size=size))
    assert capsys.readouterr().out == '{\n  "shim": "s",\n  "fusions": []\n}\n'
