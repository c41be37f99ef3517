"""Grouped matmul (`grouped_matmul`, a mixture of experts in transformers' grouped form): the
rows of A sorted by expert, each expert's rows times that expert's matrix, its own stage.

Expert e's rows are offsets[e − 1] .. offsets[e] (the running maximum: an offset below an
earlier one ends an empty group); rows past the last offset store zero. Each expert's
weights are read once for all its rows, not once per row as a gather of weights does
(the `batched_mm` form: a bmm of one row per token and chosen expert).

- CPU with BLAS (`render_cpu_gemm`): the groups' bounds first, then one BLAS call per
  expert, tile of its rows and tile of the columns (a `prange` over column tiles x experts
  x row tiles, the column tiles a multiple of the threads), A and B read as views
  where they are (render/views.py: the checkpoint's [E, N, K] weights read transposed), else
  computed once into a buffer; the epilogue runs over each tile;
- CPU, own core: the same bounds, then a `prange` over rows, each finding its expert,
  one accumulator row;
- CUDA: the matmul stage's T x T shared-memory tiles, the tile loop over experts x row
  tiles x column tiles, a tile past its expert's rows skipped as a whole block (render/tiles.py).
"""

from __future__ import annotations

from dataclasses import replace

from ...ops import Ops
from ..cpu.gemm import tile_plan
from ..ir import Acc, GroupedMatmulStage, Kernel, Load, Remap
from .batched import TILE_ROWS, operand
from .emit import Scope, Source, store
from .extern import direct_stores
from .tiles import tile_sums


def bounds(src: Source, stage: GroupedMatmulStage) -> tuple[str, str]:
    """Arrays `starts`, `ends` of each expert's rows (the running maximum of the offsets,
    clipped to M), computed once before the stage's loops."""
    starts, ends, e, at, end = (src.fresh(s) for s in ("starts", "ends", "e", "at", "end"))
    src.line(f"{starts} = np.empty({stage.experts}, np.int64)")
    src.line(f"{ends} = np.empty({stage.experts}, np.int64)")
    src.line(f"{at} = 0")
    with src.block(f"for {e} in range({stage.experts}):"):
        src.line(f"{end} = min(max({at}, {Scope(src).index(stage.offsets, (e,))}), {stage.m})")
        src.line(f"{starts}[{e}] = {at}")
        src.line(f"{ends}[{e}] = {end}")
        src.line(f"{at} = max({at}, {end})")
    return starts, ends


def render_cpu_gemm(src: Source, stage: GroupedMatmulStage, kernel: Kernel, threads: int) -> None:
    """One BLAS call per expert, tile of its rows and tile of the columns, the epilogue on
    each tile; the rows past the last group store the epilogue of zero. The columns are cut
    as a matmul stage's are (`cpu_gemm.tile_plan`: a multiple of the chip's `threads`) and
    the column tile is the outermost index of the `prange`, so that every thread gets the
    same share of every expert's rows however the tokens chose (their counts are data)."""
    mm = stage.matmul
    parallel = threads > 1
    dtype = kernel.param(mm.a.param).dtype if isinstance(mm.a, Load) else getattr(mm.a, "dtype", "f32")
    a, va, ta, lda = operand(src, Remap(Ops.RESHAPE.value, mm.a, (1, stage.m, stage.k), dtype), kernel, parallel)
    b, vb, tb, ldb = operand(src, mm.b, kernel, parallel)
    starts, ends = bounds(src, stage)
    tm = min(stage.m, TILE_ROWS)
    tiles = -(-stage.m // tm)
    _, cols, _, tn = tile_plan(stage.m, stage.n, threads)
    per_col = stage.experts * tiles
    direct = direct_stores(stage, kernel).get(0)  # the output BLAS writes into, if any
    t, e, i0, j0, mb, nb, acc = (src.fresh(s) for s in ("t", "e", "i0", "j0", "mb", "nb", "acc"))
    n, k = stage.n, stage.k
    src.line(f"# {cols} column tiles of up to {tn} x {stage.experts} experts x up to {tiles} tiles of up to {tm} rows")
    with src.block(f"for {t} in {'prange' if parallel else 'range'}({cols * per_col}):"):
        src.line(f"{j0} = ({t} // {per_col}) * {tn}")
        src.line(f"{e} = ({t} % {per_col}) // {tiles}")
        src.line(f"{i0} = {starts}[{e}] + ({t} % {tiles}) * {tm}")
        with src.block(f"if {i0} < {ends}[{e}]:"):
            src.line(f"{mb} = min({tm}, {ends}[{e}] - {i0})")
            src.line(f"{nb} = min({tn}, {n} - {j0})")
            a_off = _plus(str(va.offset) if va.offset else "", f"{i0} * {lda}" if not ta else i0)
            b_off = _plus(str(vb.offset) if vb.offset else "", vb.offset_of(0, e), f"{j0} * {ldb}" if tb else j0)
            if direct:  # the result kept as it is: BLAS writes it where it goes
                c, c_off, ldc = direct, f"{i0} * {n} + {j0}", n
            else:
                c, c_off, ldc = acc, "0", tn
                src.line(f"{acc} = np.empty(({mb}, {tn}), np.float32)")
            src.line(f"gemm({int(ta)}, {int(tb)}, {mb}, {nb}, {k}, {a}, {a_off}, {lda}, {b}, {b_off}, {ldb}, "
                     f"{c}, {c_off}, {ldc})")
            epilogue = tuple(st for st in stage.stores if not (direct and st.param == direct and isinstance(st.value, Acc)))
            if epilogue:
                _epilogue(src, replace(stage, stores=epilogue), kernel, (i0, mb), (j0, nb), acc, direct)
    _tail(src, stage, kernel, ends, parallel)


def _epilogue(src: Source, stage: GroupedMatmulStage, kernel: Kernel, rows: tuple[str, str],
              columns: tuple[str, str], acc: str, direct: str | None) -> None:
    """The stores over a tile: rows i0 .. i0 + mb, columns j0 .. j0 + nb, reading the
    product from `acc`, or from the output `direct` where BLAS wrote it."""
    (i0, mb), (j0, nb) = rows, columns
    i, j, ii, jj = src.fresh("i"), src.fresh("j"), src.fresh("ii"), src.fresh("jj")
    with src.block(f"for {i} in range({mb}):"):
        src.line(f"{ii} = {i0} + {i}")
        with src.block(f"for {j} in range({nb}):"):
            src.line(f"{jj} = {j0} + {j}")
            read = f"{direct}[{ii}, {jj}]" if direct else f"{acc}[{i}, {j}]"
            store(src, Scope(src, acc=lambda x: read), stage, (ii, jj), kernel)


def _tail(src: Source, stage: GroupedMatmulStage, kernel: Kernel, ends: str, parallel: bool) -> None:
    """Rows past the last group: the epilogue of a zero product."""
    last, i, j = src.fresh("last"), src.fresh("i"), src.fresh("j")
    src.line(f"{last} = {ends}[{stage.experts - 1}]")
    with src.block(f"for {i} in {'prange' if parallel else 'range'}({last}, {stage.m}):"):
        with src.block(f"for {j} in range({stage.n}):"):
            store(src, Scope(src, acc=lambda x: "f32(0)"), stage, (i, j), kernel)


def _plus(*terms: str) -> str:
    return " + ".join(x for x in terms if x and x != "0") or "0"


def expert_of(src: Source, stage: GroupedMatmulStage, ends: str, i: str) -> str:
    """The expert whose rows hold row `i` (the first whose end, from `bounds`, passes it:
    an empty group ends where the one before it does), or −1 past the last group."""
    e, q = src.fresh("e"), src.fresh("q")
    src.line(f"{e} = -1")
    with src.block(f"for {q} in range({stage.experts}):"):
        with src.block(f"if {e} < 0 and {i} < {ends}[{q}]:"):
            src.line(f"{e} = {q}")
    return e


def render_cpu(src: Source, stage: GroupedMatmulStage, kernel: Kernel) -> None:
    """The own core: the groups' bounds once (`bounds`, as the BLAS form walks them), then
    each row finds its expert and accumulates rows of that expert's B."""
    mm = stage.matmul
    _, ends = bounds(src, stage)
    i, k, j, acc = src.fresh("i"), src.fresh("k"), src.fresh("j"), src.fresh("acc")
    with src.block(f"for {i} in prange({stage.m}):"):
        e = expert_of(src, stage, ends, i)
        src.line(f"{acc} = np.zeros({stage.n}, np.float32)")
        with src.block(f"if {e} >= 0:"):
            with src.block(f"for {k} in range({stage.k}):"):
                av = Scope(src).at(mm.a, (i, k))
                with src.block(f"for {j} in range({stage.n}):"):
                    src.line(f"{acc}[{j}] += {av} * {Scope(src).at(mm.b, (e, k, j))}")
        with src.block(f"for {j} in range({stage.n}):"):
            store(src, Scope(src, acc=lambda x: f"{acc}[{j}]"), stage, (i, j), kernel)


def render_cuda(src: Source, stage: GroupedMatmulStage, kernel: Kernel, target) -> None:
    """Per-expert tiles: tile (e, row tile, column tile) covers rows starts[e] + row tile · T
    onward of expert e only; a tile past the expert's rows is skipped by the whole block
    (its barriers stay uniform). The rows past the last group store the zero epilogue."""
    tm, tn = -(-stage.m // target.tile), -(-stage.n // target.tile)
    per_expert = tm * tn
    ty, tx, tile, e, t, i, j, lo, hi = (src.fresh(s) for s in ("ty", "tx", "tile", "e", "t", "i", "j", "lo", "hi"))
    src.line(f"{ty} = tid // T")
    src.line(f"{tx} = tid % T")
    with src.block(f"for {tile} in range(bid, {stage.experts * per_expert}, nb):"):
        src.line(f"{e} = {tile} // {per_expert}")
        src.line(f"{t} = {tile} % {per_expert}")
        src.line(f"{lo} = 0")
        q, end = src.fresh("q"), src.fresh("end")
        with src.block(f"for {q} in range({e}):"):
            src.line(f"{lo} = max({lo}, {Scope(src).index(stage.offsets, (q,))})")
        src.line(f"{hi} = max({lo}, {Scope(src).index(stage.offsets, (e,))})")
        src.line(f"{hi} = min({hi}, {stage.m})")
        src.line(f"{end} = {lo} + ({t} // {tn}) * T")
        with src.block(f"if {end} < {hi}:"):
            src.line(f"{i} = {end} + {ty}")
            src.line(f"{j} = ({t} % {tn}) * T + {tx}")
            accs = tile_sums(src, stage, (), i, j, ty, tx, b_lead=(e,), rows=hi)
            with src.block(f"if {i} < {hi} and {j} < {stage.n}:"):
                store(src, Scope(src, acc=lambda n: accs[n]), stage, (i, j), kernel)
    last, flat, r, c = src.fresh("last"), src.fresh("flat"), src.fresh("r"), src.fresh("c")
    src.line(f"{last} = 0")
    with src.block(f"for {q} in range({stage.experts}):"):
        src.line(f"{last} = max({last}, {Scope(src).index(stage.offsets, (q,))})")
    src.line(f"{last} = min({last}, {stage.m})")
    with src.block(f"for {flat} in range(bid * nt + tid, ({stage.m} - {last}) * {stage.n}, nb * nt):"):
        src.line(f"{r} = {last} + {flat} // {stage.n}")
        src.line(f"{c} = {flat} % {stage.n}")
        store(src, Scope(src, acc=lambda n: "f32(0)"), stage, (r, c), kernel)
