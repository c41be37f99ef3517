"""`compile --arch sm_90` on an expert-parallel program (`import hf --ep`), in both experts
forms: every kernel, the masked routing on each chip among them (and in the grouped form
each chip's grouped matmuls), builds."""

from __future__ import annotations

import re

import pytest

from tests.frontends.tiny import make_model

from .conftest import tprules


@pytest.mark.parametrize("experts", ["batched_mm", "grouped_mm"])
def test_an_ep_program_compiles_for_sm_90(nvvm, tmp_path, experts):
    from tprules.frontends.drivers.hf import import_hf

    import_hf(make_model(tmp_path / "mixtral", "mixtral", num_hidden_layers=1), 2, tmp_path / "p", ep=True, seq=4,
              experts=experts)
    r = tprules("compile", tmp_path / "p", "--arch", "sm_90")
    assert r.returncode == 0, r.stderr
    rows = [ln for ln in r.stdout.splitlines() if "ep_mask_div@" in ln]
    assert [ln.split()[1] for ln in rows] == ["chip:0", "chip:1"]
    grouped = [ln.split()[1] for ln in r.stdout.splitlines() if "grouped_mm_fallback@" in ln]
    assert grouped == (["chip:0", "chip:1"] if experts == "grouped_mm" else [])
    assert re.search(r"compiled for sm_90 in .*: every kernel builds", r.stdout.splitlines()[-1])
