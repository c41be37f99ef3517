"""`tprules run --ranks N` and `mpiexec -n N tprules run --mpi` as users start them: real
processes, the same outputs as one process, and faults that end the run with one line."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from plans import FACTS, example

from tprules.program.builder import ProgramBuilder
from tprules.runtime import Program, execute
from tprules.workspace import Workspace

ROOT = FACTS.parent
SMALL = "megatron-mlp-tp2"

mpi = pytest.mark.skipif(not (Path(sys.executable).parent / "mpiexec").exists() and shutil.which("mpiexec") is None,
                         reason="needs MPI: pip install -e '.[mpi]'")


def tprules(*args, env=None, timeout=180):
    return subprocess.run([sys.executable, "-m", "tprules", *map(str, args)], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=env)


def mpiexec() -> str:
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else shutil.which("mpiexec")


def assert_same_as_one_process(name: str, saved: Path) -> None:
    ws, prog = example(name)
    single = execute(ws, prog=prog)
    for t, want in single.values.items():
        got = np.load(saved / f"{t}.npy")
        assert float(np.max(np.abs(got - want))) <= 1e-6 * max(float(np.max(np.abs(want))), 1e-30), (name, t)


# Every example on 1, 2 and 4 ranks is test_ranks.py's (thread ranks); through MPI, a few
# that cover its paths: quantized reads, one rank holding four chips, the Llama layer on
# four ranks, a tensor sent from one rank to another, the simulator under a user's mpiexec.
@mpi
@pytest.mark.parametrize("name, ranks", [("int8-mlp-tp2", 2), ("megatron-mlp-tp4", 1)])
def test_ranks_give_the_one_process_outputs(name, ranks, tmp_path):
    done = tprules("run", FACTS / name, "--ranks", ranks, "--format", "json", "--save", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    chips = example(name)[1].chips
    assert report["ok"] and [r["chips"] for r in report["ranks"]] == [list(range(r, chips, ranks))
                                                                        for r in range(ranks)]
    pids = {r["pid"] for r in report["ranks"]}
    assert len(pids) == ranks and os.getpid() not in pids  # real processes, not this one
    assert all(r["allreduces"] == 1 for r in report["ranks"])
    assert_same_as_one_process(name, tmp_path / "out")


@mpi
def test_an_all_gather_on_two_ranks_is_an_allgatherv(tmp_path):
    done = tprules("run", FACTS / "gather-mlp-tp2", "--ranks", 2, "--format", "json", "--save", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] and [(r["allreduces"], r["allgathers"], r["allgather_bytes"]) for r in report["ranks"]] \
        == [(0, 1, 8 * 16 * 4)] * 2
    assert_same_as_one_process("gather-mlp-tp2", tmp_path / "out")


def sp_mlp(tp: int, folder: Path) -> Path:
    """facts/generate.py's sequence-parallel MLP at `tp` chips, written to `folder`."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("facts_generate", FACTS / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.sp_mlp(tp).write(folder)


@mpi
@pytest.mark.parametrize("tp", [2, 4])
def test_a_reduce_scatter_on_two_ranks_is_an_mpi_reduce_scatter(tp, tmp_path):
    program = FACTS / "sp-mlp-tp2" if tp == 2 else sp_mlp(tp, tmp_path / "sp")
    done = tprules("run", program, "--ranks", 2, "--format", "json", "--trace", tmp_path / "trace.json",
                   "--show", "kernels")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    block = 8 // tp * 16 * 4  # chip k's block of the 8x16 float32 sum
    assert report["ok"] and [(r["allreduces"], r["reducescatters"], r["reducescatter_bytes"]) for r in report["ranks"]] \
        == [(0, 1, len(r["chips"]) * block) for r in report["ranks"]]
    trace = json.loads((tmp_path / "trace.json").read_text())
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] == "collective"
              and e["args"]["kind"] == "reduce_scatter"]
    assert sorted(e["pid"] for e in slices) == [0, 1] and all(e["args"]["bytes"] == tp // 2 * block for e in slices)
    assert "reduce-scatter [scatter] on collective" in done.stderr and "the world's reduce-scatter (MPI)" in done.stderr


@mpi
def test_llama_layer_on_four_ranks_prints_a_row_per_rank(tmp_path):
    done = tprules("run", FACTS / "llama-layer-tp4", "--ranks", 4, "--save", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "4 ranks (" in lines[0]
    rows = [line.split() for line in lines if line.split()[:1] in (["0"], ["1"], ["2"], ["3"]) and len(line.split()) > 8]
    assert [row[0] for row in rows] == ["0", "1", "2", "3"] and [row[3] for row in rows] == ["0", "1", "2", "3"]
    assert len({row[1] for row in rows}) == 4  # four pids
    assert all(row[7] == "2" for row in rows)  # the layer's two all-reduces, on every rank
    assert "2 all-reduces" in lines[-1] and lines[-1].endswith("the output matches the reference")
    assert_same_as_one_process("llama-layer-tp4", tmp_path / "out")


@mpi
def test_an_i64_output_under_mpi_is_the_one_process_output(tmp_path):
    b = ProgramBuilder(chips=2)
    x = b.tensor("x", [4, 4], spine=True, data=np.arange(16, dtype=np.float32).reshape(4, 4) * 3.5 - 20)
    for c in range(2):
        b.stmt(f"cast{c}", "cast", [x], b.tensor(f"ids{c}", [4, 4], dtype="i64", chip=c))
    folder = b.write(tmp_path / "p")
    done = tprules("run", folder, "--ranks", 2, "--format", "json", "--save", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    ws = Workspace(folder)
    single = execute(ws, prog=Program.from_workspace(ws))
    for t in ("ids0", "ids1"):
        got = np.load(tmp_path / "out" / f"{t}.npy")
        assert got.dtype == single.values[t].dtype == np.int64, t
        np.testing.assert_array_equal(got, single.values[t])


@mpi
def test_a_tensor_moves_between_ranks(tmp_path):
    # a relocated section computes a spine tensor on chip 1 that a spine statement reads on chip 0
    b = ProgramBuilder(chips=2)
    x = b.tensor("x", [4, 4], spine=True)
    parts = [b.stmt(f"r{c}", "relu", [x], b.tensor(f"p{c}", [4, 4], chip=c)) for c in range(2)]
    b.fold("ar", parts, b.tensor("y", [4, 4], spine=True), "c")
    b.stmt("head", "exp", ["y"], b.tensor("h", [4, 4], spine=True))
    b.section("tail", ["head"], relocated_to=1)
    b.stmt("out", "neg", ["h"], b.tensor("o", [4, 4], spine=True))
    folder = b.write(tmp_path / "p")
    done = tprules("run", folder, "--ranks", 2, "--format", "json", "--save", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert [r["messages"] for r in json.loads(done.stdout)["ranks"]] == [1, 1]
    ws = Workspace(folder)
    single = execute(ws, prog=Program.from_workspace(ws))
    np.testing.assert_allclose(np.load(tmp_path / "out" / "o.npy"), single.values["o"], rtol=1e-6)


@mpi
def test_under_a_users_own_mpiexec_on_the_simulator(tmp_path):
    done = subprocess.run([mpiexec(), "-n", "2", sys.executable, "-m", "tprules", "run", FACTS / SMALL, "--mpi",
                           "--device", "sim", "--format", "json", "--save", tmp_path / "out"], cwd=ROOT,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)  # rank 0 alone prints
    assert report["ok"] and report["device"].startswith("sim") and len({r["pid"] for r in report["ranks"]}) == 2
    assert_same_as_one_process(SMALL, tmp_path / "out")


@mpi
def test_more_ranks_than_chips_under_mpiexec_is_one_line_from_rank_0():
    done = subprocess.run([mpiexec(), "-n", "3", sys.executable, "-m", "tprules", "run", FACTS / SMALL, "--mpi"],
                          cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "refused: 3 ranks for the 2 chips" in done.stderr


def test_more_ranks_than_chips_is_refused_before_any_rank_starts(cli, monkeypatch):
    monkeypatch.setattr(subprocess, "Popen", _no_process)
    status, out, err = cli("run", FACTS / SMALL, "--ranks", 3)
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("usage: refused: 3 ranks for the 2 chips of ")
    assert err.endswith("; at most one rank per chip\n")


def test_bad_input_is_found_before_any_rank_starts(cli, monkeypatch, program_copy):
    monkeypatch.setattr(subprocess, "Popen", _no_process)
    folder = program_copy(SMALL)
    (folder / "data").mkdir()
    np.save(folder / "data" / "w1_1.npy", np.zeros((3,), np.float32))
    status, out, err = cli("run", folder, "--ranks", 2)
    assert status == 2 and out == "" and err.count("\n") == 1
    assert "data/w1_1.npy" in err and "has shape [3]" in err


@pytest.mark.parametrize("mode", (["--ranks", "2"], ["--mpi"]))
def test_missing_mpi_says_what_to_install(cli, monkeypatch, mode):
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # import mpi4py fails, as when it is not installed
    monkeypatch.setattr(subprocess, "Popen", _no_process)
    status, out, err = cli("run", FACTS / SMALL, *mode)
    assert status == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("mpi: MPI is not installed") and "pip install -e '.[mpi]'" in err


@mpi
@pytest.mark.parametrize("mode", (["--ranks", "2"], ["--mpi"]))
def test_an_mpi_library_that_cannot_load_says_what_to_install(mode):
    done = tprules("run", FACTS / SMALL, *mode, env=dict(os.environ, MPI4PY_LIBMPI="/nowhere/libmpi.so"))
    assert done.returncode == 2 and done.stdout == "" and done.stderr.count("\n") == 1
    assert done.stderr.startswith("mpi: mpi4py cannot load an MPI library") and "pip install -e '.[mpi]'" in done.stderr


def _no_process(*args, **kwargs):
    raise AssertionError(f"started a process: {args}")


# -- faults: a rank dies, fails, or stops answering ------------------------------------------


class Launched:
    """`tprules run ... --ranks N` in the background, its job folder in a private TMPDIR."""

    def __init__(self, tmp_path: Path, *args):
        self.tmp = tmp_path / "tmp"
        self.tmp.mkdir()
        env = dict(os.environ, TMPDIR=str(self.tmp))
        self.proc = subprocess.Popen([sys.executable, "-m", "tprules", "run", *map(str, args)], cwd=ROOT, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True)

    def job(self, deadline=120) -> Path:
        return self._poll(lambda: next(iter(self.tmp.glob("tprules-ranks-*/job.pickle")), None), deadline).parent

    def record(self, rank: int, state: str, deadline=120) -> dict:
        def ready():
            for path in self.tmp.glob(f"tprules-ranks-*/rank-{rank}.json"):
                try:
                    record = json.loads(path.read_text())
                except ValueError:
                    return None
                return record if record["state"] == state else None
        return self._poll(ready, deadline)

    def _poll(self, found, deadline):
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            value = found()
            if value is not None:
                return value
            assert self.proc.poll() is None, self.proc.communicate()
            time.sleep(0.05)
        raise AssertionError("timed out")

    def finish(self, timeout=30):
        out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, out, err

    def close(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


@pytest.fixture
def launched(tmp_path):
    runs = []

    def start(*args):
        runs.append(Launched(tmp_path, *args))
        return runs[-1]

    yield start
    for run in runs:
        run.close()


@mpi
def test_a_killed_rank_ends_the_run_with_one_line(launched):
    run = launched(FACTS / SMALL, "--ranks", 2, "--repeat", 1_000_000)
    victim = run.record(1, "running")
    os.kill(victim["pid"], signal.SIGKILL)
    killed = time.monotonic()
    status, out, err = run.finish()
    assert time.monotonic() - killed < 15
    assert status == 3 and out == ""
    assert err == f"rank 1 (chip 1) was killed by signal 9 (SIGKILL); pid {victim['pid']} on {victim['host']}\n"


@mpi
def test_a_rank_that_stops_answering_times_out_the_others(launched):
    run = launched(FACTS / SMALL, "--ranks", 2, "--repeat", 1_000_000, "--timeout", 3)
    run.record(0, "running")  # both ranks are past compiling, in the runs' all-reduces
    victim = run.record(1, "running")
    os.kill(victim["pid"], signal.SIGSTOP)
    status, out, err = run.finish()
    assert status == 3 and out == ""
    assert err.count("\n") == 1 and err.startswith("rank 0 (chip 0) failed: waited 3 s for ")
    assert "another rank stopped answering" in err


@mpi
def test_a_rank_that_fails_late_names_itself(launched, program_copy):
    folder = program_copy(SMALL)
    (folder / "data").mkdir()
    weight = folder / "data" / "w1_1.npy"
    np.save(weight, np.zeros(example(SMALL)[1].tensors["w1_1"].shape, np.float32))
    run = launched(folder, "--ranks", 2)
    run.job()  # the launcher has checked the inputs; no rank has read them yet
    weight.write_bytes(b"not an array")
    status, out, err = run.finish()
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("rank 1 (chip 1) failed: ") and "data/w1_1.npy" in err


@pytest.mark.parametrize("args, message", [
    (["--ranks", "0"], "--ranks takes a count of at least 1"),
    (["--ranks", "2", "--timeout", "0"], "--timeout takes a positive number of seconds"),
    (["--ranks", "2", "--mpi"], "argument --mpi: not allowed with argument --ranks"),
])
def test_bad_rank_options_are_one_line(capsys, monkeypatch, args, message):
    from tprules.cli import main

    monkeypatch.setattr(subprocess, "Popen", _no_process)
    try:
        status = main(["run", str(FACTS / SMALL), *args])
    except SystemExit as exit:  # argparse's own errors
        status = exit.code
    out, err = capsys.readouterr()
    assert status == 2 and out == "" and err.count("\n") == 1 and message in err


# -- every option of `run` means under --ranks what it means in one process ---------------


def test_every_run_option_is_the_launchers_or_handed_to_the_ranks():
    import argparse

    from tprules.cli import build_parser
    from tprules.commands.run import BY_LAUNCHER, TO_RANKS

    sub = next(a for a in build_parser("run")._actions if isinstance(a, argparse._SubParsersAction))
    options = {a.dest for a in sub.choices["run"]._actions} - {"help"}
    assert options <= set(BY_LAUNCHER) | set(TO_RANKS), "an option of run that --ranks would ignore"
    assert set(TO_RANKS) <= options and set(BY_LAUNCHER) <= options


@mpi
def test_the_ranks_are_started_with_the_run_options(cli, monkeypatch, tmp_path):
    from tprules.runtime.distributed import launch

    started = []
    monkeypatch.setattr(launch, "_Watch", lambda command, *a, **k: started.append(command) or _Done())
    status, _, err = cli("run", FACTS / SMALL, "--ranks", 2, "--matmul", "own", "--repeat", 3, "--show",
                         "timing,kernels", "--format", "json", "--save", tmp_path / "out", "--trace", tmp_path / "t.json")
    assert status == 0, err
    (command,) = started
    given = command[command.index("--mpi"):]
    pairs = dict(zip(given[3::2], given[4::2]))  # after --mpi --job FOLDER
    assert pairs == {"--timeout": "600", "--device": "cpu", "--matmul": "own", "--repeat": "3", "--format": "json",
                     "--save": str(tmp_path / "out"), "--trace": str((tmp_path / "t.json").resolve()),
                     "--show": "kernels,timing"}


class _Done:
    def wait(self):
        return 0


def _kernel_sources(stderr: str) -> dict[str, str]:
    """`--show kernels`: group → its source."""
    out, group = {}, None
    for line in stderr.splitlines(keepends=True):
        if line.startswith("# --- group "):
            group = line.split()[3].rstrip(":")
            out[group] = ""
        elif group is not None and not line.startswith("[timing]"):
            out[group] += line
    return out


def _timing(stderr: str) -> list[list[str]]:
    return [line.split()[1:] for line in stderr.splitlines() if line.startswith("[timing]")]


@mpi
def test_matmul_and_timing_on_two_ranks_mean_what_they_mean_in_one_process(tmp_path):
    args = (FACTS / SMALL, "--matmul", "own", "--show", "kernels,timing", "--format", "json")
    one, ranks = tprules("run", *args), tprules("run", *args, "--ranks", 2)
    assert one.returncode == ranks.returncode == 0, ranks.stderr
    single, ranked = json.loads(one.stdout), json.loads(ranks.stdout)
    assert ranked["matmul"] == single["matmul"] and single["matmul"]["kind"] == "loops"
    assert ranked["device"].endswith("; matmul: own loops)") and ranked["groups"] == single["groups"]
    # rank 0's kernels are one process's kernels of --matmul own
    alone, on_ranks = _kernel_sources(one.stderr), _kernel_sources(ranks.stderr)
    assert on_ranks and all(on_ranks[g] == alone[g] for g in on_ranks) and "blas" not in "".join(on_ranks.values())
    # --show timing: the same sections, every kernel each rank ran
    timed, timed_alone = _timing(ranks.stderr), _timing(one.stderr)
    assert timed[0] == timed_alone[0] == ["kernel", "kind", "runs", "time", "share"]
    assert timed[-1][:3] == timed_alone[-1][:3] == ["kernels,", "every", "chip"]
    assert int(timed[-1][3]) == sum(c["kernels"] for c in ranked["chips"]) == sum(int(r[1]) for r in timed[1:-1])
    assert {r[0] for r in timed[1:-1]} <= {r[0] for r in timed_alone[1:-1]}


@mpi
@pytest.mark.parametrize("how", ["--ranks", "mpiexec"])
def test_include_folders_reach_the_ranks(tmp_path, how):
    """-I means on ranks what it means in one process: rules whose #include lives elsewhere."""
    rules, shared = tmp_path / "rules", tmp_path / "shared"
    rules.mkdir()
    shared.mkdir()
    for path in (ROOT / "tests/data/family_rules").iterdir():  # rules that #include a .dlh
        (shared if path.suffix == ".dlh" else rules).joinpath(path.name).write_text(path.read_text())
    start = ["run", FACTS / SMALL, "--ranks", "2"] if how == "--ranks" else ["run", FACTS / SMALL, "--mpi"]

    def run(*extra):
        line = [sys.executable, "-m", "tprules", *map(str, start), "--rules", str(rules), *map(str, extra)]
        if how == "mpiexec":
            line = [mpiexec(), "-n", "2", *line]
        return subprocess.run(line, cwd=ROOT, capture_output=True, text=True, timeout=180)

    without = run()
    assert without.returncode == 2 and "decls.dlh" in without.stderr, without.stderr
    done = run("-I", shared)
    assert done.returncode == 0 and "the output matches the reference" in done.stdout, done.stderr


def test_jobs_under_ranks_is_refused_in_one_line():
    # the ranks compile side by side, one process each: --jobs would be ignored there
    done = tprules("run", FACTS / SMALL, "--ranks", "2", "--jobs", "2")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == ["usage: --jobs is for one process; under --ranks N the N ranks compile side "
                                        "by side, one process each"]
