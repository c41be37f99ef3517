"""benchmarks/import_coverage.py: a TP-2 or EP-2 program without a collective is a failure
(`unshaped`), never `ok`; each architecture's folders are deleted once it is tried (`--keep`
keeps those of one that did not match)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tprules.frontends.drivers.hf import ImportReport

from .test_import_plan import _coverage


def _replicated(source, tp, out, **_) -> ImportReport:
    """An import that split nothing: every tensor on the spine, no fold."""
    out = Path(out)
    out.mkdir(parents=True)
    (out / "spine.facts").write_text("model.layers.0.mlp.experts.gate_up_proj\n")
    return ImportReport(out=out, architecture="MixtralForCausalLM", tp=tp, statements=1, candidates=0, tensors=1,
                        folds=0, folded=[])


@pytest.mark.parametrize(("ep", "kind"), [(False, "TP"), (True, "EP")])
def test_a_program_without_a_collective_is_a_failure_not_ok(monkeypatch, tmp_path, ep, kind):
    coverage = _coverage()
    monkeypatch.setattr(coverage, "DECODE", {})  # the prefill's import, whatever an earlier test left
    monkeypatch.setattr(coverage, "tiny_model", lambda *a, **k: None)
    monkeypatch.setattr(coverage, "plan_sharded", lambda folder: {})
    monkeypatch.setattr("tprules.frontends.drivers.hf.import_hf", _replicated)
    row = coverage.try_seed("mixtral", tmp_path, 2, "none", 0, None, ep)
    assert row["result"] == "unshaped"
    assert row["detail"] == f"no collective at {kind} 2: the plan split nothing"
    monkeypatch.setattr(coverage, "try_seed", lambda *a: dict(row))  # the row try_one gives is that failure
    assert coverage.try_one("mixtral", tmp_path, 2, "none", ep)["result"] == "unshaped"


def _tried(work: Path, results: dict[str, str]):
    """`isolated` as if each architecture wrote its model and program folders, with `results`'s result."""
    def isolated(model_type, work_, tp, device, memory_gib, ep=False):
        for sub in (f"models/{model_type}-w0", f"programs/{model_type}-w0-ep{tp}-ep{tp}"):
            (work / sub).mkdir(parents=True)
            (work / sub / "x.npy").write_bytes(b"0")
        return {"model_type": model_type, "result": results[model_type], "detail": "no collective at EP 2: x"}
    return isolated


@pytest.mark.parametrize("keep", [False, True])
def test_each_architectures_folders_are_deleted_once_tried(monkeypatch, tmp_path, capsys, keep):
    coverage = _coverage()
    (tmp_path / "models" / "llama4_text-w0").mkdir(parents=True)  # another type that starts alike: not touched
    monkeypatch.setattr(coverage, "isolated", _tried(tmp_path, {"llama": "ok", "mixtral": "unshaped"}))
    assert coverage.main(["--ep", "--only", "llama,mixtral", "--work", str(tmp_path)] + (["--keep"] if keep else [])) == 0
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.glob("*/*"))
    kept = ["models/mixtral-w0", "programs/mixtral-w0-ep2-ep2"] if keep else []
    assert left == sorted(["models/llama4_text-w0", *kept])
    assert "2 architectures at EP 2: ok 1, unshaped 1" in capsys.readouterr().out


TIED = ("import: HYV4ForCausalLM: statement getitem_18 (topk_indices) of model.layers.0.self_attn.indexer: "
        "aten.topk.default item 1: its operand can tie at the top-4's boundary among elements that relu (relu) of "
        "model.layers.0.self_attn.indexer makes equal for a whole range of inputs; torch's top-k breaks ties ...")


@pytest.mark.parametrize(("at8", "result", "summary"), [
    ({"result": "refused", "detail": TIED}, "ok", "seq 8: tied (refused); seq 3: ok 2.0e-07"),
    ({"result": "MISMATCH", "detail": "import: X: the imported program differs from torch on a short prompt then token 0 "
      "repeated (...); first at statement getitem_1 (topk_indices) of m.indexer: aten.topk.default item 1 (its operand "
      "ties at the top-2's boundary; ...)"}, "ok", "seq 8: tied (refused); seq 3: ok 2.0e-07"),
    ({"result": "MISMATCH", "statements": 9, "reference_rel_err": 0.02}, "MISMATCH", "seq 8: MISMATCH 2.0e-02"),
    ({"result": "refused", "detail": "import: X: aten.foo at m: no registry class"}, "refused", "seq 8: refused"),
])
def test_an_indexer_variant_is_refused_naming_a_tied_top_k_or_matches_nothing_in_between(monkeypatch, tmp_path, at8,
                                                                                         result, summary):
    """Issue 51: the indexer's top-k below the traced length, at 8 tokens and at a prompt shorter
    than the top-k: refused in one line naming a tied top-k, or matching torch; else the row fails."""
    coverage = _coverage()
    ok = {"result": "ok", "statements": 9, "reference_rel_err": 2e-7}
    monkeypatch.setattr(coverage, "try_seed", lambda *a, seq, **k: dict(at8 if seq == 8 else ok))
    row = coverage.with_indexer({"model_type": "hy_v4", "result": "ok"}, "hy_v4", tmp_path, 2, "none",
                                {"index_topk": 4}, 3)
    assert row["result"] == result and row["indexer"] == summary
