"""Running plans on the cpu and sim devices against the reference; kernel counts pinned."""

from __future__ import annotations

import json

import numpy as np
import pytest
from plans import EXAMPLES, FACTS, cases, example, fused_plan

from tprules.planner import plan as make_plan
from tprules.runtime import execute
from tprules.runtime.plan.groups import unfused

CASES = cases()
DEVICES = ("cpu", "sim")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", EXAMPLES)
def test_every_example_matches_the_reference(cli, name, device):
    status, out, err = cli("run", FACTS / name, "--device", device, "--format", "json")
    report = json.loads(out)
    assert status == 0 and report["ok"], [o for o in report["outputs"] if not o["ok"]]
    ws, _ = example(name)
    assert report["kernels"] == report["groups"] == len(make_plan(ws).groups)
    assert report["max_rel_err"] <= 1e-3


@pytest.mark.parametrize("name", sorted(CASES))
def test_hand_made_fused_plans_on_cpu(name):
    case = CASES[name]
    ws, prog = example(case["program"])
    plan = fused_plan(prog, case["groups"])
    report = execute(ws, plan, device="cpu", prog=prog)
    assert report.kernels == len(plan.groups)
    assert report.ok == case["matches_reference"], [o for o in report.outputs if not o.ok]


def sim_batches():
    """One simulator run per program for every matching case (the simulator is slow)."""
    by_program: dict[str, list] = {}
    for _name, case in sorted(CASES.items()):
        if case["matches_reference"]:
            groups = by_program.setdefault(case["program"], [])
            taken = {o for g in groups for o in g}
            if not taken & {o for g in case["groups"] for o in g}:
                groups.extend(case["groups"])
    return sorted(by_program.items())


@pytest.mark.parametrize("program, groups", sim_batches(), ids=[p for p, _ in sim_batches()])
def test_hand_made_fused_plans_on_the_simulator(program, groups):
    ws, prog = example(program)
    plan = fused_plan(prog, groups)
    report = execute(ws, plan, device="sim", prog=prog)
    assert report.kernels == len(plan.groups)
    assert report.ok, [o for o in report.outputs if not o.ok]


@pytest.mark.parametrize("device", DEVICES)
def test_a_fold_fused_into_its_consumer_is_a_local_sum(device):
    ws, prog = example("megatron-mlp-tp2")
    report = execute(ws, fused_plan(prog, [["allreduce", "bias"]]), device=device, prog=prog)
    (out,) = report.outputs
    assert not out.ok and out.max_rel_err > 0.1
    # each chip added only its own partial: chip 0's result is the reference less chip 1's half
    assert report.transfers == 0


def test_the_all_reduce_moves_every_partial_to_every_chip():
    ws, prog = example("megatron-mlp-tp4")
    report = execute(ws, unfused(prog), device="cpu", prog=prog)
    assert report.ok
    assert report.transfers == 4 * 3  # the fold's kernel runs on each chip with the 3 others' partials
    assert report.moved_bytes == 12 * 8 * 16 * 4
    # own statements and the fold on each chip; the spine's bias and residual once, on chip 0, for all four
    assert [c.kernels for c in report.chips] == [3 + 1 + 2] + [3 + 1] * 3
    each = execute(ws, unfused(prog), device="cpu", prog=prog, share=False)
    assert [c.kernels for c in each.chips] == [3 + 1 + 2] * 4 and each.transfers == report.transfers


@pytest.mark.parametrize("device", DEVICES)
def test_an_all_gather_copies_every_slice_to_every_chip(device):
    ws, prog = example("gather-mlp-tp2")
    report = execute(ws, unfused(prog), device=device, prog=prog)
    assert report.ok
    assert report.transfers == 2 and report.moved_bytes == 2 * 8 * 16 * 4  # each chip gets the other's slice


@pytest.mark.parametrize("device", DEVICES)
def test_an_all_gather_fused_into_its_consumer_is_a_local_concat(device):
    ws, prog = example("gather-mlp-tp2")
    report = execute(ws, fused_plan(prog, [["allgather", "mm2"]]), device=device, prog=prog)
    (out,) = report.outputs
    assert not out.ok  # each chip joined only what it holds: the other chip's slice is never moved


@pytest.mark.parametrize("device", DEVICES)
def test_a_reduce_scatter_gives_each_chip_only_its_block_of_the_sum(device):
    from tprules.runtime import Prepared

    ws, prog = example("sp-mlp-tp2")
    prepared = Prepared(prog, unfused(prog), device)
    done = prepared.run()
    assert prepared.report(done).ok
    # the all-gather copies each chip's 4x16 token block to the other; the reduce-scatter only
    # block k of the other chip's 8x16 partial to chip k: neither moves a whole partial
    assert done.transfers == 4 and done.moved_bytes == 2 * (4 * 16 * 4) + 2 * (4 * 16 * 4)
    total = prepared.expected.spine["y"]  # the reference's sum (SPEC semantics)
    for chip, buf in done.held["y"].items():
        y = np.asarray(buf.copy_to_host() if hasattr(buf, "copy_to_host") else buf).reshape(8, 16)
        mine = slice(4 * chip, 4 * chip + 4)
        assert not np.any(np.delete(y, np.s_[mine], axis=0))  # no chip holds the whole sum
        np.testing.assert_allclose(y[mine], total[mine], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_a_reduce_scatter_fused_with_a_slice_is_a_local_sum(device):
    ws, prog = example("sp-mlp-tp2")
    report = execute(ws, fused_plan(prog, [["scatter", "scatter_0"]]), device=device, prog=prog)
    bad = {o.tensor for o in report.outputs if not o.ok}
    assert "out_0" in bad  # chip 0 added only its own partial: the collective_fold the rules refuse


def test_devices_agree():
    ws, prog = example("relocated-head-tp2")
    plan = fused_plan(prog, [["head", "probs", "pick"], ["mm1_0", "gelu_0"]])
    cpu = execute(ws, plan, device="cpu", prog=prog)
    sim = execute(ws, plan, device="sim", prog=prog)
    # both devices ran the plan and hold a value of every program output (here `picked`), so
    # the loop below compares each of them: an empty report cannot pass
    assert prog.outputs == ["picked"]
    assert cpu.ok and sim.ok
    assert [o.tensor for o in cpu.outputs] == [o.tensor for o in sim.outputs] == prog.outputs
    assert sorted(cpu.values) == sorted(sim.values) == prog.outputs
    compared = []
    for name, value in cpu.values.items():
        assert value.size and value.shape == sim.values[name].shape
        np.testing.assert_allclose(sim.values[name], value, rtol=1e-5, atol=1e-6)
        compared.append(name)
    assert compared == prog.outputs


def test_a_relocated_section_runs_on_its_chip():
    ws, prog = example("relocated-head-tp2")
    report = execute(ws, unfused(prog), device="cpu", prog=prog, share=False)
    assert report.ok
    # chip 0 runs the relocated head (matmul, softmax) and pick; chip 1 does not
    assert report.chips[0].kernels == report.chips[1].kernels + 3


def test_repeat_reports_the_fastest_of_several_runs():
    ws, prog = example("megatron-mlp-tp2")
    once = execute(ws, unfused(prog), device="cpu", prog=prog)
    several = execute(ws, unfused(prog), device="cpu", prog=prog, repeat=3)
    assert several.ok and several.kernels == once.kernels
    assert [c.kernels for c in several.chips] == [c.kernels for c in once.chips]
