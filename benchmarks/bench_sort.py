"""The grouped MoE form's sort on the CPU: a stable sort of n ids (`sort_rank`) and the
sort's values and positions put at their ranks (two `put_along`s), as the importer writes
`torch.sort` (frontends/lowering/grouped.py `sorted_item`).

    python benchmarks/bench_sort.py [--n 8192,32768] [--repeat 10] [--threads 2] [--unfused]

For each n: seeded expert ids (n = tokens × top k, 64 experts), the program written to a
temporary folder, planned for the CPU (or one kernel a statement with `--unfused`),
compiled, run once untimed (the first runs are disturbed by what they start), then
`--repeat` times; the fastest run's kernels' time is printed (as
`tprules run` reports it), and every run's outputs are checked against the reference.
To compare two trees, run the script of each in turn (PYTHONPATH=TREE), interleaved. Not a
test: it prints figures.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def program(folder: Path, n: int, experts: int = 64) -> Path:
    import numpy as np

    from tprules.program.builder import ProgramBuilder

    b = ProgramBuilder(chips=1)

    def st(name, cls, reads, dtype="f32", **attrs):
        return b.stmt(name, cls, reads, b.tensor(name, [1, n], dtype, spine=True), **attrs)

    rng = np.random.default_rng(0)
    ids = b.tensor("ids", [1, n], spine=True, data=rng.integers(0, experts, (1, n)).astype(np.float32))
    positions = b.tensor("positions", [1, n], "i64", spine=True, data=np.arange(n, dtype=np.int64)[None])
    rank = st("rank", "sort_rank", [ids], "i64")
    for name, what, dtype, kept in (("values", ids, "f32", np.float32), ("order", positions, "i64", np.int64)):
        zeros = b.tensor(f"{name}_base", [1, n], dtype, spine=True, data=np.zeros((1, n), kept))
        st(name, "put_along", [zeros, rank, what], dtype, axis=1)
    return b.write(folder)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", default="8192,32768", help="ids to sort, comma-separated")
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--unfused", action="store_true")
    args = p.parse_args(argv)

    import numba

    from tprules.runtime import Prepared, Program, run_plan
    from tprules.workspace import Workspace

    numba.set_num_threads(args.threads)
    for n in map(int, args.n.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            ws = Workspace(program(Path(tmp) / "p", n))
            prog = Program.from_workspace(ws)
            prepared = Prepared(prog, run_plan(ws, prog, "cpu", baseline=args.unfused), "cpu")
            runs = [prepared.run() for _ in range(args.repeat + 1)][1:]
            bad = [o.tensor for r in runs for o in prepared.report(r).outputs if not o.ok]
            best = min(runs, key=lambda r: r.seconds)
            kinds = "+".join(sorted({k.kind for k in prepared.kernels}))
            print(f"n = {n}: {best.seconds * 1e3:.1f} ms ({len(prepared.kernels)} kernels: {kinds})"
                  + (f"; MISMATCH {sorted(set(bad))}" if bad else "; outputs match the reference"))
            if bad:
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
