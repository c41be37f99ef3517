"""Llama-shaped TP programs: the example `llama-layer-tp4` and the model-scale benchmarks.

One decoder layer is rmsnorm, attention with its heads split over the chips (q, k, v
matmuls, scores, scale, softmax, weighted values, output projection), an all-reduce, a
residual add, rmsnorm, a SwiGLU MLP with its columns split over the chips, an
all-reduce and a residual add. A model chains layers, each reading the previous one's
output.

>>> b = llama_model(layers=2, shape=LlamaShape(tp=2, seq=4, hidden=8, heads=2, ffn=8))
>>> len(b.statements), len({f for f, _ in b.facts["member"]})
(68, 86)
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ops import Ops
from .builder import ProgramBuilder


@dataclass(frozen=True)
class LlamaShape:
    tp: int  # chips
    seq: int
    hidden: int
    heads: int
    ffn: int
    # True: kt = transpose(k) is its own statement and qk reads kt (the example);
    # False: qk reads k with `transpose_b 1`, as compilers emit it (the benchmarks).
    transpose_statement: bool = True


# Real model sizes (Llama 3 70B and 405B); nothing is executed, so shapes cost nothing.
LLAMA_70B = LlamaShape(tp=8, seq=2048, hidden=8192, heads=64, ffn=28672, transpose_statement=False)
LLAMA_405B = LlamaShape(tp=16, seq=2048, hidden=16384, heads=128, ffn=53248, transpose_statement=False)


def llama_layer(b: ProgramBuilder, x: str, shape: LlamaShape, prefix: str = "", out: str = "out") -> str:
    """Add one decoder layer reading spine tensor `x`; returns the spine tensor `out` it writes.

    Every statement and every tensor the layer declares is named `prefix + name`.
    """
    tp, seq, hidden = shape.tp, shape.seq, shape.hidden
    p = prefix
    d = hidden // shape.heads  # head size
    width = shape.heads // tp * d  # attention columns per chip
    part = shape.ffn // tp
    xn = b.stmt(f"{p}rms1", Ops.RMSNORM, [x, b.tensor(f"{p}w_ln1", [hidden], spine=True)],
                b.tensor(f"{p}xn", [seq, hidden], spine=True), eps="1e-6")
    attn_partials, mlp_partials = [], []
    for c in range(tp):
        q = b.stmt(f"{p}q_{c}", Ops.MATMUL, [xn, b.tensor(f"{p}wq_{c}", [hidden, width], chip=c)],
                   b.tensor(f"{p}q{c}", [seq, width], chip=c))
        k = b.stmt(f"{p}k_{c}", Ops.MATMUL, [xn, b.tensor(f"{p}wk_{c}", [hidden, width], chip=c)],
                   b.tensor(f"{p}k{c}", [seq, width], chip=c))
        v = b.stmt(f"{p}v_{c}", Ops.MATMUL, [xn, b.tensor(f"{p}wv_{c}", [hidden, width], chip=c)],
                   b.tensor(f"{p}v{c}", [seq, width], chip=c))
        if shape.transpose_statement:
            kt = b.stmt(f"{p}kt_{c}", Ops.TRANSPOSE, [k], b.tensor(f"{p}kt{c}", [width, seq], chip=c))
            s = b.stmt(f"{p}qk_{c}", Ops.MATMUL, [q, kt], b.tensor(f"{p}s{c}", [seq, seq], chip=c))
        else:
            s = b.stmt(f"{p}qk_{c}", Ops.MATMUL, [q, k], b.tensor(f"{p}s{c}", [seq, seq], chip=c), transpose_b=1)
        ss = b.stmt(f"{p}scale_{c}", Ops.SCALE, [s], b.tensor(f"{p}ss{c}", [seq, seq], chip=c),
                    factor=f"{d ** -0.5:.6g}")
        pr = b.stmt(f"{p}softmax_{c}", Ops.SOFTMAX, [ss], b.tensor(f"{p}p{c}", [seq, seq], chip=c))
        o = b.stmt(f"{p}pv_{c}", Ops.MATMUL, [pr, v], b.tensor(f"{p}o{c}", [seq, width], chip=c))
        attn_partials.append(b.stmt(f"{p}wo_{c}", Ops.MATMUL, [o, b.tensor(f"{p}wo{c}", [width, hidden], chip=c)],
                                    b.tensor(f"{p}attn{c}", [seq, hidden], chip=c)))
    attn = b.fold(f"{p}ar_attn", attn_partials, b.tensor(f"{p}attn", [seq, hidden], spine=True), f"{p}attn_out")
    h = b.stmt(f"{p}res1", Ops.ADD, [x, attn], b.tensor(f"{p}h", [seq, hidden], spine=True))
    hn = b.stmt(f"{p}rms2", Ops.RMSNORM, [h, b.tensor(f"{p}w_ln2", [hidden], spine=True)],
                b.tensor(f"{p}hn", [seq, hidden], spine=True), eps="1e-6")
    for c in range(tp):
        g = b.stmt(f"{p}gate_{c}", Ops.MATMUL, [hn, b.tensor(f"{p}wg_{c}", [hidden, part], chip=c)],
                   b.tensor(f"{p}g{c}", [seq, part], chip=c))
        u = b.stmt(f"{p}up_{c}", Ops.MATMUL, [hn, b.tensor(f"{p}wu_{c}", [hidden, part], chip=c)],
                   b.tensor(f"{p}u{c}", [seq, part], chip=c))
        sg = b.stmt(f"{p}silu_{c}", Ops.SILU, [g], b.tensor(f"{p}sg{c}", [seq, part], chip=c))
        m = b.stmt(f"{p}swiglu_{c}", Ops.MUL, [sg, u], b.tensor(f"{p}m{c}", [seq, part], chip=c))
        mlp_partials.append(b.stmt(f"{p}down_{c}", Ops.MATMUL, [m, b.tensor(f"{p}wd_{c}", [part, hidden], chip=c)],
                                   b.tensor(f"{p}dn{c}", [seq, hidden], chip=c)))
    mlp = b.fold(f"{p}ar_mlp", mlp_partials, b.tensor(f"{p}mlp", [seq, hidden], spine=True), f"{p}mlp_out")
    return b.stmt(f"{p}res2", Ops.ADD, [h, mlp], b.tensor(out, [seq, hidden], spine=True))


def producer_consumer_candidates(b: ProgramBuilder) -> None:
    """A candidate `PRODUCER__CONSUMER` for every producer → consumer pair of statements."""
    readers: dict[str, list[str]] = {}
    for o, _, t in b.facts["reads"]:
        readers.setdefault(t, []).append(o)
    for o, t in b.facts["writes"]:
        for consumer in dict.fromkeys(readers.get(t, [])):
            b.candidate(f"{o}__{consumer}", [o, consumer])


def llama_model(layers: int, shape: LlamaShape) -> ProgramBuilder:
    """`layers` decoder layers chained on the spine, with a candidate for every producer → consumer pair.

    Layer i's statements and tensors are prefixed `L<i>_`; the model reads `x` and writes `out`.
    """
    b = ProgramBuilder(chips=shape.tp)
    x = b.tensor("x", [shape.seq, shape.hidden], spine=True)
    for i in range(layers):
        x = llama_layer(b, x, shape, prefix=f"L{i}_", out="out" if i == layers - 1 else f"L{i}_out")
    producer_consumer_candidates(b)
    return b
