"""The model-scale program generator (benchmarks/generate.py) and the shared Llama layers."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from collections import defaultdict

import pytest
from conftest import FACTS, ROOT


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bench_generate():
    return _load(ROOT / "benchmarks" / "generate.py", "bench_generate")


def _pairs(b) -> set[tuple[str, str]]:
    writer = {t: o for o, t in b.facts["writes"]}
    return {(writer[t], o) for o, _, t in b.facts["reads"] if t in writer}


@pytest.mark.parametrize("size, layers, tp", [("small", 2, 2), ("70b", 80, 8), ("405b", 126, 16)])
def test_sizes_have_the_statements_and_candidates_of_the_issue(bench_generate, size, layers, tp):
    b = bench_generate.build(size)
    assert b.chips == tp
    # 13 statements per chip per layer and 6 on the spine (2 rmsnorms, 2 folds, 2 residuals).
    assert len(b.statements) == layers * (13 * tp + 6)
    members = defaultdict(set)
    for f, o in b.facts["member"]:
        members[f].add(o)
    pairs = _pairs(b)
    assert {tuple(sorted(ms)) for ms in members.values()} == {tuple(sorted(p)) for p in pairs}
    assert len(members) == len(pairs)


def test_small_program_loads_and_is_judged(bench_generate, tmp_path, cli):
    bench_generate.generate("small", tmp_path / "small")
    status, out, err = cli("lint", tmp_path / "small")
    assert (status, err) == (0, "")
    assert "64 statements" in out
    status, out, err = cli("check", tmp_path / "small", "--format", "json")
    assert status == 0 and '"legal": true' in out and '"legal": false' in out


def test_layers_chain_on_the_spine(bench_generate):
    b = bench_generate.build("small")
    reads = {(o, t) for o, _, t in b.facts["reads"]}
    assert ("L0_rms1", "x") in reads and ("L1_rms1", "L0_out") in reads and ("L1_res1", "L0_out") in reads
    assert ("L1_res2", "out") in {(o, t) for o, t in b.facts["writes"]}


def test_example_generator_output_is_unchanged(tmp_path):
    """facts/generate.py shares the Llama layer with the benchmarks; its examples stay as committed."""
    examples = _load(FACTS / "generate.py", "facts_generate")
    for name, make in examples.EXAMPLES.items():
        make().write(tmp_path / name)
        committed = sorted(p.name for p in (FACTS / name).glob("*.facts"))
        assert sorted(p.name for p in (tmp_path / name).glob("*.facts")) == committed, name
        for file in committed:
            assert (tmp_path / name / file).read_text() == (FACTS / name / file).read_text(), f"{name}/{file}"


def test_benchmark_runs_every_tool_and_they_agree(tmp_path):
    """`benchmarks/bench.py` on the small size: every command runs, every engine gives check's verdicts."""
    pytest.importorskip("clingo")
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench.py"), "--sizes", "small", "-r", "1",
                           "--pydatalog-sizes", "small", "--work", str(tmp_path), "--json", str(tmp_path / "f.json")],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    figures = json.loads((tmp_path / "f.json").read_text())
    ran = {row["tool"] for row in figures["rows"] if row["wall_s"] is not None}
    assert {"load", "check", "check-floor", "plan", "why-legal", "why-refused", "clingo", "pydatalog"} <= ran
    agree = figures["sizes"]["small"]["agree"]
    if shutil.which("souffle"):  # the interpreter, and the same rules compiled by `souffle -o`
        assert agree.pop("souffle") is True and agree.pop("souffle-compiled") is True
    assert agree == {"clingo": True, "pydatalog": True}


def test_bench_times_a_command_with_a_blocking_wait_and_kills_it_at_the_timeout(tmp_path, monkeypatch):
    """`Popen.wait(timeout)` polls with sleeps of up to 50 ms, which would round a short
    command's wall time up to the next poll: bench.py waits blocking, with a timer to kill."""
    spec = importlib.util.spec_from_file_location("bench_measure", ROOT / "benchmarks" / "bench.py")
    bench = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_measure", bench)  # (its dataclasses look their module up)
    spec.loader.exec_module(bench)
    waits = []
    real_wait = subprocess.Popen.wait

    def wait(self, timeout=None):
        waits.append(timeout)
        return real_wait(self, timeout)

    monkeypatch.setattr(subprocess.Popen, "wait", wait)
    done = bench.measure(["true"], tmp_path / "out", timeout=60)
    assert done.status == 0 and waits == [None]
    killed = bench.measure(["sleep", "30"], tmp_path / "out2", timeout=0.2)
    assert killed.status == -9 and killed.wall_s < 30
