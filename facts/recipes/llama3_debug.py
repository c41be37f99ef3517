"""`tprules import torch` recipe: a small torchtitan-style Llama 3 with torchtitan's TP plan.

    $ tprules import torch facts/recipes/llama3_debug.py --tp 2 --out /tmp/llama3-tp2

8 query heads over 4 KV heads (GQA, two query heads a KV head) so that TP 2 and 4 each
give a chip whole KV heads, as torchtitan requires; complex rotary; seeded weights.
"""

from __future__ import annotations

import torch
from torchtitan_llama3 import ModelArgs, Transformer, token_ids, tp_plan

ARGS = ModelArgs(dim=64, n_layers=2, n_heads=8, n_kv_heads=4, vocab_size=128, multiple_of=32,
                 rope_theta=500000, max_seq_len=256)


def model(args: ModelArgs = ARGS) -> Transformer:
    """The model with torchtitan's initialisation from seed 0; the norms' weights drawn
    around 1 (torchtitan starts them at 1) so that a misplaced norm weight shows."""
    torch.manual_seed(0)
    m = Transformer(args)
    if m.output.weight.device.type == "meta":
        return m
    m.init_weights()
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.endswith("norm.weight"):
                p.normal_(1.0, 0.1)
    return m.eval()


def inputs(seq: int = 8, batch: int = 1, seed: int = 0) -> tuple[torch.Tensor]:
    return token_ids(ARGS, seq, batch, seed)


PLAN = tp_plan()
