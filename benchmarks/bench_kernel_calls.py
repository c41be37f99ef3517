"""Each kernel of a planned program called alone, many times: where the time goes, per kind.

    python benchmarks/bench_kernel_calls.py DIR [--calls 15] [--threads 1] [--unfused]

The program is planned for the CPU and run once (so every buffer holds its values); then
each kernel's compiled function is called `--calls` times in a row on those buffers, on
`--threads` Numba threads, and the fastest and median call are printed, then the fastest
calls added up per kind of kernel. A kernel called alone is less disturbed by other load
than a whole run (`tprules run --show timing`), and on one thread it measures work, not
the scheduling of threads. Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir")
    p.add_argument("--calls", type=int, default=15)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--unfused", action="store_true")
    args = p.parse_args(argv)

    import numba

    from tprules.planner import plan as make_plan
    from tprules.runtime import Prepared, Program
    from tprules.runtime.devices import get_device
    from tprules.runtime.devices.cpu import CpuQueue
    from tprules.runtime.plan.groups import unfused
    from tprules.workspace import Workspace

    ws = Workspace(args.dir)
    prog = Program.from_workspace(ws)
    device = get_device("cpu", "auto")
    plan = unfused(prog) if args.unfused else make_plan(ws, machine=device.machine)
    calls = []
    launch = CpuQueue.launch

    def record(queue, compiled, buffers):  # the buffers each kernel runs on, kept for the calls below
        calls.append((compiled, buffers))
        launch(queue, compiled, buffers)

    CpuQueue.launch = record
    Prepared(prog, plan, device).run()
    CpuQueue.launch = launch
    numba.set_num_threads(args.threads)
    kinds: dict[str, list] = {}
    for compiled, buffers in calls:
        times = []
        for _ in range(args.calls):
            started = time.perf_counter()
            compiled.fn(*buffers)
            times.append(time.perf_counter() - started)
        times.sort()
        k = compiled.kernel
        print(f"{k.group:<6} {k.place:<10} {k.kind:<36} fastest {times[0] * 1e3:8.3f} ms  median "
              f"{times[len(times) // 2] * 1e3:8.3f} ms  {', '.join(k.members)[:70]}")
        entry = kinds.setdefault(k.kind, [0, 0.0])
        entry[0] += 1
        entry[1] += times[0]
    print(f"\nper kind (fastest calls added up, {args.threads} thread(s)):")
    for kind, (n, seconds) in sorted(kinds.items(), key=lambda kv: -kv[1][1]):
        print(f"  {kind:<36} {n:>4} kernels {seconds * 1e3:9.3f} ms")
    print(f"  {'all':<36} {sum(n for n, _ in kinds.values()):>4} kernels "
          f"{sum(s for _, s in kinds.values()) * 1e3:9.3f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
