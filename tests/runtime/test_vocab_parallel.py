"""A vocabulary-parallel embedding (transformers' `embedding_rowwise`): chip k holds rows
[k V/N, (k+1) V/N) of the table, looks up with `offset` k V/N (zeros for ids outside its
rows), and a fold sums the chips' lookups."""

from __future__ import annotations

import numpy as np
import pytest

from tprules.program.builder import ProgramBuilder
from tprules.runtime import execute
from tprules.runtime.values.semantics import apply
from tprules.workspace import Workspace


def test_an_offset_lookup_gives_zero_rows_outside_the_slice():
    table = np.arange(12, dtype=np.float32).reshape(4, 3)  # rows 4..7 of a vocabulary of 8
    ids = np.array([[0, 4, 7, 5]])
    got = apply("embedding", {"offset": "4"}, [table, ids], {}, "f32")
    want = np.stack([np.zeros(3), table[0], table[3], table[1]])[None]
    assert np.array_equal(got, want)
    assert np.array_equal(apply("embedding", {}, [table, ids % 4], {}, "f32"), table[ids % 4])


def vocab_parallel(tmp_path, tp: int = 2, vocab: int = 8, hidden: int = 6):
    rng = np.random.default_rng(0)
    whole = rng.standard_normal((vocab, hidden)).astype(np.float32)
    ids = rng.integers(0, vocab, size=(2, 5))
    b = ProgramBuilder(chips=tp)
    b.tensor("ids", [2, 5], "i64", spine=True, data=ids)
    rows = vocab // tp
    parts = []
    for k in range(tp):
        b.tensor(f"table_{k}", [rows, hidden], chip=k, data=whole[k * rows:(k + 1) * rows])
        parts.append(b.stmt(f"embed_{k}", "embedding", [f"table_{k}", "ids"], b.tensor(f"e_{k}", [2, 5, hidden], chip=k),
                            offset=k * rows))
    e = b.fold("allreduce", parts, b.tensor("e", [2, 5, hidden], spine=True), "embed")
    b.stmt("act", "relu", [e], b.tensor("out", [2, 5, hidden], spine=True))
    return b.write(tmp_path / "p"), np.maximum(whole[ids], 0)


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_a_vocabulary_parallel_embedding_runs_and_matches_the_whole_lookup(tmp_path, device):
    folder, want = vocab_parallel(tmp_path)
    report = execute(Workspace(folder), device=device)
    assert report.ok
    assert np.allclose(report.values["out"], want, atol=1e-6)
