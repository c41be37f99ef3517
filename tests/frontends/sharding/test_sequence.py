"""transformers' `sequence_parallel` style, imported as transformers 5 runs it: each chip runs
the module on its own local copy of the input (tprules/frontends/sharding/sequence.py), so a norm or
residual under it is the program without the entry; a module that mixes tokens is refused."""

from __future__ import annotations

import json

import numpy as np

from tprules.runtime import Program
from tprules.runtime.values.compare import errors
from tprules.runtime.values.inputs import program_inputs
from tprules.runtime.values.reference import reference
from tprules.workspace import Workspace

from ..cli import LLAMA_PLAN, leftovers

NORMS = {"layers.*.input_layernorm": "sequence_parallel", "layers.*.post_attention_layernorm": "sequence_parallel",
         "norm": "sequence_parallel"}


def _import(hf_model, tmp_path, name, plan):
    from tprules.frontends.drivers.hf import import_hf

    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(plan))
    out = tmp_path / name
    import_hf(hf_model("llama"), 2, out, plan=path, seq=4)
    return out


def test_norms_under_sequence_parallel_run_as_transformers_runs_them(hf_model, tmp_path):
    plain = _import(hf_model, tmp_path, "plain", LLAMA_PLAN)
    sp = _import(hf_model, tmp_path, "sp", {**LLAMA_PLAN, **NORMS})
    for facts in ("op.facts", "reads.facts", "writes.facts", "fold.facts", "placed.facts", "spine.facts"):
        assert (sp / facts).read_text() == (plain / facts).read_text(), facts
    prog = Program.from_workspace(Workspace(sp))
    _, rel = errors(reference(prog, program_inputs(prog)).get("logits"), np.load(sp / "expected" / "logits.npy"))
    assert rel <= 1e-4


def test_a_module_that_mixes_tokens_is_refused_naming_its_statement(cli, hf_model, tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({**LLAMA_PLAN, "layers.*.self_attn": "sequence_parallel"}))
    status, out, err = cli("import", "hf", hf_model("llama"), "--tp", "2", "--out", tmp_path / "out", "--plan", plan,
                           "--seq", "4")
    assert (status, out) == (2, "") and len(err.splitlines()) == 1, err
    assert "import: LlamaForCausalLM: sequence_parallel at model.layers.0.self_attn: " in err
    assert "does not work token by token" in err and "as one sequence" in err
    assert leftovers(tmp_path, "out") == []
