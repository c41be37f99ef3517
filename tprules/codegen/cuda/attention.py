"""Attention's chain on a GPU (lowering/attention.py, the `online` form): one stage, a block per
batch index and tile of T query rows, looping over tiles of T keys with an online softmax.

For each key tile, each thread computes one score of QKᵀ from shared-memory tiles of the
operands (render/tiles.py), the pointwise work and the softmax's input on it in registers (the
chain reads its buffers only at the index it computes), and the block keeps, per row, the
running maximum m and sum l of exp(x - m). The tile's exp(x - m) go to shared memory and
are multiplied by the key tile's rows of the values into each thread's accumulators, which
are first rescaled by exp(m_old - m_new). After the last key tile the accumulators divided
by l are ·V's result, and its epilogue stores them. The scores and probabilities never
leave the multiprocessor: no buffer holds them, and one launch does what three did.
"""

from __future__ import annotations

from ..ir import AttentionStage, Kernel
from ..render.emit import Scope, Source, store, subscript, unflatten
from ..render.tiles import tile_sums


class RegisterScope(Scope):
    """A scope that reads the chain's buffers from the registers that hold their value at
    the index being computed (the only index the chain reads them at)."""

    def __init__(self, src: Source, regs: dict[str, str], acc=None, row=None):
        super().__init__(src, acc, row)
        self.regs = regs

    def again(self, acc=None, row=None) -> "RegisterScope":
        return RegisterScope(self.src, self.regs, acc, row)

    def element(self, param: str, idx: tuple[str, ...]) -> str:
        return self.regs[param] if param in self.regs else subscript(param, idx)


def render(src: Source, stage: AttentionStage, kernel: Kernel, target) -> None:
    head, *between, last = stage.stages
    *pointwise, softmax = between
    (pv,) = last.matmuls
    m, n = head.m, head.n
    row_tiles, col_tiles = -(-m // target.tile), -(-last.n // target.tile)
    ty, tx, tile, b, i, mrun, lrun, kt, j = (src.fresh(s) for s in ("ty", "tx", "tile", "b", "i", "mrun", "lrun",
                                                                   "kt", "j"))
    src.line(f"{ty} = tid // T")
    src.line(f"{tx} = tid % T")
    src.line(f"# a block per head and {target.tile} rows; keys {target.tile} at a time, softmax online")
    with src.block(f"for {tile} in range(bid, {head.batch * row_tiles}, nb):"):
        src.line(f"{b} = {tile} // {row_tiles}")
        src.line(f"{i} = ({tile} % {row_tiles}) * T + {ty}")
        src.line(f"{mrun} = -INF")
        src.line(f"{lrun} = f32(0)")
        outs = [src.fresh("o") for _ in range(col_tiles)]
        for o in outs:
            src.line(f"{o} = f32(0)")
        with src.block(f"for {kt} in range(0, {n}, T):"):
            src.line(f"{j} = {kt} + {tx}")
            (score,) = tile_sums(src, head, (b,), i, j, ty, tx)
            x = _softmax_input(src, stage, pointwise, softmax, score, (b, i, j), (m, n))
            mnew, alpha = _rescale(src, x, mrun, lrun, ty, tx)
            for c, o in enumerate(outs):
                jc, kv, part, kk = src.fresh("jc"), src.fresh("kv"), src.fresh("part"), src.fresh("kk")
                src.line(f"{jc} = {c} * T + {tx}")
                src.line(f"{kv} = {kt} + {ty}")
                with src.block(f"if {kv} < {n} and {jc} < {last.n}:"):
                    src.line(f"sb0[{ty}, {tx}] = {Scope(src).at(pv.b, (b, jc, kv) if pv.transpose_b else (b, kv, jc))}")
                with src.block("else:"):
                    src.line(f"sb0[{ty}, {tx}] = f32(0)")
                src.line("cuda.syncthreads()")
                src.line(f"{part} = f32(0)")
                with src.block(f"for {kk} in range(T):"):
                    src.line(f"{part} += sp[{ty}, {kk}] * sb0[{kk}, {tx}]")
                src.line(f"{o} = {o} * {alpha} + {part}")
                src.line("cuda.syncthreads()")
            src.line(f"{mrun} = {mnew}")
        for c, o in enumerate(outs):  # ·V's epilogue
            jc, v = src.fresh("jc"), src.fresh("pv")
            src.line(f"{jc} = {c} * T + {tx}")
            with src.block(f"if {i} < {m} and {jc} < {last.n}:"):
                src.line(f"{v} = {o} / {lrun}")
                store(src, Scope(src, acc=lambda _, v=v: v), last, (b, i, jc), kernel)


def _softmax_input(src: Source, stage: AttentionStage, pointwise, softmax, score: str, idx, size) -> str:
    """The softmax's input at (b, i, j), -INF outside the scores: the first product's stores
    and the pointwise stages in registers, then the row op's operand."""
    b, i, j = idx
    x = src.fresh("x")
    src.line(f"{x} = -INF")
    with src.block(f"if {i} < {size[0]} and {j} < {size[1]}:"):
        regs: dict[str, str] = {}
        scope = RegisterScope(src, regs, acc=lambda _: score)
        for st in stage.stages[0].stores:
            regs[st.param] = scope.at(st.value, idx)
        for p in pointwise:
            at = unflatten(src, b, p.shape[:-2]) + (i, j)
            inner = scope.again()
            for st in p.stores:
                regs[st.param] = inner.at(st.value, at)
        at = unflatten(src, b, softmax.shape[:-2]) + (i, j)
        src.line(f"{x} = {scope.again().at(softmax.rows[0].x, at)}")
    return x


def _rescale(src: Source, x: str, mrun: str, lrun: str, ty: str, tx: str) -> tuple[str, str]:
    """The row's new running maximum over this key tile, exp(x - max) into `sp`, the running
    sum updated; returns (new maximum, the factor exp(old - new) for the accumulators)."""
    tmax, mnew, p, alpha, tsum, kk = (src.fresh(s) for s in ("tmax", "mnew", "p", "alpha", "tsum", "kk"))
    src.line(f"sp[{ty}, {tx}] = {x}")
    src.line("cuda.syncthreads()")
    src.line(f"{tmax} = -INF")
    with src.block(f"for {kk} in range(T):"):
        with src.block(f"if sp[{ty}, {kk}] > {tmax}:"):
            src.line(f"{tmax} = sp[{ty}, {kk}]")
    src.line(f"{mnew} = {mrun}")
    with src.block(f"if {tmax} > {mnew}:"):
        src.line(f"{mnew} = {tmax}")
    src.line("cuda.syncthreads()")
    src.line(f"{p} = f32(0)")
    with src.block(f"if {x} > -INF:"):
        src.line(f"{p} = fexp({x} - {mnew})")
    src.line(f"sp[{ty}, {tx}] = {p}")
    src.line(f"{alpha} = f32(0)")
    with src.block(f"if {mrun} > -INF:"):
        src.line(f"{alpha} = fexp({mrun} - {mnew})")
    src.line("cuda.syncthreads()")
    src.line(f"{tsum} = f32(0)")
    kk = src.fresh("kk")
    with src.block(f"for {kk} in range(T):"):
        src.line(f"{tsum} += sp[{ty}, {kk}]")
    src.line(f"{lrun} = {lrun} * {alpha} + {tsum}")
    return mnew, alpha


__all__ = ["RegisterScope", "render"]
