"""Time subsumption (issue 27): shortest distances on a random weighted graph with cycles.

    python benchmarks/bench_subsumption.py               # 300 nodes, 600 edges, best of 3
    python benchmarks/bench_subsumption.py --nodes 1000 -r 1
    python benchmarks/bench_subsumption.py --before /tmp/old   # also time another checkout
    python benchmarks/bench_subsumption.py --chords 0 --nodes 3000   # a ring: one round a node

Writes the graph (a ring with random weights, plus `--chords` random chords a node) and the rules
into a temporary folder, then runs `tprules eval` on each engine as its own process,
start-up included, and reports the best wall time and the size of dist (every node is
reachable through the ring, so dist must have one tuple a node). `--before DIR` times the
`tprules` package of another checkout (DIR holds `tprules/`) too, alternating run by run
with this one, so both see the same machine load; their answers must be equal.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RULES = """.decl edge(x: number, y: number, w: number)
.input edge
.decl dist(x: number, d: number)
.printsize dist
dist(0, 0).
dist(y, d + w) :- dist(x, d), edge(x, y, w).
dist(x, d1) <= dist(x, d2) :- d2 <= d1.
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=300)
    parser.add_argument("-r", "--repeat", type=int, default=3)
    parser.add_argument("--chords", type=int, default=1, help="random chords from each node (0: a plain ring)")
    parser.add_argument("--engines", default="fast,compiled")
    parser.add_argument("--before", type=Path, help="another checkout to time the same way (its tprules/)")
    args = parser.parse_args()
    trees = {"this tree": Path(__file__).resolve().parents[1]}
    if args.before is not None:
        trees = {"before": args.before.resolve(), **trees}
    rng = random.Random(1)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        lines = []
        for i in range(args.nodes):
            lines.append(f"{i}\t{(i + 1) % args.nodes}\t{rng.randint(1, 9)}")
            for _ in range(args.chords):
                lines.append(f"{i}\t{rng.randrange(args.nodes)}\t{rng.randint(1, 50)}")
        (folder / "edge.facts").write_text("\n".join(lines) + "\n")
        (folder / "sp.dl").write_text(RULES)
        for engine in args.engines.split(","):
            best: dict[str, float] = {}
            printed: dict[str, str] = {}
            for _ in range(args.repeat):
                for name, tree in trees.items():  # alternately: the same load for both; run from the
                    # temporary folder, or `-m` would import the tprules of the working folder
                    start = time.perf_counter()
                    printed[name] = subprocess.run(
                        [sys.executable, "-m", "tprules", "eval", str(folder / "sp.dl"), "-F", str(folder), "-D", "-",
                         "--engine", engine], check=True, capture_output=True, text=True, cwd=folder,
                        env={**os.environ, "PYTHONPATH": str(tree)}).stdout
                    took = time.perf_counter() - start
                    best[name] = min(best.get(name, took), took)
            if len(set(printed.values())) != 1:
                print(f"{engine}: the trees disagree: {printed}")
                return 1
            for name in trees:
                label = f" ({name})" if len(trees) > 1 else ""
                print(f"{engine}{label}: {args.nodes} nodes, {len(lines)} edges: {printed[name].strip()} in "
                      f"{best[name]:.2f} s (best of {args.repeat}, start-up included)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
