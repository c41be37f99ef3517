"""Regenerate the example programs under facts/ (deterministic): `python facts/generate.py`.

Each example is a TP program with candidate fusions chosen to hit every reason of
SPEC §3 both where it holds and where it does not.
"""

from __future__ import annotations

import sys
from pathlib import Path

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
    # too_many_matmuls (+ cycle: mm1 → gelu → mm2 leaves and re-enters the fusion).
    b.candidate("mm1_mm2_0", ["mm1_0", "mm2_0"])
    # several reasons at once.
    b.candidate("everything", ["gelu_1", "mm2_0", "allreduce", "bias"])
    return b


EXAMPLES = {
    "megatron-mlp-tp2": lambda: megatron_mlp(2),
}


def main(names: list[str]) -> None:
    for name, make in EXAMPLES.items():
        if names and name not in names:
            continue
        make().write(HERE / name)
        print(f"wrote facts/{name}")


if __name__ == "__main__":
    main(sys.argv[1:])
