"""A spine kernel runs once for the chips of one process on the CPU (their memory is one),
and the other chips read its buffers where they lie: the same outputs as every chip
computing it, bit for bit, and fewer kernels."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from plans import example

from tprules.planner import plan as make_plan
from tprules.runtime import Prepared, execute
from tprules.runtime.devices.cpu import Cores, CpuDevice
from tprules.runtime.plan.groups import unfused


def _spine_groups(plan) -> int:
    return sum(1 for g in plan.groups if g.place == "spine")


@pytest.mark.parametrize("name, planned", [("megatron-mlp-tp4", False), ("llama-layer-tp4", True),
                                           ("relocated-head-tp2", False)])
def test_a_shared_spine_gives_the_outputs_of_one_copy_a_chip(name, planned):
    ws, prog = example(name)
    plan = make_plan(ws) if planned else unfused(prog)
    shared = execute(ws, plan, prog=prog)
    each = execute(ws, plan, prog=prog, share=False)
    assert shared.ok and each.ok
    assert sorted(shared.values) == sorted(each.values)
    for t, value in each.values.items():
        np.testing.assert_array_equal(shared.values[t], value, err_msg=t)
    spine = _spine_groups(plan)
    assert spine > 0
    # chip 0 runs each spine kernel once; every other chip runs none of them
    assert [c.kernels for c in shared.chips] == [each.chips[0].kernels] + [c.kernels - spine
                                                                           for c in each.chips[1:]]
    assert shared.transfers == each.transfers  # reading a shared buffer is not a copy


def test_every_chip_reads_the_one_buffer_of_a_spine_tensor():
    ws, prog = example("llama-layer-tp4")  # its first rmsnorm is on the spine, read by every chip
    ready = Prepared(prog, unfused(prog), "cpu")
    done = ready.run()
    spine = [p.tensor for k in ready.kernels if k.place == "spine" for p in k.params if p.role == "out"]
    read = [t for t in spine if len(done.held[t]) > 1]  # the spine's tensors that other chips read
    assert read, spine
    for t in read:
        assert len({id(buf) for buf in done.held[t].values()}) == 1, t


def test_a_shared_spine_kernel_is_rendered_for_every_core():
    ws, prog = example("megatron-mlp-tp4")
    device = CpuDevice()
    ready = Prepared(prog, unfused(prog), device)
    threads = {c.kernel.place: c.threads for c in ready.compiled}
    assert threads["spine"] == device.cores and threads["chip:0"] is None  # None: the chip's own share
    each = Prepared(prog, unfused(prog), CpuDevice(), share=False)
    assert {c.threads for c in each.compiled} == {None}


def test_the_simulator_keeps_a_spine_kernel_on_every_chip():
    ws, prog = example("megatron-mlp-tp4")
    plan = unfused(prog)
    report = execute(ws, plan, device="sim", prog=prog)
    assert report.ok and len({c.kernels for c in report.chips}) == 1


def test_a_kernel_takes_all_its_cores_at_once():
    cores = Cores(2)
    cores.take(1)  # a chip's kernel of one thread runs
    got = threading.Event()

    def every_core():
        cores.take(2)
        got.set()

    waiting = threading.Thread(target=every_core)
    waiting.start()
    assert not got.wait(0.05)  # (a broken count lets it through at once; a right one never does)
    cores.give(1)  # the one-thread kernel ends: now both cores are free together
    waiting.join()
    assert got.is_set() and cores.free == 0
    cores.give(2)
    cores.take(5)  # more threads than cores (a fixed thread count in a test) takes them all
    assert cores.free == 0


def test_a_chip_waits_for_the_kernel_that_wrote_what_it_reads_not_for_later_work():
    from tprules.runtime.devices.cpu import CpuQueue

    source, reader = CpuQueue(0), CpuQueue(1)
    try:
        buf = np.zeros(4, np.float32)
        source._submit(lambda: buf.fill(2.0))  # the writer
        written = source.mark()
        gate = threading.Event()
        source._submit(lambda: gate.wait(10))  # the source chip's next kernel, still running
        copy = reader.copy_from(source, buf, written)
        shared = reader.share_from(source, buf, written)
        done = threading.Event()
        reader._submit(done.set)
        assert done.wait(10), "the reader waited for the source's later work"
        assert not gate.is_set()
        np.testing.assert_array_equal(copy, np.full(4, 2.0, np.float32))
        assert shared is buf
        gate.set()
        # without a mark, a copy waits for everything the source had enqueued
        gate.clear()
        source._submit(lambda: gate.wait(10))
        reader.copy_from(source, buf)
        late = threading.Event()
        reader._submit(late.set)
        assert not late.wait(0.2)
        gate.set()
        assert late.wait(10)
    finally:
        gate.set()
        source.close()
        reader.close()


def test_the_executor_hands_each_copy_and_share_the_mark_of_its_writer(monkeypatch):
    from tprules.runtime.devices.cpu import CpuQueue

    seen = []
    copy, share = CpuQueue.copy_from, CpuQueue.share_from

    def copy_from(self, source, buffer, after=None):
        seen.append(("copy", after))
        return copy(self, source, buffer, after)

    def share_from(self, source, buffer, after=None, moved=False):
        seen.append(("read" if moved else "share", after))
        return share(self, source, buffer, after, moved)

    monkeypatch.setattr(CpuQueue, "copy_from", copy_from)
    monkeypatch.setattr(CpuQueue, "share_from", share_from)
    ws, prog = example("llama-layer-tp4")
    report = execute(ws, make_plan(ws), prog=prog)
    assert report.ok
    # the spine's outputs shared, the folds' partials read where they lie (each a transfer)
    assert {kind for kind, _ in seen} == {"read", "share"}
    assert sum(kind == "read" for kind, _ in seen) == report.transfers
    each = execute(ws, make_plan(ws), prog=prog, share=False)  # a copy on every chip
    assert each.ok and {kind for kind, _ in seen} == {"read", "share", "copy"}
    assert all(after is not None for _, after in seen), seen
