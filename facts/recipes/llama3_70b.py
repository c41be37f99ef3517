"""`tprules import torch` recipe: Llama-3-70B's shape (torchtitan's "70B" flavour) with
torchtitan's TP plan, for full-size imports with no weights:

    $ tprules import torch facts/recipes/llama3_70b.py --tp 8 --no-data --no-verify --out /tmp/llama3-70b-tp8

dim 8192, 80 layers, 64 query heads over 8 KV heads, SwiGLU width 28672 (2/3 of 4·8192,
times 1.3, rounded up to a multiple of 4096), vocabulary 128256, RoPE θ 500000, and the
sequence length torchtitan's 70B training config uses for the rotary table (8192).
"""

from __future__ import annotations

import torch
from torchtitan_llama3 import ModelArgs, Transformer, token_ids, tp_plan

ARGS = ModelArgs(dim=8192, n_layers=80, n_heads=64, n_kv_heads=8, vocab_size=128256, ffn_dim_multiplier=1.3,
                 multiple_of=4096, rope_theta=500000, max_seq_len=8192)


def model() -> Transformer:
    """The module as torchtitan builds it (on the meta device under --no-data, where the
    importer calls this); with weights only where the device holds them, from seed 0."""
    torch.manual_seed(0)
    m = Transformer(ARGS)
    if m.output.weight.device.type != "meta":
        m.init_weights()
    return m.eval()


def inputs(seq: int = 8, batch: int = 1, seed: int = 0) -> tuple[torch.Tensor]:
    return token_ids(ARGS, seq, batch, seed)


PLAN = tp_plan()
