"""Which matmul core for the CPU kernels: the comparison behind codegen/cpu/gemm.py.

    python benchmarks/bench_matmul.py [--repeat 10] [--threads 1]

On the matmul shapes of the benchmark's Llama layer (seq 128, hidden 1024, ffn 2816, at
TP 1 and 4), one thread, float32, the fastest of `--repeat` runs (processor time, which a
shared machine disturbs less than the wall time):
- loops: the i-k-j loops `--matmul own` generates (what kernels had before);
- blocked: a cache- and register-blocked Numba kernel (B packed in panels of 64 columns,
  4 rows of accumulators), the best plain-Numba candidate tried;
- blas tiles: the generated BLAS core (SciPy's sgemm on the tiles of cpu_gemm.tile_plan);
- numpy and torch: one library call, for reference.
Not a test: it prints GFLOP/s.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SHAPES = {  # (m, k, n) of the layer's matmuls
    "q/k/v/wo, TP 1": (128, 1024, 1024),
    "gate/up, TP 1": (128, 1024, 2816),
    "down, TP 1": (128, 2816, 1024),
    "q/k/v, TP 4": (128, 1024, 256),
    "gate/up, TP 4": (128, 1024, 704),
    "down, TP 4": (128, 704, 1024),
    "scores, TP 4": (128, 256, 128),
}


def kernels():
    from numba import njit

    from tprules.codegen import blas
    from tprules.codegen.cpu.gemm import tile_plan

    blas.single_threaded()

    @njit(nogil=True, cache=True)
    def loops(a, b, c):
        m, k = a.shape
        n = b.shape[1]
        for i in range(m):
            acc = np.zeros(n, np.float32)
            for kk in range(k):
                av = a[i, kk]
                for j in range(n):
                    acc[j] += av * b[kk, j]
            c[i, :] = acc

    @njit(nogil=True, cache=True, fastmath=True)
    def blocked(a, b, c):
        m, k = a.shape
        n = b.shape[1]
        nb = 64
        panel = np.empty((k, nb), np.float32)
        for j0 in range(0, n, nb):
            w = min(nb, n - j0)
            for kk in range(k):
                for j in range(w):
                    panel[kk, j] = b[kk, j0 + j]
            for i0 in range(0, m, 4):
                acc = np.zeros((4, nb), np.float32)
                rows = min(4, m - i0)
                for kk in range(k):
                    a0 = a[i0, kk]
                    a1 = a[i0 + 1, kk] if rows > 1 else np.float32(0)
                    a2 = a[i0 + 2, kk] if rows > 2 else np.float32(0)
                    a3 = a[i0 + 3, kk] if rows > 3 else np.float32(0)
                    for j in range(nb):
                        p = panel[kk, j]
                        acc[0, j] += a0 * p
                        acc[1, j] += a1 * p
                        acc[2, j] += a2 * p
                        acc[3, j] += a3 * p
                for r in range(rows):
                    for j in range(w):
                        c[i0 + r, j0 + j] = acc[r, j]

    gemm = blas.gemm

    def tiles(a, b, c):
        m, k = a.shape
        n = b.shape[1]
        rows, cols, tm, tn = tile_plan(m, n, 1)
        _tiles(a, b, c, m, n, k, rows, cols, tm, tn)

    @njit(nogil=True, cache=True)
    def _tiles(a, b, c, m, n, k, rows, cols, tm, tn):
        for t in range(rows * cols):
            i0, j0 = (t // cols) * tm, (t % cols) * tn
            gemm(0, 0, min(tm, m - i0), min(tn, n - j0), k, a, i0 * k, k, b, j0, n, c, i0 * n + j0, n)

    return {"loops": loops, "blocked": blocked, "blas tiles": tiles}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=10)
    args = p.parse_args(argv)
    import numba
    from threadpoolctl import threadpool_limits

    numba.set_num_threads(1)
    impls = kernels()
    try:
        import torch

        torch.set_num_threads(1)
        impls["torch"] = lambda a, b, c: torch.matmul(torch.from_numpy(a), torch.from_numpy(b), out=torch.from_numpy(c))
    except ImportError:
        pass
    impls["numpy"] = lambda a, b, c: np.matmul(a, b, out=c)
    print(f"GFLOP/s, one thread, fastest of {args.repeat} (processor time)")
    print(f"{'shape':<16} {'m x k x n':>16} " + " ".join(f"{name:>10}" for name in impls))
    rng = np.random.default_rng(0)
    with threadpool_limits(1):
        for label, (m, k, n) in SHAPES.items():
            a = rng.standard_normal((m, k), dtype=np.float32)
            b = rng.standard_normal((k, n), dtype=np.float32)
            ref = a @ b
            cells = []
            for name, fn in impls.items():
                c = np.empty((m, n), np.float32)
                fn(a, b, c)
                assert np.allclose(c, ref, rtol=1e-3, atol=1e-2 * np.sqrt(k)), name
                best = float("inf")
                for _ in range(args.repeat if name != "loops" else max(2, args.repeat // 4)):
                    started = time.thread_time()
                    fn(a, b, c)
                    best = min(best, time.thread_time() - started)
                cells.append(2.0 * m * n * k / best / 1e9)
            print(f"{label:<16} {f'{m}x{k}x{n}':>16} " + " ".join(f"{g:>10.1f}" for g in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
