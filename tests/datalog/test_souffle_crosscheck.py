"""Soufflé cross-check: `tprules export` of every example, run on Soufflé 2.5, gives exactly
tprules' `legal` and `refused` (the rule files run unchanged on Soufflé). Skipped where
`souffle` is not on PATH (as in CI)."""

from __future__ import annotations

import pytest
from conftest import FACTS
from helpers import needs_souffle, souffle_verdicts, tprules_verdicts

from tprules.golden.corpus import example_programs

EXAMPLES = example_programs(FACTS)


@needs_souffle
@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_souffle_agrees_with_tprules(example, cli, tmp_path):
    ours = tprules_verdicts(example)
    assert ours[0] or ours[1]
    assert souffle_verdicts(cli, example, tmp_path / "export") == ours


@needs_souffle
@pytest.mark.parametrize("shim", ["cuda-lane:h100:Bf16", "cuda-lane:rtx3060:TwoPassInt8", "cpu:x86:F32"])
def test_souffle_agrees_on_every_shim(shim, cli, tmp_path):
    example = next(e for e in EXAMPLES if e.name == "llama-layer-tp4")
    assert souffle_verdicts(cli, example, tmp_path / "export", shim) == tprules_verdicts(example, shim=shim)
