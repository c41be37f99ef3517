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
