"""A recursion that derives one tuple per round, for N rounds, on each engine (issue 27).

    python benchmarks/bench_rounds.py [--rounds 1000000] [--engines fast,compiled]

`b(x+1) :- a(x), x < N.` with `a(x) :- b(x), c(y), d(y).`: c and d are small and do not
depend on the head, so every round derives one a and one b. The whole `tprules eval`
command is timed (start-up included), once per engine: figures on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = """.decl a(x: number)
.decl b(x: number)
.decl c(y: number)
.decl d(y: number)
.printsize b
b(0).
c(1). c(2). c(3).
d(2). d(3). d(4).
b(x+1) :- a(x), x < {n}.
a(x) :- b(x), c(y), d(y).
"""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=1_000_000)
    parser.add_argument("--engines", default="fast,compiled")
    args = parser.parse_args(argv)
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with tempfile.TemporaryDirectory() as tmp:
        program = Path(tmp) / "chain.dl"
        program.write_text(PROGRAM.format(n=args.rounds))
        for engine in args.engines.split(","):
            start = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "tprules", "eval", str(program), "-D", "-", "--engine", engine],
                                  capture_output=True, text=True, env=env, cwd=tmp)
            seconds = time.perf_counter() - start
            answer = done.stdout.strip() or done.stderr.strip().splitlines()[-1]
            print(f"{engine:<10} {seconds:6.2f} s   {answer}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
