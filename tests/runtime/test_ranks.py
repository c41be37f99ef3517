"""The rank code (executor, reference, collect) on thread ranks: the same outputs as one
process on every example and hand-made plan, folds as all-reduces, each rank reading only
its own chips' inputs. The MPI path itself: test_ranks_cli.py."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from plans import EXAMPLES, cases, example, fused_plan
from ranks import ThreadWorld, _Hub, run_on_threads

from tprules.planner import plan as make_plan
from tprules.program.builder import ProgramBuilder
from tprules.runtime import Program, execute
from tprules.runtime.distributed.reference import rank_reference
from tprules.runtime.distributed.report import render_text
from tprules.runtime.plan.groups import unfused
from tprules.runtime.plan.reduce_scatter import reduce_scatters
from tprules.runtime.values.inputs import program_inputs
from tprules.workspace import Workspace

CASES = cases()


def same_outputs(report, single) -> None:
    """Every output within 1e-6 of the one-process run, relative to its largest value."""
    assert sorted(report.values) == sorted(single.values)
    for t, want in single.values.items():
        scale = max(float(np.max(np.abs(want))), 1e-30)
        assert float(np.max(np.abs(report.values[t] - want))) / scale <= 1e-6, t


def rank_counts(chips: int) -> list[int]:
    return [n for n in (1, 2, 4) if n <= chips]


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_example_matches_one_process_on_1_2_4_ranks(name):
    ws, prog = example(name)
    plan = make_plan(ws)
    single = execute(ws, plan, prog=prog, share=False)  # ranks keep a copy of each spine kernel on each chip
    for n in rank_counts(prog.chips):
        report = run_on_threads(prog, plan, n)
        assert report.ok, (n, [o for o in report.outputs if not o.ok])
        same_outputs(report, single)
        assert [r.chips for r in report.ranks] == [list(range(r, prog.chips, n)) for r in range(n)]
        # a fold is an all-reduce, all-gather or reduce-scatter, not a kernel; every other kernel runs as in one
        # process, where a reduce-scatter is no kernel either
        folds = sum(1 for g in plan.groups if g.place == "collective")
        scatters = sum(1 for g in plan.groups if g.place == "collective" and g.members[0] in reduce_scatters(prog))
        r0 = report.ranks[0]
        assert report.allreduces + r0.allgathers + r0.reducescatters == folds
        assert report.kernels == single.kernels - folds
        assert [c.kernels for c in report.chips] == [c.kernels - folds + scatters for c in single.chips]


@pytest.mark.parametrize("name", sorted(CASES))
def test_hand_made_fused_plans_on_two_ranks(name):
    case = CASES[name]
    ws, prog = example(case["program"])
    plan = fused_plan(prog, case["groups"])
    report = run_on_threads(prog, plan, 2)
    assert report.ok == case["matches_reference"], [o for o in report.outputs if not o.ok]
    same_outputs(report, execute(ws, plan, prog=prog))


def test_a_fold_is_one_all_reduce_of_each_ranks_local_sum():
    ws, prog = example("megatron-mlp-tp4")
    report = run_on_threads(prog, unfused(prog), 2)
    assert report.ok
    for r in report.ranks:  # one all-reduce of an 8x16 float32 partial, already summed over 2 chips
        assert (r.allreduces, r.allreduce_bytes, r.messages) == (1, 8 * 16 * 4, 0)
    assert report.transfers == 0  # chips of one rank add their partials before the all-reduce


@pytest.mark.parametrize("ranks", [1, 2])
def test_an_all_gather_is_one_allgatherv_of_each_ranks_slices(ranks):
    ws, prog = example("gather-mlp-tp2")
    report = run_on_threads(prog, unfused(prog), ranks)
    assert report.ok
    for r in report.ranks:  # chip k's 8x16 float32 slice of the activations, joined on every chip
        assert (r.allreduces, r.allgathers, r.allgather_bytes, r.messages) == (0, 1, len(r.chips) * 8 * 16 * 4, 0)
    assert "1 all-gather of" in render_text(report)


@pytest.mark.parametrize("ranks", [1, 2])
def test_a_reduce_scatter_leaves_each_rank_only_its_chips_blocks(ranks):
    ws, prog = example("sp-mlp-tp2")
    report = run_on_threads(prog, unfused(prog), ranks)
    assert report.ok
    for r in report.ranks:  # chip k's 4x16 float32 block of the 8x16 sum, and nothing more
        assert (r.allreduces, r.reducescatters, r.reducescatter_bytes, r.messages) == (0, 1, len(r.chips) * 4 * 16 * 4, 0)
    assert "1 reduce-scatter of" in render_text(report)
    same_outputs(report, execute(ws, unfused(prog), prog=prog))


def test_each_rank_reads_only_its_chips_inputs_and_the_spines(monkeypatch):
    import tprules.runtime.values.inputs as inputs

    _, prog = example("llama-layer-tp4")
    read: dict[str, set[str]] = {}

    def recording(p, names=None):
        read[threading.current_thread().name] = set(names)
        return program_inputs(p, names)

    monkeypatch.setattr(inputs, "program_inputs", recording)
    report = run_on_threads(prog, unfused(prog), 2)
    assert report.ok and len(read) == 2
    for rank, chips in ((0, {0, 2}), (1, {1, 3})):
        want = {t for t in prog.inputs if prog.tensors[t].home is None or prog.tensors[t].home in chips}
        assert read[f"rank{rank}"] == want
        assert {prog.tensors[t].home for t in want} == {None} | chips


def test_the_reference_of_a_rank_holds_no_other_chips_weights():
    _, prog = example("llama-layer-tp4")
    hub, held = _Hub(4), {}

    def one(rank):
        world = ThreadWorld(hub, rank)
        world.assign(prog.chips)
        mine = {t for t in prog.inputs if prog.tensors[t].home in (None, rank)}
        held[rank] = rank_reference(prog, program_inputs(prog, mine), world)

    threads = [threading.Thread(target=one, args=(r,)) for r in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    partials = {t for s in prog.statements if s.fold for t in s.reads}
    for rank, values in held.items():
        foreign = {t for t in values if prog.tensors[t].home not in (None, rank)}
        assert foreign and foreign <= partials  # only the folds' partials came from other chips


def test_a_spine_value_made_on_one_chip_moves_to_the_other_rank(tmp_path):
    # a relocated section computes a spine tensor on chip 1 that a spine statement reads
    b = ProgramBuilder(chips=2)
    x = b.tensor("x", [4, 4], spine=True)
    parts = [b.stmt(f"r{c}", "relu", [x], b.tensor(f"p{c}", [4, 4], chip=c)) for c in range(2)]
    y = b.tensor("y", [4, 4], spine=True)
    b.fold("ar", parts, y, "c")
    b.stmt("head", "exp", [y], b.tensor("h", [4, 4], spine=True))
    b.section("tail", ["head"], relocated_to=1)
    b.stmt("out", "neg", ["h"], b.tensor("o", [4, 4], spine=True))
    ws = Workspace(b.write(tmp_path / "p"))
    prog = Program.from_workspace(ws)
    plan = unfused(prog)
    report = run_on_threads(prog, plan, 2)
    assert report.ok
    same_outputs(report, execute(ws, plan, prog=prog))
    (zero, one) = report.ranks
    assert zero.messages == one.messages == 1 and zero.message_bytes == 4 * 4 * 4


@pytest.mark.parametrize("off, ok", [(0.0, True), (0.5, False)])
def test_outputs_are_compared_with_expected_when_the_folder_has_it(program_copy, off, ok):
    from tprules.runtime.distributed.report import render_text

    folder = program_copy("megatron-mlp-tp2")
    ws = Workspace(folder)
    prog = Program.from_workspace(ws)
    single = execute(ws, unfused(prog), prog=prog)
    (folder / "expected").mkdir()
    np.save(folder / "expected" / "out.npy", single.values["out"] + np.float32(off))
    report = run_on_threads(prog, unfused(prog), 2)
    (check,) = report.outputs
    assert check.tensor == "out" and check.expected.ok == ok and report.ok == ok
    assert check.max_rel_err <= check.tolerance  # the reference still agrees
    text = render_text(report)
    (row,) = [line.split() for line in text.splitlines() if line.split()[1:2] == ["expected/out.npy"]]
    assert row[0] == "out" and row[-1] == ("ok" if ok else "MISMATCH")
    assert ("differ from the reference or expected/" in text) != ok
    assert report.to_json()["outputs"][0]["expected"]["ok"] == ok


class _AbortingWorld:
    rank, chips = 1, (1, 3)

    def abort(self, code):
        raise SystemExit(code)


@pytest.mark.parametrize("traceback", [False, True])
def test_a_failing_rank_is_one_line_and_its_traceback_only_when_asked(traceback, capsys):
    from tprules.runtime.distributed.rank import _fail

    def kernel_error():
        raise TypeError("'<' not supported")

    heard = []
    try:
        kernel_error()
    except TypeError as err:
        with pytest.raises(SystemExit) as ended:
            _fail(_AbortingWorld(), lambda state, **fields: heard.append((state, fields)), err, traceback)
    assert ended.value.code == 3
    lines = capsys.readouterr().err.splitlines()
    assert lines[-1] == "rank 1 (chips 1, 3) failed: TypeError: '<' not supported"
    assert heard == [("failed", {"code": 3, "message": lines[-1]})]
    assert (lines[0] == "Traceback (most recent call last):" and "kernel_error" in "\n".join(lines)) == traceback
    assert len(lines) == 1 or traceback


def test_an_i64_output_at_two_ranks_is_what_one_process_computes(tmp_path):
    # each chip casts its part to i64 and adds it to itself: i64 buffers on both ranks
    b = ProgramBuilder(chips=2)
    x = b.tensor("x", [4, 4], spine=True, data=np.arange(16, dtype=np.float32).reshape(4, 4) * 3.5 - 20)
    for c in range(2):
        ids = b.stmt(f"cast{c}", "cast", [x], b.tensor(f"ids{c}", [4, 4], dtype="i64", chip=c))
        b.stmt(f"twice{c}", "add", [ids, ids], b.tensor(f"out{c}", [4, 4], dtype="i64", chip=c))
    ws = Workspace(b.write(tmp_path / "p"))
    prog = Program.from_workspace(ws)
    plan = unfused(prog)
    single = execute(ws, plan, prog=prog)
    report = run_on_threads(prog, plan, 2)
    assert report.ok, [o for o in report.outputs if not o.ok]
    assert sorted(report.values) == sorted(single.values) == ["out0", "out1"]
    want = 2 * np.trunc(np.arange(16).reshape(4, 4) * 3.5 - 20)
    for t in ("out0", "out1"):
        assert report.values[t].dtype == single.values[t].dtype == np.int64, t
        np.testing.assert_array_equal(report.values[t], single.values[t])
        np.testing.assert_array_equal(single.values[t], want)



def _shown(make_printer_for, **options) -> dict[str, str]:
    """Group → kernel source, as `--show kernels` shows them: `make_printer_for(printer)` runs
    with `printer(modules, inputs)`, the factory of a rank's printer."""
    shown: dict[str, str] = {}
    make_printer_for(lambda modules, inputs=frozenset(): lambda kernel, source: shown.setdefault(kernel.group, source),
                     **options)
    return shown


@pytest.mark.parametrize("matmul", ["own", "auto"])
def test_matmul_on_ranks_is_the_one_process_core_and_kernels(matmul):
    from tprules.runtime.devices.matmul import probe_blas

    ws, prog = example("megatron-mlp-tp2")
    plan = make_plan(ws)
    reports = {}

    def one_process(printer, **options):
        reports["one"] = execute(ws, plan, prog=prog, show_kernels=printer({}), **options)

    def ranks(printer, **options):
        reports["ranks"] = run_on_threads(prog, plan, 2, show_kernels=printer, **options)

    alone, on_ranks = _shown(one_process, matmul=matmul), _shown(ranks, matmul=matmul)
    one, ranked = reports["one"], reports["ranks"]
    assert ranked.matmul == one.matmul and ranked.to_json()["matmul"] == one.to_json()["matmul"]
    assert one.matmul["kind"] == ("loops" if matmul == "own" or not probe_blas()[0] else "blas")
    assert ranked.device.endswith(f"; matmul: {one.matmul['library']})")
    # rank 0's kernels (chip 0's and the spine's) are those one process compiles with that core
    assert on_ranks and set(on_ranks) < set(alone)
    assert all(on_ranks[g] == alone[g] for g in on_ranks)
    if probe_blas()[0]:  # with the other core, a group with a matmul is another kernel
        other = _shown(one_process, matmul="auto" if matmul == "own" else "own")
        assert any(on_ranks[g] != other[g] for g in on_ranks)


def test_timing_on_ranks_counts_every_kernel_each_rank_ran():
    from collections import Counter

    from tprules.codegen import lower

    ws, prog = example("llama-layer-tp4")
    plan = make_plan(ws)
    report = run_on_threads(prog, plan, 2, repeat=2)
    single = execute(ws, plan, prog=prog, share=False)
    assert sum(runs for runs, _ in report.timing.values()) == sum(c.kernels for c in report.chips) > 0
    assert all(seconds > 0 for _, seconds in report.timing.values())
    # per kind, the kernels one process runs, less the folds (a kernel on each chip there,
    # an all-reduce on ranks)
    folds = Counter(lower(g, prog).kind for g in plan.groups if g.place == "collective")
    want = {kind: runs - prog.chips * folds[kind] for kind, (runs, _) in single.timing.items()}
    assert {kind: runs for kind, (runs, _) in report.timing.items()} == {k: n for k, n in want.items() if n}


def test_a_copy_between_chips_of_a_rank_waits_for_its_producer_only(tmp_path, monkeypatch):
    # a relocated section computes a spine tensor on chip 2; rank 0 (chips 0, 2) copies it to
    # chip 0 once the kernel that wrote it is done (its queue's mark), as one process does
    from tprules.runtime.devices.cpu import CpuQueue

    b = ProgramBuilder(chips=4)
    x = b.tensor("x", [4, 4], spine=True)
    parts = [b.stmt(f"r{c}", "relu", [x], b.tensor(f"p{c}", [4, 4], chip=c)) for c in range(4)]
    b.fold("ar", parts, b.tensor("y", [4, 4], spine=True), "c")
    b.stmt("head", "exp", ["y"], b.tensor("h", [4, 4], spine=True))
    b.section("tail", ["head"], relocated_to=2)
    b.stmt("out", "neg", ["h"], b.tensor("o", [4, 4], spine=True))
    ws = Workspace(b.write(tmp_path / "p"))
    prog = Program.from_workspace(ws)
    copies, copy_from = [], CpuQueue.copy_from

    def recording(queue, source, buffer, after=None):
        copies.append((source.chip, queue.chip, after))
        return copy_from(queue, source, buffer, after)

    monkeypatch.setattr(CpuQueue, "copy_from", recording)
    plan = unfused(prog)
    report = run_on_threads(prog, plan, 2)
    assert (2, 0) in [(s, c) for s, c, _ in copies]
    assert all(after is not None for s, c, after in copies if (s, c) == (2, 0))
    assert report.ok
    same_outputs(report, execute(ws, plan, prog=prog, share=False))
