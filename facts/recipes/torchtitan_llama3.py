"""A torchtitan-style Llama 3, and the tensor-parallel plan torchtitan's `parallelize_llama` applies to it.

Written after torchtitan's `torchtitan/models/llama3/model/model.py` and `infra/parallelize.py`
(the form of October 2025, before the model moved to config classes): the same module
tree and names (`tok_embeddings`, `layers` a ModuleDict keyed "0", "1", ..., each with
`attention_norm`, `attention.{wq,wk,wv,wo}`, `ffn_norm`, `feed_forward.{w1,w2,w3}`; `norm`,
`output`), the same arithmetic (complex rotary from a `freqs_cis` buffer made by
`torch.polar`, with Llama 3's frequency scaling; GQA by `repeat_kv`; causal SDPA; SwiGLU),
so that what `tprules import torch` reads of it is what torchtitan would run.

The recipes beside this file (llama3_debug.py, llama3_70b.py) build it and hand
`tp_plan()` to the importer. Nothing here depends on tprules.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class RoPEScalingArgs:
    """Llama 3.1's stretching of the long RoPE wavelengths (torchtitan applies it always)."""

    scaling_factor: float = 8.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position_embeddings: int = 8192


@dataclass
class ModelArgs:
    """torchtitan's TransformerModelArgs (the fields the forward reads)."""

    dim: int = 4096
    n_layers: int = 32
    n_heads: int = 32
    n_kv_heads: int | None = None
    vocab_size: int = 128256
    multiple_of: int = 256  # the SwiGLU hidden size is rounded up to a multiple of this
    ffn_dim_multiplier: float | None = None
    norm_eps: float = 1e-5
    rope_theta: float = 10000
    rope_scaling_args: RoPEScalingArgs = field(default_factory=RoPEScalingArgs)
    max_seq_len: int = 131072
    depth_init: bool = True
    # Not torchtitan's: how the KV heads are repeated for GQA. "expand" is torchtitan's
    # repeat_kv (unsqueeze, expand, reshape); "interleave" is the torch.repeat_interleave its
    # docstring says that equals, so that tests import both forms of the same program.
    kv_repeat: str = "expand"


def precompute_freqs_cis(dim: int, end: int, theta: float = 10000.0,
                         scaling: RoPEScalingArgs | None = None) -> torch.Tensor:
    """The rotary table: for each position t < end and pair i < dim/2, e^(i·t·f_i) as complex64."""
    scaling = scaling or RoPEScalingArgs()
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: dim // 2].float() / dim))
    wavelen = 2 * math.pi / freqs
    high_wavelen = scaling.original_max_position_embeddings / scaling.high_freq_factor
    low_wavelen = scaling.original_max_position_embeddings / scaling.low_freq_factor
    # long wavelengths divided by the factor, short ones kept, the band between interpolated
    scaled = torch.where(wavelen > low_wavelen, freqs / scaling.scaling_factor, freqs)
    smooth = (scaling.original_max_position_embeddings / wavelen - scaling.low_freq_factor) / (
        scaling.high_freq_factor - scaling.low_freq_factor)
    smoothed = (1 - smooth) * scaled / scaling.scaling_factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
    freqs = torch.where(medium, smoothed, scaled)
    t = torch.arange(end, device=freqs.device)
    angles = torch.outer(t, freqs).float()
    return torch.polar(torch.ones_like(angles), angles)


def reshape_for_broadcast(freqs_cis: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """The first seqlen rows of the table, shaped [1, seqlen, 1, pairs] against x [b, seqlen, heads, pairs]."""
    seqlen = x.shape[1]
    table = freqs_cis[0:seqlen]
    assert table.shape == (seqlen, x.shape[-1])
    shape = [d if i == 1 or i == x.ndim - 1 else 1 for i, d in enumerate(x.shape)]
    return table.view(*shape)


def apply_rotary_emb(xq: torch.Tensor, xk: torch.Tensor, freqs_cis: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate each (even, odd) pair of q and k as a complex number times the table's."""
    q = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    k = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    table = reshape_for_broadcast(freqs_cis, q)
    q_out = torch.view_as_real(q * table).flatten(3)
    k_out = torch.view_as_real(k * table).flatten(3)
    return q_out.type_as(xq), k_out.type_as(xk)


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """Each KV head n_rep times in a row along axis 2: torch.repeat_interleave(x, n_rep, dim=2)."""
    bs, slen, n_kv_heads, head_dim = x.shape
    if n_rep == 1:
        return x
    return x.unsqueeze(3).expand(bs, slen, n_kv_heads, n_rep, head_dim).reshape(bs, slen, n_kv_heads * n_rep, head_dim)


class ScaledDotProductAttention(nn.Module):
    """torchtitan's SDPA wrapper: causal, the default scale."""

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


class Attention(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.n_heads = args.n_heads
        self.n_kv_heads = args.n_heads if args.n_kv_heads is None else args.n_kv_heads
        self.n_rep = self.n_heads // self.n_kv_heads
        self.head_dim = args.dim // args.n_heads
        self.kv_repeat = args.kv_repeat
        self.wq = nn.Linear(args.dim, args.n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(args.dim, self.n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(args.dim, self.n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(args.n_heads * self.head_dim, args.dim, bias=False)
        self.sdpa = ScaledDotProductAttention()

    def init_weights(self, init_std: float) -> None:
        for linear in (self.wq, self.wk, self.wv):
            nn.init.trunc_normal_(linear.weight, mean=0.0, std=0.02)
        nn.init.trunc_normal_(self.wo.weight, mean=0.0, std=init_std)

    def forward(self, x: torch.Tensor, freqs_cis: torch.Tensor) -> torch.Tensor:
        bs, seqlen, _ = x.shape
        xq, xk, xv = self.wq(x), self.wk(x), self.wv(x)
        # -1, not the head count: under TP each chip holds its share of the heads
        xq = xq.view(bs, seqlen, -1, self.head_dim)
        xk = xk.view(bs, seqlen, -1, self.head_dim)
        xv = xv.view(bs, seqlen, -1, self.head_dim)
        xq, xk = apply_rotary_emb(xq, xk, freqs_cis)
        keys, values = self._repeat(xk), self._repeat(xv)
        out = self.sdpa(xq.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2))
        out = out.transpose(1, 2).contiguous().view(bs, seqlen, -1)
        return self.wo(out)

    def _repeat(self, x: torch.Tensor) -> torch.Tensor:
        if self.kv_repeat == "interleave":
            return torch.repeat_interleave(x, self.n_rep, dim=2)
        return repeat_kv(x, self.n_rep)


def ffn_hidden(dim: int, multiple_of: int, multiplier: float | None) -> int:
    """torchtitan's SwiGLU width: 2/3 of 4·dim, times the multiplier, rounded up to `multiple_of`."""
    hidden = int(2 * (4 * dim) / 3)
    if multiplier is not None:
        hidden = int(multiplier * hidden)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


class FeedForward(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def init_weights(self, init_std: float) -> None:
        nn.init.trunc_normal_(self.w1.weight, mean=0.0, std=0.02)
        for linear in (self.w2, self.w3):
            nn.init.trunc_normal_(linear.weight, mean=0.0, std=init_std)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, layer_id: int, args: ModelArgs):
        super().__init__()
        self.attention = Attention(args)
        self.feed_forward = FeedForward(args.dim, ffn_hidden(args.dim, args.multiple_of, args.ffn_dim_multiplier))
        self.attention_norm = nn.RMSNorm(args.dim, eps=args.norm_eps)
        self.ffn_norm = nn.RMSNorm(args.dim, eps=args.norm_eps)
        depth = layer_id + 1 if args.depth_init else args.n_layers
        self.weight_init_std = 0.02 / (2 * depth) ** 0.5

    def init_weights(self) -> None:
        for norm in (self.attention_norm, self.ffn_norm):
            norm.reset_parameters()
        self.attention.init_weights(self.weight_init_std)
        self.feed_forward.init_weights(self.weight_init_std)

    def forward(self, x: torch.Tensor, freqs_cis: torch.Tensor) -> torch.Tensor:
        h = x + self.attention(self.attention_norm(x), freqs_cis)
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    """tokens [batch, seq] → logits [batch, seq, vocab]."""

    def __init__(self, args: ModelArgs):
        super().__init__()
        self.args = args
        self.tok_embeddings = nn.Embedding(args.vocab_size, args.dim)
        table = precompute_freqs_cis(args.dim // args.n_heads, args.max_seq_len, args.rope_theta, args.rope_scaling_args)
        self.register_buffer("freqs_cis", table, persistent=False)
        self.layers = nn.ModuleDict({str(i): TransformerBlock(i, args) for i in range(args.n_layers)})
        self.norm = nn.RMSNorm(args.dim, eps=args.norm_eps)
        self.output = nn.Linear(args.dim, args.vocab_size, bias=False)

    def init_weights(self) -> None:
        """torchtitan's initialisation (embeddings N(0, 1); the output truncated at 3σ, σ = dim^-½)."""
        nn.init.normal_(self.tok_embeddings.weight)
        for layer in self.layers.values():
            layer.init_weights()
        self.norm.reset_parameters()
        std = self.args.dim ** -0.5
        nn.init.trunc_normal_(self.output.weight, mean=0.0, std=std, a=-3 * std, b=3 * std)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.tok_embeddings(tokens)
        for layer in self.layers.values():
            h = layer(h, self.freqs_cis)
        return self.output(self.norm(h))


def token_ids(args: ModelArgs, seq: int, batch: int, seed: int) -> tuple[torch.Tensor]:
    """A recipe's inputs(): token ids [batch, seq] drawn from `seed` (zeros of that shape on
    the meta device, where the importer calls it under --no-data)."""
    if torch.empty(0).device.type == "meta":
        return (torch.zeros(batch, seq, dtype=torch.int64),)
    g = torch.Generator().manual_seed(seed)
    return (torch.randint(0, args.vocab_size, (batch, seq), generator=g),)


def tp_plan(loss_parallel: bool = False) -> dict:
    """torchtitan's `apply_tp` as one `parallelize_module` plan: sequence parallel on (the norms
    and residuals on sequence shards), float8 tensorwise TP off (torch's own styles; async TP
    is a compile-time switch and changes no style). torchtitan applies the top entries to the
    model and the `layers.*` ones to each block in turn: the same styles on the same modules."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        PrepareModuleInput,
        RowwiseParallel,
        SequenceParallel,
    )

    plan = {
        "tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
        "norm": SequenceParallel(),
        "output": ColwiseParallel(input_layouts=Shard(1), output_layouts=Shard(-1) if loss_parallel else Replicate(),
                                  use_local_output=not loss_parallel),
    }
    layer = {
        "attention_norm": SequenceParallel(),
        "attention": PrepareModuleInput(input_layouts=(Shard(1), None), desired_input_layouts=(Replicate(), None)),
        "attention.wq": ColwiseParallel(),
        "attention.wk": ColwiseParallel(),
        "attention.wv": ColwiseParallel(),
        "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
        "ffn_norm": SequenceParallel(),
        "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "feed_forward.w1": ColwiseParallel(),
        "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
        "feed_forward.w3": ColwiseParallel(),
    }
    plan.update({f"layers.*.{name}": style for name, style in layer.items()})
    return plan
