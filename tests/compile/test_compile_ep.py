"""`compile --arch sm_90` on an expert-parallel program (`import hf --ep`): every kernel,
the masked routing on each chip among them, builds."""

from __future__ import annotations

import re

from tests.frontends.tiny import make_model

from .conftest import tprules


def test_an_ep_program_compiles_for_sm_90(nvvm, tmp_path):
    from tprules.frontends.importer import import_hf

    import_hf(make_model(tmp_path / "mixtral", "mixtral", num_hidden_layers=1), 2, tmp_path / "p", ep=True, seq=4)
    r = tprules("compile", tmp_path / "p", "--arch", "sm_90")
    assert r.returncode == 0, r.stderr
    rows = [ln for ln in r.stdout.splitlines() if "ep_mask_div@" in ln]
    assert [ln.split()[1] for ln in rows] == ["chip:0", "chip:1"]
    assert re.search(r"compiled for sm_90 in .*: every kernel builds", r.stdout.splitlines()[-1])
