"""Soufflé cross-check: `tprules export` of every example, on every shim it is meant for, run
on Soufflé 2.5, gives exactly tprules' `legal` and `refused` (the rule files run unchanged on
Soufflé; async-tp-mlp-tp2 on cuda-lane:h200:Bf16SymmMem reaches rules/collective.dl's
collective kernels). CI puts Soufflé on PATH (.ci/run); skipped where `souffle` is not."""

from __future__ import annotations

import pytest
from conftest import FACTS
from helpers import needs_souffle, souffle_verdicts, tprules_verdicts

from tprules.golden.corpus import example_programs, meant_for

EXAMPLES = example_programs(FACTS)
TARGETS = [(e, shim) for e in EXAMPLES for shim in meant_for(e)]


@needs_souffle
@pytest.mark.parametrize("example, shim", TARGETS, ids=[f"{e.name}-{s}" for e, s in TARGETS])
def test_souffle_agrees_with_tprules(example, shim, cli, tmp_path):
    ours = tprules_verdicts(example, shim=shim)
    assert ours[0] or ours[1]
    assert souffle_verdicts(cli, example, tmp_path / "export", shim) == ours


@needs_souffle
@pytest.mark.parametrize("shim", ["cuda-lane:h100:Bf16", "cuda-lane:rtx3060:TwoPassInt8", "cpu:x86:F32"])
def test_souffle_agrees_on_every_shim(shim, cli, tmp_path):
    example = next(e for e in EXAMPLES if e.name == "llama-layer-tp4")
    assert souffle_verdicts(cli, example, tmp_path / "export", shim) == tprules_verdicts(example, shim=shim)
