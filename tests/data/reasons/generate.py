"""Rewrite the reason cases: `python tests/data/reasons/generate.py`.

For each reason of SPEC §3, tests/data/reasons/<reason>/<variant>/ holds a minimal program
(its .facts, one candidate `f`) and the verdict worked out by hand in expected/legal.tsv
and expected/refused.tsv. Variant `holds` is a program where the reason holds, `not` a
near-identical one where it does not; `holds-*` and `not-*` are further edges. The folders
are the test data; this script documents how they were made.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from tprules.program.builder import ProgramBuilder  # noqa: E402
from tprules.shim.base import own_shim as declare_own_shim  # noqa: E402

H100, INT8, CPU = "cuda-lane:h100:Bf16", "cuda-lane:rtx3060:TwoPassInt8", "cpu:x86:F32"
H200 = "cuda-lane:h200:Bf16SymmMem"  # declares every collective kernel; min_collective_block 1024


def tp_program(shim: str = H100, pre2: str = "neg", section=None, relocated_to=None) -> ProgramBuilder:
    """pre (spine) feeds a column-parallel matmul on chips 0 and 1, GELU, an all-reduce, two
    spine statements after it; pre2 is a spine side branch of pre.

        pre: xr = relu(x)          pre2: xq = <pre2>(xr)
        mm0: h0 = xr @ w0  (chip 0)    mm1: h1 = xr @ w1  (chip 1)
        g0:  a0 = gelu(h0) (chip 0)    g1:  a1 = gelu(h1) (chip 1)
        ar:  y = a0 + a1   (the fold)
        act: z = relu(y)           act2: u = neg(z)
    """
    b = ProgramBuilder(chips=2)
    b.add_facts("shim", [(shim,)])
    x = b.tensor("x", [2, 4], spine=True)
    xr = b.stmt("pre", "relu", [x], b.tensor("xr", [2, 4], spine=True))
    b.stmt("pre2", pre2, [xr], b.tensor("xq", [2, 4], spine=True))
    for c in (0, 1):
        h = b.stmt(f"mm{c}", "matmul", [xr, b.tensor(f"w{c}", [4, 4], chip=c)], b.tensor(f"h{c}", [2, 4], chip=c))
        b.stmt(f"g{c}", "gelu", [h], b.tensor(f"a{c}", [2, 4], chip=c))
    y = b.fold("ar", ["a0", "a1"], b.tensor("y", [2, 4], spine=True), "out")
    z = b.stmt("act", "relu", [y], b.tensor("z", [2, 4], spine=True))
    b.stmt("act2", "neg", [z], b.tensor("u", [2, 4], spine=True))
    if section:
        b.section("s", section, relocated_to=relocated_to)
    return b


def chain_program(shim: str, length: int, views: tuple[int, ...] = ()) -> ProgramBuilder:
    """A chain of unary spine statements c0 .. c{length-1}; those in `views` are reshapes (a
    class the shims lower as a view, facts/shims/views.facts)."""
    b = ProgramBuilder(chips=2)
    b.add_facts("shim", [(shim,)])
    prev = b.tensor("x", [2, 4], spine=True)
    for i in range(length):
        cls = "reshape" if i in views else ("neg", "exp")[i % 2]
        prev = b.stmt(f"c{i}", cls, [prev], b.tensor(f"t{i}", [2, 4], spine=True))
    return b


def adds_program(shim: str, biases: list[str]) -> ProgramBuilder:
    """A chain of adds b0 .. bn, each adding a bias tensor: b_i = b_{i-1} + <bias i>."""
    b = ProgramBuilder(chips=2)
    b.add_facts("shim", [(shim,)])
    prev = b.tensor("x", [2, 4], spine=True)
    for k in dict.fromkeys(biases):
        b.tensor(k, [2, 4], spine=True)
    for i, k in enumerate(biases):
        prev = b.stmt(f"b{i}", "add", [prev, k], b.tensor(f"s{i}", [2, 4], spine=True))
    return b


def matmuls_program(shim: str) -> ProgramBuilder:
    """m0: h = x @ w0; m1: o = w1 @ h (h as operand 1, read unquantized everywhere); e: r = relu(h)."""
    b = ProgramBuilder(chips=2)
    b.add_facts("shim", [(shim,)])
    x, w0, w1 = (b.tensor(n, [4, 4], spine=True) for n in ("x", "w0", "w1"))
    h = b.stmt("m0", "matmul", [x, w0], b.tensor("h", [4, 4], spine=True))
    b.stmt("m1", "matmul", [w1, h], b.tensor("o", [4, 4], spine=True))
    b.stmt("e", "relu", [h], b.tensor("r", [4, 4], spine=True))
    return b


def quantized_program(shim: str, operand: int) -> ProgramBuilder:
    """p: t = relu(x); m: a matmul reading t as operand `operand` (operand 0 is quantized on INT8)."""
    b = ProgramBuilder(chips=2)
    b.add_facts("shim", [(shim,)])
    x, w = b.tensor("x", [4, 4], spine=True), b.tensor("w", [4, 4], spine=True)
    t = b.stmt("p", "relu", [x], b.tensor("t", [4, 4], spine=True))
    b.stmt("m", "matmul", [t, w] if operand == 0 else [w, t], b.tensor("o", [4, 4], spine=True))
    return b


def path_program() -> ProgramBuilder:
    """a: t1 = relu(x); b: t2 = neg(t1); c: t3 = add(t1, t2); d: t4 = exp(t1) (a side output)."""
    b = ProgramBuilder(chips=2)
    b.add_facts("shim", [(H100,)])
    x = b.tensor("x", [2, 4], spine=True)
    t1 = b.stmt("a", "relu", [x], b.tensor("t1", [2, 4], spine=True))
    t2 = b.stmt("b", "neg", [t1], b.tensor("t2", [2, 4], spine=True))
    b.stmt("c", "add", [t1, t2], b.tensor("t3", [2, 4], spine=True))
    b.stmt("d", "exp", [t1], b.tensor("t4", [2, 4], spine=True))
    return b


def own_shim(b: ProgramBuilder, name: str, patterns: tuple[str, ...], limits: dict[str, int]) -> ProgramBuilder:
    """The program describes its own shim `name`: every registry class fused, these limits,
    these collective kernels."""
    declare_own_shim(b, name, patterns, limits)
    return b


def gather_program(shim: str = H200, rows=(1024, 1024), axis: int = 0, operand: int = 0) -> ProgramBuilder:
    """An all-gather (chip k's x<k>, `rows[k]` rows) into the spine's x, then on every chip a
    matmul reading x as operand `operand` and GELU after it; a spine relu also reads x.

        ag:  x = cat(x0, x1)     mm<k>: h<k> = x @ w<k> (chip k)    g<k>: a<k> = gelu(h<k>)
    With `axis` 1 (or -1) the blocks are gathered along the last axis, `rows` wide."""
    b = ProgramBuilder(chips=2)
    b.add_facts("shim", [(shim,)])
    if axis == 0:
        xs = [b.tensor(f"x{c}", [n, 4], chip=c) for c, n in enumerate(rows)]
        x = b.gather("ag", xs, b.tensor("x", [sum(rows), 4], spine=True), "sp_in", axis=0)
    else:
        xs = [b.tensor(f"x{c}", [4, n], chip=c) for c, n in enumerate(rows)]
        x = b.gather("ag", xs, b.tensor("x", [4, sum(rows)], spine=True), "sp_in", axis=axis)
    width = b.shapes[x][1]
    for c in (0, 1):
        w = b.tensor(f"w{c}", [width, 4] if operand == 0 else [4, b.shapes[x][0]], chip=c)
        h = b.stmt(f"mm{c}", "matmul", [x, w] if operand == 0 else [w, x], b.tensor(f"h{c}", [4, 4], chip=c))
        b.stmt(f"g{c}", "gelu", [h], b.tensor(f"a{c}", [4, 4], chip=c))
    b.stmt("side", "relu", [x], b.tensor("xs", b.shapes[x], spine=True))
    return b


def scatter_program(shim: str = H200, seq: int = 2048, probe: str | None = None) -> ProgramBuilder:
    """On every chip a matmul (the partial p<k>), then a reduce-scatter of the partials along
    axis 0: chip k's slice y<k> holds seq/2 rows. `probe`, when given, is a chip-0 relu
    reading that tensor (p0: the partial is read outside the fold; x0: it is not).

        mm<k>: p<k> = x<k> @ w<k> (chip k)    rs: y = p0 + p1    rs_<k>: y<k> = y[k-th block]"""
    b = ProgramBuilder(chips=2)
    b.add_facts("shim", [(shim,)])
    partials = []
    for c in (0, 1):
        x, w = b.tensor(f"x{c}", [seq, 4], chip=c), b.tensor(f"w{c}", [4, 4], chip=c)
        partials.append(b.stmt(f"mm{c}", "matmul", [x, w], b.tensor(f"p{c}", [seq, 4], chip=c)))
    b.reduce_scatter("rs", partials, b.tensor("y", [seq, 4], spine=True), "sp_out", axis=0,
                     blocks=[b.tensor(f"y{c}", [seq // 2, 4], chip=c) for c in (0, 1)])
    if probe:
        b.stmt("probe", "relu", [probe], b.tensor("q", [seq, 4], chip=0))
    return b


def norm_program(shim: str = H200, adds: int = 1) -> ProgramBuilder:
    """Per-chip matmuls, their all-reduce, `adds` spine adds of the residual, an RMSNorm.

        mm<k>: p<k> = x @ w<k> (chip k)    ar: y = p0 + p1    res<i>: r<i> = r<i-1> + x    norm: n = rmsnorm(r, nw)"""
    b = ProgramBuilder(chips=2)
    b.add_facts("shim", [(shim,)])
    x = b.tensor("x", [4, 8], spine=True)
    partials = [b.stmt(f"mm{c}", "matmul", [x, b.tensor(f"w{c}", [8, 8], chip=c)], b.tensor(f"p{c}", [4, 8], chip=c))
                for c in (0, 1)]
    prev = b.fold("ar", partials, b.tensor("y", [4, 8], spine=True), "out")
    for i in range(adds):
        prev = b.stmt(f"res{i}", "add", [prev, x], b.tensor(f"r{i}", [4, 8], spine=True))
    b.stmt("norm", "rmsnorm", [prev, b.tensor("nw", [8], spine=True)], b.tensor("n", [4, 8], spine=True))
    return b


GATHER_KERNEL, SCATTER_KERNEL = ["ag", "mm0", "mm1"], ["mm0", "mm1", "rs", "rs_0", "rs_1"]
LEGAL = ()
# reason → variant → (program, members of f, the reasons worked out by hand; () is legal)
CASES = {
    "collective_fold": {
        "holds": (tp_program(), ["g0", "ar"], ["collective_fold"]),  # a fold has no place: not spans_chips
        "holds-with-spine": (tp_program(), ["ar", "act"], ["collective_fold"]),  # nor chip_and_spine
        "not": (tp_program(), ["act", "act2"], LEGAL),
    },
    "spans_chips": {
        "holds": (tp_program(), ["g0", "g1"], ["spans_chips"]),
        "not": (tp_program(), ["mm0", "g0"], LEGAL),
        "holds-relocated": (tp_program(section=["pre"], relocated_to=1), ["pre", "mm0"], ["spans_chips"]),
        "not-relocated": (tp_program(section=["pre"], relocated_to=1), ["pre", "mm1"], LEGAL),
    },
    "chip_and_spine": {
        "holds": (tp_program(), ["pre", "mm0"], ["chip_and_spine"]),
        "not": (tp_program(), ["pre", "pre2"], LEGAL),
        "holds-relocated": (tp_program(section=["pre"], relocated_to=1), ["pre", "pre2"], ["chip_and_spine"]),
        "not-relocated": (tp_program(section=["pre", "pre2"], relocated_to=1), ["pre", "pre2"], LEGAL),
        "holds-section-not-relocated": (tp_program(section=["pre"]), ["pre", "mm0"], ["chip_and_spine"]),
    },
    "unsupported": {  # the INT8 shim does not build rsqrt
        "holds": (tp_program(INT8, pre2="rsqrt"), ["pre", "pre2"], ["unsupported"]),
        "not": (tp_program(INT8, pre2="neg"), ["pre", "pre2"], LEGAL),
    },
    "not_fusible": {  # the INT8 shim runs softmax only alone
        "holds": (tp_program(INT8, pre2="softmax"), ["pre", "pre2"], ["not_fusible"]),
        "not": (tp_program(INT8, pre2="exp"), ["pre", "pre2"], LEGAL),
    },
    "too_many_members": {  # INT8: max_members 8; a reshape is a view there and not counted
        "holds": (chain_program(INT8, 9), [f"c{i}" for i in range(9)], ["too_many_members"]),
        "not": (chain_program(INT8, 9), [f"c{i}" for i in range(8)], LEGAL),
        "not-views": (chain_program(INT8, 9, views=(4,)), [f"c{i}" for i in range(9)], LEGAL),
        "holds-views": (chain_program(INT8, 10, views=(4,)), [f"c{i}" for i in range(10)], ["too_many_members"]),
    },
    "too_many_inputs": {  # INT8: max_inputs 4; CPU has no max_inputs
        "holds": (adds_program(INT8, ["k0", "k1", "k2", "k3"]), ["b0", "b1", "b2", "b3"], ["too_many_inputs"]),
        "not": (adds_program(INT8, ["k0", "k1", "k2", "k3"]), ["b0", "b1", "b2"], LEGAL),
        "not-distinct": (adds_program(INT8, ["k0", "k1", "k2", "k0"]), ["b0", "b1", "b2", "b3"], LEGAL),
        "not-no-limit": (adds_program(CPU, ["k0", "k1", "k2", "k3"]), ["b0", "b1", "b2", "b3"], LEGAL),
    },
    "too_many_matmuls": {  # INT8: max_matmuls 1; H100: 2; CPU: none
        "holds": (matmuls_program(INT8), ["m0", "m1"], ["too_many_matmuls"]),
        "not": (matmuls_program(INT8), ["m0", "e"], LEGAL),
        "not-at-limit": (matmuls_program(H100), ["m0", "m1"], LEGAL),
        "not-no-limit": (matmuls_program(CPU), ["m0", "m1"], LEGAL),
    },
    "quantized_inside": {  # INT8 reads matmul operand 0 as int8_two_pass
        "holds": (quantized_program(INT8, 0), ["p", "m"], ["quantized_inside"]),
        "not": (quantized_program(INT8, 1), ["p", "m"], LEGAL),
        "not-other-shim": (quantized_program(H100, 0), ["p", "m"], LEGAL),
    },
    "cycle": {
        "holds": (path_program(), ["a", "c"], ["cycle"]),  # a -> b -> c leaves and re-enters
        "not": (path_program(), ["a", "b"], LEGAL),  # a -> d leaves and never comes back
        "not-whole-path": (path_program(), ["a", "b", "c"], LEGAL),
    },
    # Collective kernels (SPEC §3): the h200 shim declares every pattern, min_collective_block 1024.
    "too_narrow": {  # one chip's block is 1023 rows (the other 1025); at 1024 (= the minimum) it is not
        "holds": (gather_program(rows=(1023, 1025)), GATHER_KERNEL, ["too_narrow"]),
        "not": (gather_program(rows=(1024, 1024)), GATHER_KERNEL, LEGAL),
        "holds-last-axis": (gather_program(rows=(8, 8), axis=-1), GATHER_KERNEL, ["too_narrow"]),
        "not-last-axis": (gather_program(rows=(1024, 1024), axis=-1), GATHER_KERNEL, LEGAL),
        "holds-reduce-scatter": (scatter_program(seq=2046), SCATTER_KERNEL, ["too_narrow"]),
        "not-reduce-scatter": (scatter_program(seq=2048), SCATTER_KERNEL, LEGAL),
        "not-no-limit": (own_shim(gather_program("test:symm:NoMin", rows=(8, 8)), "test:symm:NoMin",
                                  ("all_gather_matmul",), {}), GATHER_KERNEL, LEGAL),
        "holds-own-limit": (own_shim(gather_program("test:symm:Min16", rows=(8, 8)), "test:symm:Min16",
                                     ("all_gather_matmul",), {"min_collective_block": 16}), GATHER_KERNEL, ["too_narrow"]),
        "not-all-reduce-norm": (norm_program(), ["ar", "res0", "norm"], LEGAL),  # the guard is not this pattern's
    },
    "shared_partial": {  # a relu on chip 0 reads the partial p0 besides the fold (not: reads x0)
        "holds": (scatter_program(probe="p0"), SCATTER_KERNEL, ["shared_partial"]),
        "not": (scatter_program(probe="x0"), SCATTER_KERNEL, LEGAL),
    },
    "collective_kernel": {  # exactly a declared pattern is legal; anything else is answered as before
        "gather-matmul": (gather_program(), GATHER_KERNEL, LEGAL),
        "gather-matmul-no-declaration": (gather_program(H100), GATHER_KERNEL, ["collective_fold", "spans_chips"]),
        "gather-matmul-one-member-more": (gather_program(), GATHER_KERNEL + ["g0"], ["collective_fold", "spans_chips"]),
        "gather-matmul-one-chip-short": (gather_program(), ["ag", "mm0"], ["collective_fold"]),
        "gather-matmul-operand-1": (gather_program(operand=1), GATHER_KERNEL, ["collective_fold", "spans_chips"]),
        "gather-matmul-spine-reader": (gather_program(), GATHER_KERNEL + ["side"],
                                       ["chip_and_spine", "collective_fold", "spans_chips"]),
        "matmul-scatter": (scatter_program(), SCATTER_KERNEL, LEGAL),
        "matmul-scatter-no-declaration": (scatter_program(H100), SCATTER_KERNEL, ["collective_fold", "spans_chips"]),
        "matmul-scatter-no-slices": (scatter_program(), ["mm0", "mm1", "rs"], ["collective_fold", "spans_chips"]),
        "matmul-scatter-one-slice": (scatter_program(), ["mm0", "mm1", "rs", "rs_0"], ["collective_fold", "spans_chips"]),
        "matmul-scatter-one-member-more": (scatter_program(probe="x0"), SCATTER_KERNEL + ["probe"],
                                           ["collective_fold", "spans_chips"]),
        "norm-direct": (norm_program(adds=0), ["ar", "norm"], LEGAL),
        "norm-residual": (norm_program(adds=1), ["ar", "res0", "norm"], LEGAL),
        "norm-two-adds": (norm_program(adds=2), ["ar", "res0", "res1", "norm"], ["collective_fold"]),
        "norm-add-only": (norm_program(adds=1), ["ar", "res0"], ["collective_fold"]),
        "norm-with-matmul": (norm_program(adds=0), ["mm0", "ar", "norm"], ["chip_and_spine", "collective_fold"]),
        "norm-no-declaration": (norm_program(H100, adds=1), ["ar", "res0", "norm"], ["collective_fold"]),
        # a shim that declares only the all-gather: the others are answered as before
        "only-gather-declared": (own_shim(scatter_program("test:symm:AgOnly"), "test:symm:AgOnly",
                                          ("all_gather_matmul",), {}), SCATTER_KERNEL, ["collective_fold", "spans_chips"]),
        # the base reasons still apply to a kernel's members
        "base-reasons-apply": (own_shim(gather_program("test:symm:OneMatmul"), "test:symm:OneMatmul",
                                        ("all_gather_matmul",), {"max_matmuls": 1}), GATHER_KERNEL, ["too_many_matmuls"]),
    },
    "several_at_once": {  # every reason that holds is reported
        "holds": (tp_program(INT8), ["pre", "mm0", "mm1", "g1", "ar", "act"],
                  ["chip_and_spine", "collective_fold", "cycle", "quantized_inside", "spans_chips",
                   "too_many_matmuls"]),
        "holds-tp-only": (tp_program(), ["g1", "mm0", "ar", "act"],
                          ["chip_and_spine", "collective_fold", "cycle", "spans_chips"]),
    },
}


def write(reason: str, variant: str, program: ProgramBuilder, members: list[str], reasons) -> None:
    case = HERE / reason / variant
    if case.exists():
        shutil.rmtree(case)
    program.facts["member"].clear()
    program.candidate("f", members)
    program.write(case)
    (case / "expected").mkdir()
    (case / "expected" / "legal.tsv").write_text("" if reasons else "f\n")
    (case / "expected" / "refused.tsv").write_text("".join(f"f\t{r}\n" for r in sorted(reasons)))


if __name__ == "__main__":
    only = set(sys.argv[1:])  # reasons to rewrite (default: all)
    for reason, variants in CASES.items():
        if only and reason not in only:
            continue
        for variant, (program, members, reasons) in variants.items():
            write(reason, variant, program, members, reasons)
    print(sum(len(v) for v in CASES.values()), "cases")
