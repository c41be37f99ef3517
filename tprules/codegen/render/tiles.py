"""The GPU's shared-memory matmul tiles, written once for the 2-D matmul stage (cuda/kernel.py)
and the batched one (render/batched.py), so neither renderer imports the other."""

from __future__ import annotations

from ..ir import Kernel
from .emit import Scope, Source, store


def tile_products(src: Source, stage, kernel: Kernel, lead: tuple, i: str, j: str, ty: str, tx: str) -> None:
    """One T x T output tile at rows i, columns j (thread ty, tx) of each matmul of a
    (batched, when `lead` holds the batch index) matmul stage: operand tiles staged in
    shared memory over k, then the stores of the epilogue."""
    accs = tile_sums(src, stage, lead, i, j, ty, tx)
    with src.block(f"if {i} < {stage.m} and {j} < {stage.n}:"):
        store(src, Scope(src, acc=lambda n: accs[n]), stage, (*lead, i, j), kernel)


def tile_sums(src: Source, stage, lead: tuple, i: str, j: str, ty: str, tx: str, b_lead: tuple | None = None,
              rows: str | int | None = None) -> list[str]:
    """Each matmul's element (i, j) for thread (ty, tx), its operand tiles staged in shared
    memory `sa{n}`, `sb{n}` over k (zero outside the operands); returns the accumulators.
    `b_lead` indexes B's leading axes where they are not A's (a grouped matmul's expert),
    `rows` bounds A's rows where the tile stops short of M (that expert's last row)."""
    b_lead = lead if b_lead is None else b_lead
    rows = stage.m if rows is None else rows
    k0, ka, kb, kk = (src.fresh(s) for s in ("k", "ka", "kb", "kk"))
    accs = [src.fresh("acc") for _ in stage.matmuls]
    for acc in accs:
        src.line(f"{acc} = f32(0)")
    with src.block(f"for {k0} in range(0, {stage.k}, T):"):
        src.line(f"{ka} = {k0} + {tx}")
        src.line(f"{kb} = {k0} + {ty}")
        for n, mm in enumerate(stage.matmuls):
            with src.block(f"if {i} < {rows} and {ka} < {stage.k}:"):
                src.line(f"sa{n}[{ty}, {tx}] = {Scope(src).at(mm.a, (*lead, i, ka))}")
            with src.block("else:"):
                src.line(f"sa{n}[{ty}, {tx}] = f32(0)")
            with src.block(f"if {kb} < {stage.k} and {j} < {stage.n}:"):
                b_index = (*b_lead, j, kb) if mm.transpose_b else (*b_lead, kb, j)
                src.line(f"sb{n}[{ty}, {tx}] = {Scope(src).at(mm.b, b_index)}")
            with src.block("else:"):
                src.line(f"sb{n}[{ty}, {tx}] = f32(0)")
        src.line("cuda.syncthreads()")
        with src.block(f"for {kk} in range(T):"):
            for n, acc in enumerate(accs):
                src.line(f"{acc} += sa{n}[{ty}, {kk}] * sb{n}[{kk}, {tx}]")
        src.line("cuda.syncthreads()")
    return accs
