"""Two front doors, one program: a tiny Llama imported by `import hf` under its own plan and
by `import torch` from a recipe whose model() is the same transformers model and whose PLAN
is that plan in torch's API gives the same facts. The one difference is the output's name:
`import hf` names it `logits` (frontends/graph.OUTPUT), `import torch` `output`
(drivers/recipe.OUTPUT, expected/output.npy), and with it the gather that makes it whole."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("torch")

# transformers' Llama plan (the class's lm_head entry, the input embedding's
# `embedding_rowwise` and the config's base_model_tp_plan under `model.`) in torch's own API
RECIPE = '''
import numpy as np
import torch
from torch.distributed.tensor import Replicate
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel
from transformers import LlamaForCausalLM


class Logits(LlamaForCausalLM):
    """transformers' Llama, its forward returning the logits (import torch imports one tensor)."""

    def forward(self, input_ids):
        return super().forward(input_ids=input_ids, use_cache=False).logits


def model():
    return Logits.from_pretrained({folder!r}, attn_implementation="eager", dtype=torch.float32)


def inputs(batch=1, seq=8, seed=0):
    return (torch.from_numpy(np.random.default_rng(seed).integers(0, 128, size=(batch, seq))),)


PLAN = {{
    "lm_head": ColwiseParallel(output_layouts=Replicate()),                # colwise_gather_output
    "model.embed_tokens": RowwiseParallel(input_layouts=Replicate()),      # embedding_rowwise
    "model.layers.*.self_attn.q_proj": ColwiseParallel(),
    "model.layers.*.self_attn.k_proj": ColwiseParallel(),
    "model.layers.*.self_attn.v_proj": ColwiseParallel(),
    "model.layers.*.self_attn.o_proj": RowwiseParallel(),
    "model.layers.*.mlp.gate_proj": ColwiseParallel(),
    "model.layers.*.mlp.up_proj": ColwiseParallel(),
    "model.layers.*.mlp.down_proj": RowwiseParallel(),
}}
'''

OUTPUT_NAME = re.compile(r"(allgather_)?output(@\d+)?")  # the torch program's output, its gather and its parts


def _as_hf(field: str) -> str:
    """A field of the torch program's facts with its output named as import hf names it (a
    candidate's name `A__B` part by part)."""
    return "__".join(part.replace("output", "logits") if OUTPUT_NAME.fullmatch(part) else part
                     for part in field.split("__"))


@pytest.fixture(scope="module")
def doors(hf_model, tmp_path_factory):
    """(import hf's folder, import torch's folder) of one tiny Llama at TP 2."""
    from tprules.frontends.drivers.hf import import_hf
    from tprules.frontends.drivers.recipe import import_torch

    work = tmp_path_factory.mktemp("doors")
    folder = hf_model("llama")
    (work / "recipe.py").write_text(RECIPE.format(folder=str(folder)))
    import_hf(folder, 2, work / "hf")
    import_torch(work / "recipe.py", 2, work / "torch")
    return work / "hf", work / "torch"


def test_both_doors_write_the_same_relations(doors):
    hf, torch = doors
    assert sorted(p.name for p in hf.glob("*.facts")) == sorted(p.name for p in torch.glob("*.facts"))


def test_the_facts_are_the_same_but_the_outputs_name(doors):
    hf, torch = doors
    for path in sorted(hf.glob("*.facts")):
        want = path.read_text().splitlines()
        got = ["\t".join(map(_as_hf, line.split("\t"))) for line in (torch / path.name).read_text().splitlines()]
        assert got == want, path.name


def test_the_difference_is_the_outputs_name_alone(doors):
    """Unrenamed, every field that differs names the torch program's output, its gather or
    a chip's part of it (a candidate's name: one of its parts), row for row."""
    hf, torch = doors
    relations, fields = set(), set()
    for path in sorted(hf.glob("*.facts")):
        for x, y in zip(path.read_text().splitlines(), (torch / path.name).read_text().splitlines()):
            pairs = [(f, g) for f, g in zip(x.split("\t"), y.split("\t")) if f != g]
            if pairs:
                relations.add(path.stem)
                fields |= {g for _, g in pairs}
    assert relations == {"attr", "fold", "member", "op", "placed", "reads", "shape", "spine", "tensor", "writes"}
    assert all(any(OUTPUT_NAME.fullmatch(part) for part in g.split("__")) for g in fields), sorted(fields)
