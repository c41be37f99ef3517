"""Write a Llama-shaped TP program at model scale as a fact directory.

    python benchmarks/generate.py 70b OUT     # 80 layers, TP=8:  8,800 statements, 12,000 candidates
    python benchmarks/generate.py 405b OUT    # 126 layers, TP=16: 26,964 statements, 37,044 candidates
    python benchmarks/generate.py small OUT   # 2 layers, TP=2, for tests

Every producer → consumer pair of statements is a candidate fusion (`member.facts`).
The layers are those of the example `facts/llama-layer-tp4` (tprules/program/llama.py),
with `qk` reading `k` through `transpose_b 1` instead of a transpose statement.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from anywhere

from tprules.program.builder import ProgramBuilder  # noqa: E402
from tprules.program.llama import LLAMA_70B, LLAMA_405B, LlamaShape, llama_model  # noqa: E402

# name → (layers, shape)
SIZES: dict[str, tuple[int, LlamaShape]] = {
    "small": (2, LlamaShape(tp=2, seq=16, hidden=64, heads=4, ffn=128, transpose_statement=False)),
    "70b": (80, LLAMA_70B),
    "405b": (126, LLAMA_405B),
}


def build(size: str) -> ProgramBuilder:
    layers, shape = SIZES[size]
    return llama_model(layers, shape)


def generate(size: str, out: Path) -> ProgramBuilder:
    """Build the program of `size` and write it under `out`."""
    b = build(size)
    b.write(Path(out))
    return b


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in SIZES:
        print(f"usage: python benchmarks/generate.py {{{'|'.join(SIZES)}}} OUT", file=sys.stderr)
        return 2
    started = time.perf_counter()
    b = generate(argv[0], Path(argv[1]))
    fusions = len({f for f, _ in b.facts["member"]})
    print(f"wrote {argv[1]}: {len(b.statements)} statements, {len(b.shapes)} tensors, {fusions} candidates, "
          f"{b.chips} chips ({time.perf_counter() - started:.2f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
