"""A cold run's compiles (docs/runtime.md, "Compiling: moves, workers and the cache"):
statements that only move memory run with no compiled kernel and give the same outputs bit
for bit; distinct sources compile in worker processes with the same results; a corrupt
cache entry is dropped and rebuilt with one warning; `--jobs`, `tprules cache` and
`tprules compile --device cpu`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from plans import spine_statement as _s
from plans import write_programs

from tprules.codegen import cache, moves
from tprules.runtime import execute
from tprules.workspace import Workspace

ROOT = Path(__file__).resolve().parents[2]


def views(b):
    """A contiguous slice, a reshape, an expand read as a stride, a permute, a cat and a
    strided slice of integers: each a statement that only moves memory."""
    x = b.tensor("x", [4, 6, 8], spine=True)
    rows = _s(b, "rows", "slice", [x], [2, 6, 8], axis=0, start=1, end=3)
    flat = _s(b, "flat", "reshape", [rows], [12, 8])
    w = _s(b, "w", "reshape", [b.tensor("v", [8], spine=True)], [1, 8])
    _s(b, "wide", "expand", [w], [12, 8])
    _s(b, "turned", "permute", [_s(b, "cube", "reshape", [flat], [2, 6, 8])], [8, 2, 6], dims="2,0,1")
    _s(b, "both", "cat", [flat, _s(b, "flat2", "reshape", [_s(b, "r2", "slice", [x], [1, 6, 8], axis=0, start=3, end=4)],
                                   [6, 8])], [18, 8], axis=0)
    ids = b.tensor("ids", [2, 6], "i64", spine=True,
                   data=np.arange(12, dtype=np.int64).reshape(2, 6) + (1 << 40))
    _s(b, "every_other", "slice", [ids], [2, 3], "i64", axis=1, start=1, end=6, step=2)


def sums(b):
    """Exact float32 arithmetic: an n-ary sum (left to right), a residual add, a broadcast
    sub, mul, div and neg, an add_scalar and a where on an i8 condition, with infinities and
    NaNs among the values."""
    x = b.tensor("x", [4, 8], spine=True, data=np.array(
        [[1e30, -1e30, np.inf, np.nan, 0.1, 0.2, 0.3, -0.0]] * 4, np.float32) * np.arange(1, 5, dtype=np.float32)[:, None])
    y = b.tensor("y", [4, 8], spine=True)
    z = b.tensor("z", [8], spine=True)
    total = _s(b, "total", "sum", [x, y, x, y, y], [4, 8])
    keep = b.tensor("keep", [4, 1], "i8", spine=True, data=np.array([[1], [0], [3], [0]], np.int8))
    _s(b, "picked", "where", [keep, _s(b, "shifted", "add_scalar", [x], [4, 8], value="0.1"), y], [4, 8])
    _s(b, "res", "add", [_s(b, "d", "div", [_s(b, "m", "mul", [total, z], [4, 8]), y], [4, 8]),
                         _s(b, "n", "neg", [_s(b, "s", "sub", [x, z], [4, 8])], [4, 8])], [4, 8])


def mixed(b):
    """A move beside computed statements (what it reads and what reads it are kernels)."""
    x = b.tensor("x", [4, 8], spine=True)
    h = _s(b, "h", "relu", [x], [4, 8])
    s = _s(b, "s", "slice", [h], [2, 8], axis=0, start=2, end=4)
    _s(b, "out", "exp", [_s(b, "r", "reshape", [s], [16])], [16])


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    return write_programs({"views": views, "sums": sums, "mixed": mixed}, tmp_path_factory)


@pytest.mark.parametrize("name, unfused", [("views", True), ("views", False), ("sums", True), ("sums", False),
                                           ("mixed", True)])
def test_moves_need_no_kernel_and_give_the_same_outputs(programs, name, unfused, monkeypatch):
    moved = execute(Workspace(programs[name]), device="cpu", baseline=unfused, jobs=1)
    assert moved.ok and moved.uncompiled > 0
    monkeypatch.setattr(moves, "mover", lambda kernel: None)  # every kernel compiled, as before
    kernels = execute(Workspace(programs[name]), device="cpu", baseline=unfused, jobs=1)
    assert kernels.ok and kernels.uncompiled == 0 and kernels.compiled > moved.compiled
    assert sorted(moved.values) == sorted(kernels.values)
    for t, value in moved.values.items():
        assert value.dtype == kernels.values[t].dtype and value.tobytes() == kernels.values[t].tobytes(), t


def test_every_view_statement_is_a_move(programs):
    report = execute(Workspace(programs["views"]), device="cpu", baseline=True, jobs=1)
    assert report.uncompiled == report.kernels and report.compiled == 0
    assert report.values["every_other"].tolist() == [[(1 << 40) + v for v in (1, 3, 5)],
                                                     [(1 << 40) + v for v in (7, 9, 11)]]


def test_show_kernels_says_a_move_is_no_kernel(cli, programs):
    status, out, err = cli("run", programs["mixed"], "--unfused", "--show", "kernels", "--jobs", "1")
    assert status == 0
    assert "# no compiled kernel: numpy runs it (codegen/moves.py) [pointwise]" in err
    assert "p0[...] = slice(p1, [2, 8], [0, 2, 1])" in err
    assert "2 run by numpy with no compile" in out


@pytest.mark.parametrize("jobs", ["0", "-1", "two", "1.5"])
@pytest.mark.parametrize("command", ["run", "compile"])
def test_bad_jobs_is_one_line_and_exit_2(cli, command, jobs):
    extra = ["--device", "cpu"] if command == "compile" else []
    status, out, err = cli(command, ROOT / "facts" / "megatron-mlp-tp2", *extra, "--jobs", jobs)
    assert status == 2 and out == ""
    assert err.strip().splitlines() == [
        f"usage: --jobs takes a count of compiling processes of at least 1, not {jobs!r}"]


def test_distinct_sources_compile_in_two_workers_with_equal_results(tmp_path, monkeypatch):
    """Two worker processes and this one (--jobs 3) fill an empty cache; the run loads from
    it, and its outputs are those of a run compiled in-process alone."""
    monkeypatch.setenv("TPRULES_CACHE_DIR", str(tmp_path / "pooled"))
    pooled = execute(Workspace(ROOT / "facts" / "megatron-mlp-tp2"), device="cpu", baseline=True, jobs=3)
    from tprules.runtime.devices import pool

    assert pool._pool and pool._pool[0][0] == 2  # the workers were used
    built = list((tmp_path / "pooled" / "kernels" / "cpu" / "__pycache__").glob("*.nbc"))
    assert len(built) == pooled.compiled
    monkeypatch.setenv("TPRULES_CACHE_DIR", str(tmp_path / "alone"))
    alone = execute(Workspace(ROOT / "facts" / "megatron-mlp-tp2"), device="cpu", baseline=True, jobs=1)
    assert pooled.ok and alone.ok and pooled.compiled == alone.compiled
    for t, value in pooled.values.items():
        assert value.tobytes() == alone.values[t].tobytes()
    assert not list((tmp_path / "pooled").rglob("*.tmp*"))  # every file landed whole


def test_a_failing_compile_in_a_worker_is_one_line(monkeypatch):
    """A worker's failure comes back as its message, not a traceback."""
    seconds, error = cache.compile_source("def kernel(p0):\n    return undefined_name\n"
                                          "from numba import njit\nkernel = njit(kernel)\n", "cpu",
                                          (("<f4", 1),))
    assert error is not None and "\n" not in error and error.startswith("TypingError")


@pytest.mark.parametrize("damage", ["index", "machine code"])
def test_a_corrupt_cache_entry_is_dropped_and_rebuilt(tmp_path, damage):
    """Garbage in a Numba index file, or 100 random bytes in a .nbc file: one warning line,
    and the run goes on (it used to fail with an internal ValueError / UnpicklingError)."""
    env = {**os.environ, "TPRULES_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "tprules", "run", str(ROOT / "facts" / "megatron-mlp-tp2"), "--jobs", "1",
               "--format", "json"]
    first = subprocess.run(command, env=env, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    pycache = tmp_path / "kernels" / "cpu" / "__pycache__"
    if damage == "index":
        victim = sorted(pycache.glob("*.nbi"))[0]
        victim.write_bytes(b"garbage\n")
    else:
        victim = sorted(pycache.glob("*.nbc"))[0]
        victim.write_bytes(np.random.default_rng(0).bytes(100))
    second = subprocess.run(command, env=env, capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    lines = second.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tprules: warning: dropped a corrupt kernel cache entry (")
    assert json.loads(second.stdout)["outputs"] == json.loads(first.stdout)["outputs"]
    third = subprocess.run(command, env=env, capture_output=True, text=True)  # rebuilt: no warning again
    assert third.returncode == 0 and third.stderr == ""


def test_two_processes_compiling_the_same_program_at_once_both_work(tmp_path):
    env = {**os.environ, "TPRULES_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "tprules", "run", str(ROOT / "facts" / "megatron-mlp-tp2"), "--jobs", "1",
               "--unfused"]
    both = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(2)]
    for p in both:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0 and err == "", err
        assert "the output matches the reference" in out or "outputs match the reference" in out


def test_the_cache_command_says_where_how_large_and_how_to_clear(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("TPRULES_CACHE_DIR", str(tmp_path / "c"))
    status, out, _ = cli("cache")
    assert status == 0
    assert out.splitlines()[0] == f"cache {tmp_path / 'c'}: 0 B in 0 files (not made yet)"
    assert "clear it with `tprules cache --clear`" in out
    execute(Workspace(ROOT / "facts" / "megatron-mlp-tp2"), device="cpu", baseline=True, jobs=1)
    status, out, _ = cli("cache")
    lines = out.splitlines()
    assert status == 0 and lines[0].startswith(f"cache {tmp_path / 'c'}: ") and "(not made yet)" not in lines[0]
    assert any(line.split()[0] == "kernels/cpu" and "Numba's machine code" in line for line in lines[1:])
    status, out, _ = cli("cache", "--format", "json")
    data = json.loads(out)
    assert data["location"] == str(tmp_path / "c") and data["bytes"] > 0
    status, out, _ = cli("cache", "--clear")
    assert status == 0 and out.startswith(f"cleared {tmp_path / 'c'} (") and not (tmp_path / "c").exists()


def test_compile_for_the_cpu_warms_the_cache_slowest_first(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("TPRULES_CACHE_DIR", str(tmp_path))
    status, out, _ = cli("compile", ROOT / "facts" / "megatron-mlp-tp2", "--device", "cpu", "--unfused",
                         "--format", "json", "--jobs", "1")
    data = json.loads(out)
    assert status == 0 and data["distinct"] == len(data["sources"]) > 0
    times = [s["seconds"] for s in data["sources"]]
    assert times == sorted(times, reverse=True) and {s["compiled_in"] for s in data["sources"]} == {"here"}
    status, out, _ = cli("compile", ROOT / "facts" / "megatron-mlp-tp2", "--device", "cpu", "--unfused", "--top", "2")
    lines = out.splitlines()
    assert status == 0 and lines[0].startswith("compile facts/megatron-mlp-tp2 on cpu")
    assert lines[3].split()[:1] == ["seconds"] and lines[4].split()[2] == "cache"
    assert lines[-1].endswith("a run of this plan loads them from there")
    report = execute(Workspace(ROOT / "facts" / "megatron-mlp-tp2"), device="cpu", baseline=True, jobs=1)
    assert report.compile_s < 60 and report.ok


def test_compile_for_the_cpu_refuses_out(cli):
    status, out, err = cli("compile", ROOT / "facts" / "megatron-mlp-tp2", "--device", "cpu", "--out", "/tmp/x")
    assert status == 2 and err.strip() == "usage: --out keeps CUDA builds: it takes --device cuda"


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_kernel_that_does_not_compile_is_one_line_naming_its_group(cli, tmp_path, monkeypatch, jobs):
    """In-process or first in a worker (spawned: it renders nothing, it is handed the source),
    the error is one line naming the group and its members, never a traceback."""
    from tprules.codegen.cpu import function

    monkeypatch.setenv("TPRULES_CACHE_DIR", str(tmp_path))
    real = function.render_params

    def broken(kernel, *args, **kwargs):
        source, scratch = real(kernel, *args, **kwargs)
        return (source.replace("    return\n", "    return undefined_name\n") if "mm1_0" in kernel.members
                else source), scratch

    monkeypatch.setattr(function, "render_params", broken)
    status, out, err = cli("run", ROOT / "facts" / "megatron-mlp-tp2", "--unfused", "--jobs", jobs)
    assert status == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "compile error: the kernel of group mm1_0 [mm1_0] does not compile: TypingError: "), err


def test_a_worker_killed_mid_compile_leaves_no_half_written_entry(tmp_path, monkeypatch):
    """A source that kills its worker while it is loaded: the pool breaks, its sources are left
    to the caller (not in the answer), and the cache holds only whole files."""
    from tprules.runtime.devices import pool

    monkeypatch.setenv("TPRULES_CACHE_DIR", str(tmp_path))
    killer = "import os\nos._exit(9)\n"
    good = ("from numba import njit\n\n@njit(cache=True)\ndef kernel(p0):\n    p0[0] = 1.0\n")
    other = good.replace("1.0", "2.0")
    # two workers start on the first two at once; this process takes the last (never the killer)
    found = pool.compile_all([(killer, "cpu", (("<f4", 1),)), (good, "cpu", (("<f4", 1),)),
                              (other, "cpu", (("<f4", 1),))], 3)
    assert 0 not in found
    assert not pool._pool  # the broken pool was let go: the next plan starts a fresh one
    files = [f for f in tmp_path.rglob("*") if f.is_file()]
    assert not [f for f in files if f.name.startswith(".k_")]  # a stopped worker's temporary source: swept
    files = [f for f in files if ".tmp" not in f.name]  # (Numba's own temporary names are never read)
    for f in files:
        if f.suffix == ".py":  # every source that landed is whole
            assert f.read_text() in (killer, good, other)
    assert not cache.machine_code(killer, "cpu")
    for f in files:
        if f.suffix == ".nbi":  # whatever landed is whole: Numba reads it back
            assert cache.compiled(good, "cpu", cache.signature_of((("<f4", 1),))) is not None


def test_compile_top_takes_a_count(cli):
    status, out, err = cli("compile", ROOT / "facts" / "megatron-mlp-tp2", "--device", "cpu", "--top", "-1")
    assert status == 2 and out == "" and err.strip() == "usage: --top takes a count of at least 0"


def test_the_cache_clears_in_json_too(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("TPRULES_CACHE_DIR", str(tmp_path / "c"))
    (tmp_path / "c" / "kernels" / "cpu").mkdir(parents=True)
    (tmp_path / "c" / "kernels" / "cpu" / "k_x.py").write_text("x = 1\n")
    status, out, _ = cli("cache", "--clear", "--format", "json")
    assert status == 0 and json.loads(out) == {"location": str(tmp_path / "c"), "cleared": True, "bytes": 6}
    assert not (tmp_path / "c").exists()
