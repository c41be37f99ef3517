"""Recipes for `tprules import torch` written by the tests: torch_models.py copied beside a
recipe file that imports it (a sibling module) and states a PLAN in torch's own API."""

from __future__ import annotations

import shutil
from pathlib import Path

HEADER = """from torch.distributed.tensor import Partial, Replicate, Shard
from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, PrepareModuleInputOutput,
                                               PrepareModuleOutput, RowwiseParallel, SequenceParallel)
from torch_models import build, example
"""

BODY = """

def model():
    return build({kind!r})


def inputs(batch=2, seq=8{seed}):
    return example({kind!r}, batch, seq{seed_arg})


PLAN = {plan}
"""


def write_recipe(folder: Path, kind: str, plan: str, seed: bool = True, name: str = "recipe.py",
                 extra: str = "") -> Path:
    """A recipe file for model `kind` (torch_models.build) with `plan` (Python source of the dict)."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(Path(__file__).with_name("torch_models.py"), folder / "torch_models.py")
    path = folder / name
    path.write_text(HEADER + extra + BODY.format(kind=kind, plan=plan, seed=", seed=0" if seed else "",
                                                  seed_arg=", seed" if seed else ""))
    return path


# torchtitan's Llama plan (parallelize_llama's apply_tp: sequence parallel on, loss parallel off)
TITAN = """{
    "tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
    "norm": SequenceParallel(),
    "output": ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate()),
    "layers.*.attention_norm": SequenceParallel(),
    "layers.*.attention": PrepareModuleInput(input_layouts=(Shard(1), None), desired_input_layouts=(Replicate(), None)),
    "layers.*.attention.wq": ColwiseParallel(),
    "layers.*.attention.wk": ColwiseParallel(),
    "layers.*.attention.wv": ColwiseParallel(),
    "layers.*.attention.wo": RowwiseParallel(output_layouts=Shard(1)),
    "layers.*.ffn_norm": SequenceParallel(),
    "layers.*.feed_forward": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
    "layers.*.feed_forward.w1": ColwiseParallel(),
    "layers.*.feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
    "layers.*.feed_forward.w3": ColwiseParallel(),
}"""

# the same layers without sequence parallel: each rowwise projection all-reduced
MEGATRON_LAYERS = """
    "layers.*.attention.w[qkv]": ColwiseParallel(),
    "layers.*.attention.wo": RowwiseParallel(),
    "layers.*.feed_forward.w1": ColwiseParallel(),
    "layers.*.feed_forward.w3": ColwiseParallel(),
    "layers.*.feed_forward.w2": RowwiseParallel(),
"""
