"""Regenerate the example programs under facts/ (deterministic): `python facts/generate.py`.

Each example is a TP program with candidate fusions chosen to hit every reason of
SPEC §3 both where it holds and where it does not.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tprules.program import llama
from tprules.program.builder import ProgramBuilder

HERE = Path(__file__).resolve().parent


def megatron_mlp(tp: int, seq: int = 8, hidden: int = 16, ffn: int = 64) -> ProgramBuilder:
    """Megatron MLP: column-parallel W1, GELU, row-parallel W2, all-reduce, bias, residual."""
    b = ProgramBuilder(chips=tp)
    x = b.tensor("x", [seq, hidden], spine=True)
    part = ffn // tp
    partials = []
    for c in range(tp):
        w1 = b.tensor(f"w1_{c}", [hidden, part], chip=c)
        w2 = b.tensor(f"w2_{c}", [part, hidden], chip=c)
        h = b.stmt(f"mm1_{c}", "matmul", [x, w1], b.tensor(f"h_{c}", [seq, part], chip=c))
        a = b.stmt(f"gelu_{c}", "gelu", [h], b.tensor(f"a_{c}", [seq, part], chip=c))
        partials.append(b.stmt(f"mm2_{c}", "matmul", [a, w2], b.tensor(f"p_{c}", [seq, hidden], chip=c)))
    y = b.fold("allreduce", partials, b.tensor("y", [seq, hidden], spine=True), "mlp_out")
    bias = b.tensor("b", [hidden], spine=True)
    z = b.stmt("bias", "add", [y, bias], b.tensor("z", [seq, hidden], spine=True))
    b.stmt("residual", "add", [z, x], b.tensor("out", [seq, hidden], spine=True))
    last = tp - 1
    # legal: a matmul with its GELU epilogue on one chip; GELU into the next matmul; spine pair.
    b.candidate("mm1_gelu_0", ["mm1_0", "gelu_0"])
    b.candidate(f"gelu_mm2_{last}", [f"gelu_{last}", f"mm2_{last}"])
    b.candidate("bias_residual", ["bias", "residual"])
    # spans_chips: the same stage on two chips.
    b.candidate("gelu_0_1", ["gelu_0", "gelu_1"])
    # collective_fold: a partial matmul into its all-reduce; the all-reduce into the bias.
    b.candidate("mm2_allreduce", ["mm2_0", "allreduce"])
    b.candidate("allreduce_bias", ["allreduce", "bias"])
    # chip_and_spine: chip 0's matmul with the spine's bias add.
    b.candidate("mm2_bias", ["mm2_0", "bias"])
    # cycle: mm1 → gelu → mm2 leaves and re-enters the fusion (two matmuls are within the
    # h100's max_matmuls of 2; on the rtx3060 shim this is too_many_matmuls as well).
    b.candidate("mm1_mm2_0", ["mm1_0", "mm2_0"])
    # several reasons at once.
    b.candidate("everything", ["gelu_1", "mm2_0", "allreduce", "bias"])
    return b


def llama_layer(tp: int = 4, seq: int = 8, hidden: int = 32, heads: int = 4, ffn: int = 64) -> ProgramBuilder:
    """One Llama decoder layer (tprules/program/llama.py): rmsnorm, attention (softmax),
    all-reduce, residual, rmsnorm, SwiGLU MLP (silu), all-reduce, residual. Attention heads
    and MLP columns split over chips."""
    b = ProgramBuilder(chips=tp)
    x = b.tensor("x", [seq, hidden], spine=True)
    llama.llama_layer(b, x, llama.LlamaShape(tp, seq, hidden, heads, ffn))
    llama.producer_consumer_candidates(b)
    # Beyond pairs: attention core on one chip (legal), the same stage across chips,
    # two matmuls, a path that leaves and re-enters, an oversized fusion, too many inputs.
    b.candidate("attn_core_0", ["qk_0", "scale_0", "softmax_0"])
    b.candidate("flash_0", ["qk_0", "scale_0", "softmax_0", "pv_0"])
    b.candidate("softmax_0_1", ["softmax_0", "softmax_1"])
    b.candidate("qkv_0", ["q_0", "k_0", "v_0"])
    b.candidate("k_qk_0", ["k_0", "qk_0"])
    b.candidate("whole_chip_0", [o for o in b.statements if o.endswith("_0")])
    b.candidate("silu_mlp_all", [f"silu_{c}" for c in range(tp)] + [f"swiglu_{c}" for c in range(tp)])
    b.candidate("residual_rms", ["res1", "rms2"])
    b.candidate("mlp_tail_0", ["swiglu_0", "down_0", "ar_mlp", "res2"])
    return b


def relocated_head(tp: int = 2, seq: int = 8, hidden: int = 16, vocab: int = 32) -> ProgramBuilder:
    """A TP MLP whose output head (logits and softmax over the spine's output) is a
    section relocated whole to chip 0."""
    b = megatron_mlp(tp, seq, hidden)
    b.facts["member"].clear()
    out = "out"
    w_head = b.tensor("w_head", [hidden, vocab], spine=True)
    logits = b.stmt("head", "matmul", [out, w_head], b.tensor("logits", [seq, vocab], spine=True))
    b.stmt("probs", "softmax", [logits], b.tensor("p", [seq, vocab], spine=True))
    b.section("lm_head", ["head", "probs"], relocated_to=0)
    b.section("mlp_chip1", ["mm1_1", "gelu_1"])  # a section that stays where it is
    b.stmt("pick", "mul", ["p", b.tensor("mask0", [seq, vocab], chip=0)], b.tensor("picked", [seq, vocab], chip=0))
    # legal: the relocated pair (both chip 0); relocated chip 0 work with chip 0 work.
    b.candidate("head_probs", ["head", "probs"])
    b.candidate("probs_pick", ["probs", "pick"])
    # cycle, though both run on chip 0: gelu_0's output reaches probs through the all-reduce.
    b.candidate("gelu0_probs", ["gelu_0", "probs"])
    # spans_chips: relocated chip 0 with chip 1; chip_and_spine: relocated with the spine.
    b.candidate("gelu1_probs", ["gelu_1", "probs"])
    b.candidate("residual_head", ["residual", "head"])
    b.candidate("bias_residual", ["bias", "residual"])
    b.candidate("mm1_gelu_1", ["mm1_1", "gelu_1"])
    return b


def int8_mlp(tp: int = 2, seq: int = 8, hidden: int = 16, ffn: int = 32) -> ProgramBuilder:
    """An MLP on the TwoPassInt8 shim, whose matmuls read operand 0 as int8 in two passes."""
    b = ProgramBuilder(chips=tp)
    b.add_facts("shim", [("cuda-lane:rtx3060:TwoPassInt8",)])
    x = b.tensor("x", [seq, hidden], spine=True)
    xn = b.stmt("norm", "rmsnorm", [x, b.tensor("w_ln", [hidden], spine=True)],
                b.tensor("xn", [seq, hidden], spine=True))
    partials = []
    part = ffn // tp
    for c in range(tp):
        h = b.stmt(f"mm1_{c}", "matmul", [xn, b.tensor(f"w1_{c}", [hidden, part], chip=c)],
                   b.tensor(f"h_{c}", [seq, part], chip=c))
        r = b.stmt(f"relu_{c}", "relu", [h], b.tensor(f"r_{c}", [seq, part], chip=c))
        sq = b.stmt(f"square_{c}", "mul", [r, r], b.tensor(f"sq_{c}", [seq, part], chip=c))
        partials.append(b.stmt(f"mm2_{c}", "matmul", [sq, b.tensor(f"w2_{c}", [part, hidden], chip=c)],
                               b.tensor(f"p_{c}", [seq, hidden], chip=c)))
    y = b.fold("allreduce", partials, b.tensor("y", [seq, hidden], spine=True), "mlp_out")
    inv = b.stmt("inv", "rsqrt", [b.tensor("var", [seq, 1], spine=True)], b.tensor("iv", [seq, 1], spine=True))
    z = b.stmt("rescale", "mul", [y, inv], b.tensor("z", [seq, hidden], spine=True))
    t = b.stmt("flip", "transpose", [z], b.tensor("zt", [hidden, seq], spine=True))
    b.stmt("sm", "softmax", [t], b.tensor("out", [hidden, seq], spine=True))
    prev = "r_0"
    for i in range(4):  # a chain of adds on chip 0, each with its own bias
        prev = b.stmt(f"addb{i}", "add", [prev, b.tensor(f"bias{i}", [seq, part], chip=0)],
                      b.tensor(f"e{i}", [seq, part], chip=0))
    prev = "r_1"
    for i in range(8):  # a chain of unary statements on chip 1
        prev = b.stmt(f"u{i}", ("neg", "exp")[i % 2], [prev], b.tensor(f"ue{i}", [seq, part], chip=1))
    # legal: an epilogue after a quantized matmul; quantized_inside: a producer fused into
    # the matmul that reads its output quantized.
    b.candidate("mm1_relu_0", ["mm1_0", "relu_0"])
    b.candidate("square_mm2_0", ["square_0", "mm2_0"])
    b.candidate("relu_square_0", ["relu_0", "square_0"])
    # unsupported (rsqrt is not built), not_fusible (transpose, softmax run alone).
    b.candidate("inv_rescale", ["inv", "rescale"])
    b.candidate("rescale_flip", ["rescale", "flip"])
    b.candidate("flip_sm", ["flip", "sm"])
    # too_many_inputs: four adds of chip 0 reading five outside tensors (the limit is 4).
    b.candidate("bias_chain", ["relu_0", "addb0", "addb1", "addb2", "addb3"])
    b.candidate("bias_pair", ["addb0", "addb1"])
    # too_many_members: nine statements (the limit is 8); eight are fine.
    b.candidate("unary_chain_9", ["relu_1"] + [f"u{i}" for i in range(8)])
    b.candidate("unary_chain_8", [f"u{i}" for i in range(8)])
    return b


def gather_mlp(tp: int = 2, seq: int = 8, hidden: int = 16, ffn: int = 32) -> ProgramBuilder:
    """A colwise-gather MLP (transformers' `colwise_gather_output`): column-parallel W1 and
    GELU on every chip, an all-gather of the activations into the spine, then a replicated
    W2 and a residual add on the spine."""
    b = ProgramBuilder(chips=tp)
    x = b.tensor("x", [seq, hidden], spine=True)
    part = ffn // tp
    slices = []
    for c in range(tp):
        h = b.stmt(f"mm1_{c}", "matmul", [x, b.tensor(f"w1_{c}", [hidden, part], chip=c)],
                   b.tensor(f"h_{c}", [seq, part], chip=c))
        slices.append(b.stmt(f"gelu_{c}", "gelu", [h], b.tensor(f"a_{c}", [seq, part], chip=c)))
    a = b.gather("allgather", slices, b.tensor("a", [seq, ffn], spine=True), "mlp_hidden", axis=1)
    y = b.stmt("mm2", "matmul", [a, b.tensor("w2", [ffn, hidden], spine=True)], b.tensor("y", [seq, hidden], spine=True))
    b.stmt("residual", "add", [y, x], b.tensor("out", [seq, hidden], spine=True))
    # legal: a matmul with its GELU epilogue on one chip; the spine's matmul with its residual.
    b.candidate("mm1_gelu_0", ["mm1_0", "gelu_0"])
    b.candidate("mm2_residual", ["mm2", "residual"])
    # collective_fold: a slice into its all-gather (a local concat); the all-gather into W2.
    b.candidate("gelu_allgather", ["gelu_0", "allgather"])
    b.candidate("allgather_mm2", ["allgather", "mm2"])
    # spans_chips: the same stage on two chips; chip_and_spine: a chip's GELU with the spine's W2.
    b.candidate("gelu_0_1", ["gelu_0", "gelu_1"])
    b.candidate("gelu_mm2", ["gelu_0", "mm2"])
    return b


def sp_mlp(tp: int = 2, seq: int = 8, hidden: int = 16, ffn: int = 32) -> ProgramBuilder:
    """A sequence-parallel MLP (Megatron's and torchtitan's sequence parallel): each chip
    holds its block of the tokens; they are all-gathered into the spine, a column-parallel
    W1 and GELU and a row-parallel W2 run on every chip, and W2's partial sums are
    reduce-scattered back onto the sequence blocks, where the residual add and the RMSNorm
    run on each chip's own tokens."""
    b = ProgramBuilder(chips=tp)
    rows, part = seq // tp, ffn // tp
    xs = [b.tensor(f"x_{c}", [rows, hidden], chip=c) for c in range(tp)]
    x = b.gather("allgather", xs, b.tensor("x", [seq, hidden], spine=True), "sp_in", axis=0)
    norm = b.tensor("norm_w", [hidden], spine=True)
    partials = []
    for c in range(tp):
        h = b.stmt(f"mm1_{c}", "matmul", [x, b.tensor(f"w1_{c}", [hidden, part], chip=c)],
                   b.tensor(f"h_{c}", [seq, part], chip=c))
        a = b.stmt(f"gelu_{c}", "gelu", [h], b.tensor(f"a_{c}", [seq, part], chip=c))
        partials.append(b.stmt(f"mm2_{c}", "matmul", [a, b.tensor(f"w2_{c}", [part, hidden], chip=c)],
                               b.tensor(f"p_{c}", [seq, hidden], chip=c)))
    ys = b.reduce_scatter("scatter", partials, b.tensor("y", [seq, hidden], spine=True), "sp_out", axis=0,
                          blocks=[b.tensor(f"y_{c}", [rows, hidden], chip=c) for c in range(tp)])
    for c in range(tp):
        r = b.stmt(f"residual_{c}", "add", [ys[c], xs[c]], b.tensor(f"r_{c}", [rows, hidden], chip=c))
        b.stmt(f"norm_{c}", "rmsnorm", [r, norm], b.tensor(f"out_{c}", [rows, hidden], chip=c))
    # legal: a chip's matmuls with the GELU between; its block of the sum with the residual and norm.
    b.candidate("mlp_0", ["mm1_0", "gelu_0", "mm2_0"])
    b.candidate("block_norm_0", ["scatter_0", "residual_0", "norm_0"])
    # collective_fold: a partial into its reduce-scatter (a local sum); the fold with a chip's slice.
    b.candidate("mm2_scatter", ["mm2_0", "scatter"])
    b.candidate("scatter_slice", ["scatter", "scatter_0"])
    # spans_chips: the same residual on two chips' blocks.
    b.candidate("residual_0_1", ["residual_0", "residual_1"])
    return b


def async_tp_mlp(tp: int = 2, seq: int = 2048, hidden: int = 16, ffn: int = 32) -> ProgramBuilder:
    """A sequence-parallel MLP and an all-reduce into a residual RMSNorm, with the candidates
    async TP makes (SPEC §3 "Collective kernels"): the all-gather of the tokens with the
    per-chip W1 matmuls reading it; the per-chip W2 matmuls with the reduce-scatter of their
    partials and its slices; a row-parallel projection's all-reduce with the residual add and
    RMSNorm after it (vLLM's fuse_allreduce_rms). Each chip's block of tokens is seq/tp =
    1024 rows, exactly the h200 shim's min_collective_block. Beside them: a colwise-gather
    projection gathered along its last axis, 8 wide per chip (too_narrow there), and a second
    reduce-scatter one of whose partials a probe also reads (shared_partial)."""
    b = ProgramBuilder(chips=tp)
    rows, part = seq // tp, ffn // tp
    xs = [b.tensor(f"x_{c}", [rows, hidden], chip=c) for c in range(tp)]
    x = b.gather("allgather", xs, b.tensor("x", [seq, hidden], spine=True), "sp_in", axis=0)
    partials, projections = [], []
    for c in range(tp):
        h = b.stmt(f"mm1_{c}", "matmul", [x, b.tensor(f"w1_{c}", [hidden, part], chip=c)],
                   b.tensor(f"h_{c}", [seq, part], chip=c))
        a = b.stmt(f"gelu_{c}", "gelu", [h], b.tensor(f"a_{c}", [seq, part], chip=c))
        partials.append(b.stmt(f"mm2_{c}", "matmul", [a, b.tensor(f"w2_{c}", [part, hidden], chip=c)],
                               b.tensor(f"p_{c}", [seq, hidden], chip=c)))
        projections.append(b.stmt(f"proj_{c}", "matmul", [a, b.tensor(f"wo_{c}", [part, hidden], chip=c)],
                                  b.tensor(f"q_{c}", [seq, hidden], chip=c)))
    ys = b.reduce_scatter("scatter", partials, b.tensor("y", [seq, hidden], spine=True), "sp_out", axis=0,
                          blocks=[b.tensor(f"y_{c}", [rows, hidden], chip=c) for c in range(tp)])
    for c in range(tp):
        b.stmt(f"residual_{c}", "add", [ys[c], xs[c]], b.tensor(f"r_{c}", [rows, hidden], chip=c))
    q = b.fold("allreduce", projections, b.tensor("q", [seq, hidden], spine=True), "proj_out")
    s = b.stmt("res", "add", [q, x], b.tensor("s", [seq, hidden], spine=True))
    n = b.stmt("norm", "rmsnorm", [s, b.tensor("norm_w", [hidden], spine=True)], b.tensor("n", [seq, hidden], spine=True))
    cols, outs = [], []
    for c in range(tp):
        cols.append(b.stmt(f"col_{c}", "matmul", [n, b.tensor(f"wc_{c}", [hidden, hidden // tp], chip=c)],
                           b.tensor(f"g_{c}", [seq, hidden // tp], chip=c)))
    g = b.gather("gather_cols", cols, b.tensor("g", [seq, hidden], spine=True), "cols", axis=-1)
    for c in range(tp):
        outs.append(b.stmt(f"down_{c}", "matmul", [g, b.tensor(f"wd_{c}", [hidden, hidden], chip=c)],
                           b.tensor(f"d_{c}", [seq, hidden], chip=c)))
    b.stmt("probe", "relu", [outs[0]], b.tensor("d_probe", [seq, hidden], chip=0))
    b.reduce_scatter("scatter2", outs, b.tensor("z", [seq, hidden], spine=True), "down_out", axis=0,
                     blocks=[b.tensor(f"z_{c}", [rows, hidden], chip=c) for c in range(tp)])
    every = range(tp)
    # Collective kernels: exactly a pattern (legal on the h200 shim, which declares all three;
    # collective_fold and spans_chips / chip_and_spine where the shim declares none).
    b.candidate("ag_mm1", ["allgather"] + [f"mm1_{c}" for c in every])
    b.candidate("mm2_rs", [f"mm2_{c}" for c in every] + ["scatter"] + [f"scatter_{c}" for c in every])
    b.candidate("ar_res_norm", ["allreduce", "res", "norm"])
    # The guards: a block 8 wide along the gathered last axis; a partial the probe reads too.
    b.candidate("ag_cols_down", ["gather_cols"] + [f"down_{c}" for c in every])
    b.candidate("down_rs2", [f"down_{c}" for c in every] + ["scatter2"] + [f"scatter2_{c}" for c in every])
    # Not exactly a pattern, answered as without collective kernels: one member more, one chip
    # short, the slices left out, the norm without the residual add between.
    b.candidate("ag_mm1_gelu", ["allgather"] + [f"mm1_{c}" for c in every] + ["gelu_0"])
    b.candidate("ag_mm1_0", ["allgather", "mm1_0"])
    b.candidate("mm2_scatter", [f"mm2_{c}" for c in every] + ["scatter"])
    b.candidate("ar_res", ["allreduce", "res"])
    # legal everywhere: a chip's MLP, the spine's residual and norm.
    b.candidate("mlp_0", ["mm1_0", "gelu_0", "mm2_0"])
    b.candidate("res_norm", ["res", "norm"])
    return b


H100, CPU, H200 = "cuda-lane:h100:Bf16", "cpu:x86:F32", "cuda-lane:h200:Bf16SymmMem"


def meant_for(b: ProgramBuilder, *shims: str) -> ProgramBuilder:
    """Declare the shims a program is meant for in its own shim.facts (the golden snapshots
    cover each; `check` without --shim still asks the default shim when there are several)."""
    b.add_facts("shim", [(s,) for s in shims])
    return b


EXAMPLES = {
    # The f32 examples run on the CPU reference backend too; the CPU shim runs transpose alone.
    "megatron-mlp-tp2": lambda: meant_for(megatron_mlp(2), H100, CPU),
    "megatron-mlp-tp4": lambda: megatron_mlp(4),
    "llama-layer-tp4": lambda: meant_for(llama_layer(4), H100, CPU),
    "relocated-head-tp2": lambda: relocated_head(2),
    "int8-mlp-tp2": lambda: int8_mlp(2),
    "gather-mlp-tp2": lambda: meant_for(gather_mlp(2), H100, CPU),
    "sp-mlp-tp2": lambda: meant_for(sp_mlp(2), H100, CPU),
    # The shim that declares collective kernels, and one that declares none.
    "async-tp-mlp-tp2": lambda: meant_for(async_tp_mlp(2), H200, H100),
}


def main(names: list[str]) -> None:
    for name, make in EXAMPLES.items():
        if names and name not in names:
            continue
        make().write(HERE / name)
        print(f"wrote facts/{name}")


if __name__ == "__main__":
    main(sys.argv[1:])
