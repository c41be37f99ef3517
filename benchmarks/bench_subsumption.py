"""Time subsumption (issue 27): shortest distances on a random weighted graph with cycles.

    python benchmarks/bench_subsumption.py               # 300 nodes, 600 edges, best of 3
    python benchmarks/bench_subsumption.py --nodes 1000 -r 1

Writes the graph (a ring with random weights, plus one random chord a node) and the rules
into a temporary folder, then runs `tprules eval` on each engine as its own process,
start-up included, and reports the best wall time and the size of dist (every node is
reachable through the ring, so dist must have one tuple a node).
"""

from __future__ import annotations

import argparse
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
    parser.add_argument("--engines", default="fast,compiled")
    args = parser.parse_args()
    rng = random.Random(1)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        lines = []
        for i in range(args.nodes):
            lines.append(f"{i}\t{(i + 1) % args.nodes}\t{rng.randint(1, 9)}")
            lines.append(f"{i}\t{rng.randrange(args.nodes)}\t{rng.randint(1, 50)}")
        (folder / "edge.facts").write_text("\n".join(lines) + "\n")
        (folder / "sp.dl").write_text(RULES)
        for engine in args.engines.split(","):
            best, printed = None, ""
            for _ in range(args.repeat):
                start = time.perf_counter()
                printed = subprocess.run([sys.executable, "-m", "tprules", "eval", str(folder / "sp.dl"), "-F",
                                          str(folder), "-D", "-", "--engine", engine], check=True,
                                         capture_output=True, text=True).stdout
                took = time.perf_counter() - start
                best = took if best is None else min(best, took)
            print(f"{engine}: {args.nodes} nodes, {len(lines)} edges: {printed.strip()} in {best:.2f} s "
                  f"(best of {args.repeat}, start-up included)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
