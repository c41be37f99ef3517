"""`tprules run --trace OUT.json`: Chrome trace-event JSON of a run, on one process (the CPU
device and the simulator) and on `--ranks 2`. What the trace must hold is read from the
same run's JSON report and from `tprules plan`, never written in by hand."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FACTS = ROOT / "facts"
SMALL = FACTS / "megatron-mlp-tp2"
mpi = pytest.mark.skipif(not (Path(sys.executable).parent / "mpiexec").exists() and shutil.which("mpiexec") is None,
                         reason="needs MPI: pip install -e '.[mpi]'")


def _traced(cli, tmp_path, *args) -> tuple[dict, dict]:
    out = tmp_path / "trace.json"
    status, text, err = cli("run", SMALL, "--trace", out, "--format", "json", *args)
    assert (status, err) == (0, ""), err
    return json.loads(text), json.loads(out.read_text())


def _plan(cli) -> list[dict]:
    status, text, _ = cli("plan", SMALL, "--format", "json")
    return json.loads(text)["groups"]


def _slices(trace: dict, cat: str | None = None) -> list[dict]:
    return [e for e in trace["traceEvents"] if e["ph"] == "X" and (cat is None or e["cat"] == cat)]


def assert_trace_event_format(trace: dict) -> None:
    """The JSON object form of the trace-event format: complete ("X") and metadata ("M") events."""
    assert set(trace) >= {"traceEvents", "displayTimeUnit"} and isinstance(trace["traceEvents"], list)
    for e in trace["traceEvents"]:
        assert e["ph"] in ("X", "M"), e
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int) and isinstance(e["name"], str), e
        assert isinstance(e.get("args", {}), dict), e
        if e["ph"] == "X":
            assert isinstance(e["cat"], str) and e["ts"] >= 0 and e["dur"] >= 0, e
        else:
            assert e["name"] in ("process_name", "thread_name", "thread_sort_index", "process_sort_index",
                                 "process_labels"), e
    named = {(e["pid"], e["tid"]) for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert {(e["pid"], e["tid"]) for e in _slices(trace)} <= named  # every thread has a name


def test_one_process_trace_holds_every_kernel_on_its_chip(cli, tmp_path):
    report, trace = _traced(cli, tmp_path)
    assert_trace_event_format(trace)
    kernels = _slices(trace, "kernel")
    for chip in report["chips"]:  # as many launches on each chip's thread as the report counts
        assert sum(1 for k in kernels if k["tid"] == chip["chip"]) == chip["kernels"], chip
    groups = {g["group"]: g for g in _plan(cli)}
    assert {k["args"]["group"] for k in kernels} == set(groups)
    for k in kernels:
        g = groups[k["args"]["group"]]
        assert k["args"]["members"] == g["members"] and k["args"]["place"] == g["place"]
        assert len(k["args"]["classes"]) == len(g["members"]) and k["args"]["estimated_us"] > 0
        assert k["name"].startswith(k["args"]["group"] + " ")
    (run,) = [s for s in _slices(trace, "run")]
    for s in kernels + _slices(trace, "transfer") + _slices(trace, "collective"):
        assert run["ts"] <= s["ts"] and s["ts"] + s["dur"] <= run["ts"] + run["dur"] + 1, s  # 1 µs: rounding
    phases = [s["name"] for s in _slices(trace, "compile")]
    assert phases[:2] == ["plan", "lower"] and {f"compile {g}" for g in groups} <= set(phases)
    assert trace["otherData"]["clock"] == "host"


def test_a_fold_is_a_collective_slice_on_every_chip(cli, tmp_path):
    report, trace = _traced(cli, tmp_path)
    folds = [g for g in _plan(cli) if g["place"] == "collective"]
    assert folds
    collectives = _slices(trace, "collective")
    chips = [c["chip"] for c in report["chips"]]
    for fold in folds:
        mine = [c for c in collectives if c["args"]["group"] == fold["group"]]
        assert sorted(c["tid"] for c in mine) == chips
        for c in mine:
            assert c["args"]["kind"] == "all_reduce" and c["args"]["bytes"] > 0
            assert c["args"]["peers"] == [k for k in chips if k != c["tid"]]
    transfers = _slices(trace, "transfer")
    assert len(transfers) == report["transfers"] and sum(t["args"]["bytes"] for t in transfers) == report["moved_bytes"]
    # on the CPU the chips share memory: a fold reads each other chip's partial where it lies
    assert {t["name"].split()[0] for t in transfers} == {"read"}


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_a_reduce_scatter_is_a_collective_slice_of_one_block_on_every_chip(cli, tmp_path, device):
    out = tmp_path / "trace.json"
    status, text, err = cli("run", FACTS / "sp-mlp-tp2", "--trace", out, "--format", "json", "--device", device)
    assert (status, err) == (0, ""), err
    report, trace = json.loads(text), json.loads(out.read_text())
    assert_trace_event_format(trace)
    status, text, _ = cli("plan", FACTS / "sp-mlp-tp2", "--format", "json")
    (fold,) = [g for g in json.loads(text)["groups"] if g["members"] == ["scatter"]]
    mine = [c for c in _slices(trace, "collective") if c["args"]["group"] == fold["group"]]
    chips = [c["chip"] for c in report["chips"]]
    assert sorted(c["tid"] for c in mine) == chips
    for c in mine:  # block k (4 of the 8 rows of 16 float32) of the other chip's partial, and no more
        assert c["name"] == f"reduce_scatter {fold['group']}" and c["args"]["kind"] == "reduce_scatter"
        assert c["args"]["bytes"] == 4 * 16 * 4 and c["args"]["peers"] == [k for k in chips if k != c["tid"]]
    transfers = _slices(trace, "transfer")
    assert len(transfers) == report["transfers"] and sum(t["args"]["bytes"] for t in transfers) == report["moved_bytes"]


def test_the_simulator_run_is_traced_too(cli, tmp_path):
    report, trace = _traced(cli, tmp_path, "--device", "sim")
    assert_trace_event_format(trace)
    kernels = _slices(trace, "kernel")
    assert len(kernels) == sum(c["kernels"] for c in report["chips"])
    assert _slices(trace, "collective")


def test_bad_input_writes_no_trace(cli, tmp_path):
    status, out, err = cli("run", tmp_path / "missing", "--trace", tmp_path / "t.json")
    assert status == 2 and out == "" and not (tmp_path / "t.json").exists()


@mpi
def test_ranks_trace_is_one_file_a_process_per_rank_on_one_time_base(tmp_path):
    import subprocess

    out = tmp_path / "trace.json"
    done = subprocess.run([sys.executable, "-m", "tprules", "run", str(SMALL), "--ranks", "2", "--trace", str(out),
                           "--format", "json"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    report, trace = json.loads(done.stdout), json.loads(out.read_text())
    assert_trace_event_format(trace)
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    assert sorted(names) == [0, 1] and all(names[r].startswith(f"rank {r} ") for r in names)
    kernels = _slices(trace, "kernel")
    for chip in report["chips"]:
        rank = next(r["rank"] for r in report["ranks"] if chip["chip"] in r["chips"])
        assert sum(1 for k in kernels if (k["pid"], k["tid"]) == (rank, chip["chip"])) == chip["kernels"], chip
    for row in report["ranks"]:  # a rank's slices lie inside that rank's wall time
        (wall,) = [s for s in _slices(trace, "rank") if s["pid"] == row["rank"]]
        assert abs(wall["dur"] / 1e6 - row["wall_s"]) < 1e-3
        for s in _slices(trace):
            if s["pid"] == row["rank"]:
                assert wall["ts"] <= s["ts"] and s["ts"] + s["dur"] <= wall["ts"] + wall["dur"] + 1, s
        collectives = [s for s in _slices(trace, "collective") if s["pid"] == row["rank"]]
        assert len(collectives) == row["allreduces"]
        for c in collectives:
            assert c["args"]["kind"] == "all_reduce" and c["args"]["peers"] == [1 - row["rank"]]
            assert c["args"]["bytes"] == row["allreduce_bytes"] // row["allreduces"]


def test_a_cuda_queue_times_its_work_with_events_placed_on_the_host_clock():
    """The CUDA queue's own path (events, not the simulator queue's host times). The
    simulator's events keep no time, so these do: a device clock 5,000 s off the host's,
    which the event recorded at start_trace places onto the host's."""
    import time

    import numpy as np

    from tprules.runtime.devices.cuda import CudaQueue
    from tprules.runtime.devices.sim import SimDevice

    class DeviceEvent:
        def record(self, stream=0):
            self.ms = (time.perf_counter() + 5000.0) * 1e3

        def synchronize(self):
            pass

        def wait(self, stream=0):
            pass

        def elapsed_time(self, later):
            return later.ms - self.ms

    class Cuda:  # the simulator's API, with events that keep time
        def __init__(self, real):
            self.real = real

        def __getattr__(self, name):
            return DeviceEvent if name == "event" else getattr(self.real, name)

    device = SimDevice()
    source, here = CudaQueue(device, 0, device.gpus[0]), CudaQueue(device, 1, device.gpus[0])
    here.cuda = Cuda(device.cuda)
    buffer = source.upload(np.arange(16, dtype=np.float32))
    before = time.perf_counter()
    here.start_trace()
    copied = here.copy_from(source, buffer)
    after = time.perf_counter()
    ((what, start, end),) = here.take_trace()
    assert what == ("transfer", 0, 64)
    assert before - 1e-3 <= start <= end <= after + 1e-3  # on the host's clock, not the device's
    assert here.trace is None and list(here.download(copied)[:3]) == [0.0, 1.0, 2.0]
