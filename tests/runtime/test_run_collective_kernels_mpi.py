"""Collective kernels over real MPI ranks (`tprules run --ranks N`): the outputs match, and
`--trace` shows each kernel's compute on a chip's row while its transfer is in flight on
the host's row (runtime/execution/overlap.py)."""

from __future__ import annotations

import json

import pytest
from test_ranks_cli import mpi, tprules
from test_run_collective_kernels import load

H200 = "cuda-lane:h200:Bf16SymmMem"


def overlapping(events: list[dict]) -> dict[tuple[int, str], float]:
    """(pid, group) → microseconds of compute slices while a transfer slice of the same kernel ran."""
    out: dict[tuple[int, str], float] = {}
    computes = [e for e in events if e["cat"] == "kernel" and "pattern" in e["args"]]
    transfers = [e for e in events if e["cat"] == "transfer" and "pattern" in e["args"]]
    for c in computes:
        key = (c["pid"], c["args"]["group"])
        for t in transfers:
            if (t["pid"], t["args"]["group"]) == key:
                both = min(c["ts"] + c["dur"], t["ts"] + t["dur"]) - max(c["ts"], t["ts"])
                out[key] = out.get(key, 0.0) + max(both, 0.0)
    return out


@mpi
def test_async_tp_on_two_ranks_matches_and_its_trace_shows_the_overlap(tmp_path):
    done = tprules("run", "facts/async-tp-mlp-tp2", "--shim", H200, "--ranks", 2, "--format", "json", "--trace",
                   tmp_path / "trace.json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["ok"] is True
    events = [e for e in json.loads((tmp_path / "trace.json").read_text())["traceEvents"] if e["ph"] == "X"]
    kernels = [e for e in events if e["cat"] == "collective" and "hidden_s" in e["args"]]
    assert sorted({e["args"]["kind"] for e in kernels}) == ["all_gather_matmul", "all_reduce_norm",
                                                           "matmul_reduce_scatter"]
    assert len(kernels) == 6 and all(e["args"]["hidden_s"] > 0 for e in kernels)  # three a rank
    hidden = overlapping(events)
    assert len(hidden) == 6 and all(us > 0 for us in hidden.values())


@mpi
@pytest.mark.parametrize("name", ["gather-contracted", "scatter-cols"])
def test_four_ranks_match_the_reference(name, tmp_path):
    _, prog, _ = load(tmp_path, name, chips=4)
    done = tprules("run", prog.directory, "--ranks", 4, "--format", "json", timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["ok"] is True
