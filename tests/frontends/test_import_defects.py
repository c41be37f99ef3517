"""Two defects of the importer: a full-width rotary's empty pass-through slice, and a
multi-output node met while resolving a constant."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np

from tprules.runtime import Program
from tprules.runtime.values.compare import errors
from tprules.runtime.values.inputs import program_inputs
from tprules.runtime.values.reference import reference
from tprules.workspace import Workspace

from .tiny import make_model


def test_a_full_width_rotary_writes_no_empty_slice_and_runs(tmp_path):
    from tprules.frontends.drivers.hf import import_hf

    # phi3's rotary_dim is head_dim (partial_rotary_factor 1): x[..., rotary_dim:] is empty
    model = make_model(tmp_path / "phi3", "phi3", num_hidden_layers=1)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"layers.*.mlp.down_proj": "replicate"}))
    out = tmp_path / "p"
    import_hf(model, 1, out, plan=plan, seq=4)
    sizes = [line.split("\t")[2] for line in (out / "shape.facts").read_text().splitlines()]
    assert "0" not in sizes
    prog = Program.from_workspace(Workspace(out))  # ill-formed before the fix: a slice of size 0
    _, rel = errors(reference(prog, program_inputs(prog)).get("logits"), np.load(out / "expected" / "logits.npy"))
    assert rel <= 1e-4


def _node(target, val, args=()):
    return SimpleNamespace(target=target, meta={"val": val}, args=args, op="call_function")


def test_a_multi_output_node_is_not_an_identity():
    import torch

    from tprules.frontends.source.constants import Constants

    aten = torch.ops.aten
    c = Constants.__new__(Constants)
    c.aten, c.identity = aten, {aten.clone.default}
    t = torch.zeros(2, 3)
    split = _node(aten.split.Tensor, [t[:1], t[1:]], (_node(None, t),))
    assert c._is_identity(split) is False  # AttributeError: 'list' object has no attribute 'shape' before
    item = _node(aten.view.default, t[:1], (split,))
    assert c._is_identity(item) is False
    assert c._is_identity(_node(aten.view.default, t, (_node(None, t),))) is True


def test_deepseek_v4_is_refused_in_one_line_not_an_internal_error(cli, tmp_path):
    model = make_model(tmp_path / "ds4", "deepseek_v4", num_hidden_layers=1)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"layers.*.mlp.down_proj": "replicate"}))
    status, out, err = cli("import", "hf", model, "--tp", "2", "--out", tmp_path / "p", "--plan", plan)
    assert status == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "internal error" not in err and "DeepseekV4ForCausalLM" in err
