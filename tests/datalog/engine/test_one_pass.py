"""A one-pass evaluation (`check`) drops the key index of a relation once no later stratum
reads it; the verdicts are the same, and an engine that evaluates again keeps them."""

from __future__ import annotations

from tprules.datalog.engine import fast
from tprules.workspace import Workspace

PROGRAM = "facts/llama-layer-tp4"


def test_one_pass_drops_each_index_after_its_last_reader(monkeypatch):
    ws = Workspace(PROGRAM, one_pass=True)
    seen = []  # before each stratum: the stratum, and the relations whose indexes are still held
    run = fast.ColumnarEngine._run_stratum

    def recording(self, model, stratum, given):
        seen.append((stratum, {key[0] for key in self.indexes}))
        run(self, model, stratum, given)

    monkeypatch.setattr(fast.ColumnarEngine, "_run_stratum", recording)
    verdicts = list(ws.verdict_table())
    for k, (_, held) in enumerate(seen):
        still_read = set().union(*(fast._read_by(stratum) for stratum, _ in seen[k:]))
        assert held <= still_read, held - still_read
    assert any(held for _, held in seen)  # strata did build and keep some for later ones
    assert ws.engine.indexes == {}

    again = Workspace(PROGRAM)
    assert list(again.verdict_table()) == verdicts
    assert again.engine.indexes  # kept for the evaluations that follow (the planner's rounds)
