"""Attention's chain (codegen/lowering/attention.py): QKᵀ → scale → mask → softmax → ·V in one group
runs per head and tile of rows on the CPU, the scores and probabilities in arrays of the
tile's own, never in their [heads, seq, seq] buffers; where a stage between the products
reads the scores elsewhere than at its own index, the stages stay apart."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest
from plans import spine_statement as _s
from plans import write_programs

from tprules.codegen import lower
from tprules.codegen.cost import CPU, estimate
from tprules.codegen.cpu import function as cpu
from tprules.codegen.ir import AttentionStage
from tprules.codegen.lowering import attention
from tprules.planner.plan import Group, Plan
from tprules.runtime import Prepared, Program, execute
from tprules.workspace import Workspace


def _attention(b, heads, seq, dim, kv_heads, cross=False, causal=False, scaled=False):
    """Heads of `dim` over `seq` rows, GQA's repeated key/value heads, a broadcast mask (with
    `causal` -inf above the diagonal); with `cross` the softmax reads the scores transposed
    (not the index it computes); with `scaled` ·V reads the probabilities scaled (computed,
    not as they lie)."""
    q = b.tensor("q", [heads, seq, dim], spine=True)

    def repeated(name):
        x = _s(b, f"{name}1", "reshape", [b.tensor(name, [kv_heads, seq, dim], spine=True)],
               [kv_heads, 1, seq, dim])
        x = _s(b, f"{name}2", "expand", [x], [kv_heads, heads // kv_heads, seq, dim])
        return _s(b, f"{name}3", "reshape", [x], [heads, seq, dim])

    kt = _s(b, "kt", "permute", [repeated("k")], [heads, dim, seq], dims="0,2,1")
    s = _s(b, "s", "scale", [_s(b, "sc", "bmm", [q, kt], [heads, seq, seq])], [heads, seq, seq], factor="0.3")
    if cross:
        s = _s(b, "st", "permute", [s], [heads, seq, seq], dims="0,2,1")
    mask = np.triu(np.full((1, 1, seq, seq), -np.inf, np.float32), 1) if causal else None
    m = _s(b, "m", "add", [_s(b, "s4", "reshape", [s], [1, heads, seq, seq]),
                           b.tensor("mask", [1, 1, seq, seq], spine=True, data=mask)], [1, heads, seq, seq])
    p = _s(b, "p", "reshape", [_s(b, "sm", "softmax", [m], [1, heads, seq, seq])], [heads, seq, seq])
    if scaled:
        p = _s(b, "p2", "scale", [p], [heads, seq, seq], factor="2.0")
    _s(b, "out", "bmm", [p, repeated("v")], [heads, seq, dim])


CASES = {
    "gqa": lambda b: _attention(b, 4, 12, 8, 2),
    "rows_beyond_a_tile": lambda b: _attention(b, 3, 300, 4, 1),  # 300 rows: a tile of 256 and one of 44
    "softmax_of_the_transpose": lambda b: _attention(b, 2, 6, 4, 1, cross=True),
    # the simulator's tiles are 8 x 8: rows, keys and head columns beyond one tile, a key tile
    # of row 0 wholly masked
    "causal_wide": lambda b: _attention(b, 2, 10, 20, 1, causal=True),
    "scaled_probabilities": lambda b: _attention(b, 2, 6, 4, 2, scaled=True),
}


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    return write_programs(CASES, tmp_path_factory)


def _one_group(folder):
    ws = Workspace(folder)
    prog = Program.from_workspace(ws)
    plan = Plan(prog.shim, (Group("g0", tuple(s.name for s in prog.statements), "spine"),))
    return ws, prog, plan, lower(plan.groups[0], prog)


@pytest.mark.parametrize("name", ["gqa", "rows_beyond_a_tile"])
def test_the_chain_runs_per_tile_and_matches_the_reference(programs, name):
    ws, prog, plan, kernel = _one_group(programs[name])
    (chain,) = [s for s in kernel.stages if isinstance(s, AttentionStage)]
    assert [type(s).__name__ for s in chain.stages] == ["BatchedMatmulStage", "RowStage", "BatchedMatmulStage"]
    assert kernel.kind == "attention"
    source = cpu.render(kernel, gemm=True, threads=2)
    for p in chain.local:  # the scores and probabilities: never a subscript of their buffers
        assert not re.search(rf"\b{p}\[", source), (p, source)
    assert source.count("gemm(") == 2
    ready = Prepared(prog, plan, "cpu")
    run = ready.compiled[0].kernel  # as the device runs it: the chain's buffers are never allocated
    assert {run.param(p).buffer_shape for p in chain.local} == {(1,)}
    report = ready.report(ready.run())
    assert report.ok, [(o.tensor, o.max_rel_err) for o in report.outputs]


def test_a_softmax_of_the_transposed_scores_is_no_chain(programs):
    ws, prog, plan, kernel = _one_group(programs["softmax_of_the_transpose"])
    assert kernel.kind == "bmm+row+bmm" and attention.chains(kernel) == []
    assert execute(ws, plan, device="cpu", prog=prog).ok


def test_the_cost_of_a_chain_moves_no_scores(programs):
    """On the CPU the chain's buffers are tiles in cache; a machine that does not tile them
    pays each store and every pass that reads them back."""
    _, _, _, kernel = _one_group(programs["gqa"])
    scores = 4 * 12 * 12 * 4  # bytes of one [heads, seq, seq] float32 buffer
    tiled, whole = estimate(kernel, CPU), estimate(kernel, replace(CPU, attention=""))
    # the scores: stored, read by the softmax's three passes; the probabilities: stored, read by ·V
    assert whole.bytes - tiled.bytes == (1 + 3 + 1 + 1) * scores
    assert CPU.seconds(tiled) < CPU.seconds(whole)


@pytest.mark.parametrize("name", ["gqa", "causal_wide", "scaled_probabilities"])
def test_the_chain_on_the_cpu_and_in_the_simulator(programs, name):
    """The GPU runs the online form (one QKᵀ, a softmax ·V reads as it lies) as one launch of
    one stage, and any other chain stage by stage; both match the reference, as on the CPU."""
    ws, prog, plan, kernel = _one_group(programs[name])
    (chain,) = [s for s in kernel.stages if isinstance(s, AttentionStage)]
    assert attention.online(chain) == (name != "scaled_probabilities")
    for device in ("cpu", "sim"):
        ready = Prepared(prog, plan, device)
        report = ready.report(ready.run())
        assert report.ok, (device, [(o.tensor, o.max_rel_err) for o in report.outputs])
    launched = ready.compiled[0]  # the simulator's
    if attention.online(chain):
        assert launched.kernel.kind == "attention" and launched.launches == 1
        assert {launched.kernel.param(p).buffer_shape for p in chain.local} == {(1,)}
    else:
        assert launched.kernel.kind == "bmm+row+bmm" and launched.launches == 3


def test_a_softmax_takes_one_exp_an_element_on_the_cpu(programs):
    """Its sum's pass keeps exp(x - max) where the result goes, and the store pass divides
    it: one exp an element, where the formula alone would take two."""
    _, _, _, kernel = _one_group(programs["gqa"])
    body = cpu.render(kernel, gemm=True, threads=1).split("def kernel(")[1]
    assert body.count("fexp(") == 1, body
