"""Benchmark `tprules plan` on a program folder: wall time of the whole command, and where it goes.

    python benchmarks/bench_plan.py DIR [--repeat N] [--shim NAME]

Prints the wall time of `python -m tprules plan DIR --format json` (start-up included;
best and median of N runs, peak memory), then one in-process run split into phases:
load, the planner's index, places, the cost model's inputs, the greedy rounds and, inside them,
proposing, choosing, asking the rules, and settling (the cost model and merging).
Time on a shared machine is noisy: CPU time is printed next to wall time.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def command_runs(folder: str, shim: str | None, repeat: int) -> None:
    cmd = [sys.executable, "-m", "tprules", "plan", folder, "--format", "json"] + (["--shim", shim] if shim else [])
    walls, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        walls.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"command: {' '.join(cmd[1:])}")
    print(f"  wall  best {min(walls):.2f} s   median {statistics.median(walls):.2f} s   ({repeat} runs)")
    print(f"  cpu   best {min(cpus):.2f} s   median {statistics.median(cpus):.2f} s")
    print(f"  peak memory {peak:.0f} MiB")


class Clock:
    def __init__(self):
        self.rows: list[tuple[str, float, float]] = []
        self._wall, self._cpu = time.perf_counter(), time.process_time()

    def lap(self, name: str) -> None:
        wall, cpu = time.perf_counter(), time.process_time()
        self.rows.append((name, wall - self._wall, cpu - self._cpu))
        self._wall, self._cpu = wall, cpu


def phases(folder: str, shim: str | None) -> None:
    sys.path.insert(0, str(ROOT))
    from tprules.planner import KernelCost, PlanIndex, checked_view, rules_asker, shim_machine
    from tprules.planner.greedy import Greedy
    from tprules.verdicts import place_ids
    from tprules.workspace import Workspace

    clock = Clock()
    ws = Workspace(folder, shim=shim)
    clock.lap("load + check facts")
    index = PlanIndex.of(ws.tensor_program)
    clock.lap("index (data flow, kinds)")
    on = place_ids(ws.places_model, ws.program.facts.symbols)
    places = [on.get(i, "") for i in index.ids.tolist()]
    clock.lap("places (rules, no candidates)")
    cost = KernelCost(checked_view(ws), shim_machine(ws.shim))
    clock.lap("cost model's inputs, shapes")
    greedy = Greedy(index, rules_asker(ws, index), places, cost=cost)
    clock.lap("groups")
    spent: dict[str, list[float]] = {}
    for name in ("vertical", "horizontal", "cross_place", "choose", "ask", "settle"):
        setattr(greedy, name, _timed(getattr(greedy, name), spent.setdefault(name, [0.0, 0.0])))
    greedy.run()
    clock.lap("greedy rounds")
    s = greedy.stats
    print(f"in-process: {len(index)} statements -> {len(greedy.groups)} groups; {s.rounds} rounds, "
          f"{s.asked} fused ops asked in {s.batches} batches ({s.refused} refused), {s.merged} merges, "
          f"{cost.lowered} kernels lowered for the cost model")
    for name, wall, cpu in clock.rows:
        print(f"  {name:<32} wall {wall:6.2f} s   cpu {cpu:6.2f} s")
    for name, (wall, cpu) in spent.items():
        print(f"    {name:<30} wall {wall:6.2f} s   cpu {cpu:6.2f} s")


def _timed(method, into: list[float]):
    def timed(*args):
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return method(*args)
        finally:
            into[0] += time.perf_counter() - wall
            into[1] += time.process_time() - cpu

    return timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--shim")
    args = parser.parse_args()
    os.environ.setdefault("TPRULES_CACHE_DIR", str(Path.home() / ".cache" / "tprules-bench"))
    command_runs(args.dir, args.shim, args.repeat)
    phases(args.dir, args.shim)


if __name__ == "__main__":
    main()
