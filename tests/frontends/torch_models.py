"""Small nn.Modules for `tprules import torch` (test_import_torch*.py): each test copies this
file beside its recipe, which imports it as a sibling module."""

from __future__ import annotations

import torch
from torch import nn

DIM, HEADS, VOCAB = 16, 4, 32


class MLP(nn.Module):
    def __init__(self, dim=DIM, hidden=2 * DIM):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden)
        self.w2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.w2(torch.relu(self.w1(x)))


class Attention(nn.Module):
    """Its forward takes the hidden state and an additive bias of the scores [seq, seq]."""

    def __init__(self):
        super().__init__()
        self.wq = nn.Linear(DIM, DIM, bias=False)
        self.wk = nn.Linear(DIM, DIM, bias=False)
        self.wv = nn.Linear(DIM, DIM, bias=False)
        self.wo = nn.Linear(DIM, DIM, bias=False)

    def forward(self, x, bias):
        b, s, _ = x.shape
        q = self.wq(x).view(b, s, -1, DIM // HEADS).transpose(1, 2)
        k = self.wk(x).view(b, s, -1, DIM // HEADS).transpose(1, 2)
        v = self.wv(x).view(b, s, -1, DIM // HEADS).transpose(1, 2)
        att = torch.softmax(q @ k.transpose(-1, -2) / (DIM // HEADS) ** 0.5 + bias, dim=-1)
        return self.wo((att @ v).transpose(1, 2).reshape(b, s, -1))


class FeedForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = nn.Linear(DIM, 2 * DIM, bias=False)
        self.w2 = nn.Linear(2 * DIM, DIM, bias=False)
        self.w3 = nn.Linear(DIM, 2 * DIM, bias=False)

    def forward(self, x):
        return self.w2(torch.nn.functional.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention_norm = nn.RMSNorm(DIM)
        self.attention = Attention()
        self.ffn_norm = nn.RMSNorm(DIM)
        self.feed_forward = FeedForward()

    def forward(self, x, bias):
        h = x + self.attention(self.attention_norm(x), bias)
        return h + self.feed_forward(self.ffn_norm(h))


class LM(nn.Module):
    """Embedding, two blocks, a final norm and an lm head: torchtitan's Llama in small, its
    causal mask built from the sequence length."""

    def __init__(self, layers=2):
        super().__init__()
        self.tok_embeddings = nn.Embedding(VOCAB, DIM)
        self.layers = nn.ModuleList([Block() for _ in range(layers)])
        self.norm = nn.RMSNorm(DIM)
        self.output = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, tokens):
        s = tokens.shape[1]
        bias = torch.full((s, s), float("-inf")).triu(1)
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = layer(h, bias)
        return self.output(self.norm(h))


class Normed(nn.Module):
    """A projection, a feed-forward between two norms, its input a float tensor [batch, seq, dim]."""

    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(DIM, DIM, bias=False)
        self.norm = nn.RMSNorm(DIM)
        self.ff = FeedForward()
        self.out_norm = nn.LayerNorm(DIM)

    def forward(self, x):
        h = self.inp(x)
        h = h + self.ff(self.norm(h))
        return self.out_norm(h)


class Headed(nn.Module):
    """An MLP with biases, then a head."""

    def __init__(self):
        super().__init__()
        self.mlp = MLP()
        self.head = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, x):
        return self.head(self.mlp(x))


class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Linear(DIM, DIM, bias=False)

    def forward(self, a, b):
        return self.w(a) * b


class Gated(nn.Module):
    """A module of two inputs of one shape: which is which cannot be told by shape."""

    def __init__(self):
        super().__init__()
        self.gate = Gate()

    def forward(self, x):
        return self.gate(x, torch.sigmoid(x))


def build(kind: str) -> nn.Module:
    torch.manual_seed(0)
    model = {"mlp": MLP, "lm": LM, "normed": Normed, "gated": Gated, "headed": Headed}[kind]()
    with torch.no_grad():  # norms off their ones: a weight read on the wrong chip shows
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(0.1 * torch.randn_like(p))
    return model


def example(kind: str, batch: int = 2, seq: int = 8, seed: int = 0) -> tuple:
    g = torch.Generator().manual_seed(seed)
    if kind == "lm":
        return (torch.randint(0, VOCAB, (batch, seq), generator=g),)
    return (torch.randn(batch, seq, DIM, generator=g),)
