"""Every fusion of the planner's plan against its parts: measured and estimated, group by group.

    python benchmarks/bench_fusion.py [--tp 4] [--repeat 15] [--seq 128 --hidden 1024 ...]

For the Llama layer of bench_run.py on the cpu device: each fused group's kernel, and the
unfused kernels of its members, are run alone on the inputs of a real run (fresh output
buffers each time, as the executor gives each launch), with the
chip's threads, in turns, the fastest of `--repeat` runs counting (processor time: of the thread
with one thread a chip, of the process with more); beside them the cost model's estimates (codegen/cost.py)
that made the planner fuse them. `parts/fused` above 1: the fusion is faster. Not a test.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "facts"))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def buffers(kernel, held, chip: int) -> list:
    import numpy as np

    out = []
    for p in kernel.params:
        dtype = {"i8": np.int8, "i32": np.int32}.get(p.dtype, np.float32)
        if p.role == "in":
            where = held[p.tensor]
            out.append(where.get(chip, next(iter(where.values()))))
        elif p.role == "local":
            out.append(held[dict(p.local)[chip]][chip])
        elif p.role == "scale":
            out.append(np.zeros(p.buffer_shape, dtype))
        else:
            out.append(np.empty(p.buffer_shape, dtype))
    return out


def main(argv=None) -> int:
    from bench_run import add_layer_options

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tp", type=int, default=4)
    p.add_argument("--repeat", type=int, default=15)
    add_layer_options(p)
    args = p.parse_args(argv)

    import numba
    from bench_run import build

    from tprules.codegen.cost import MACHINES, estimate
    from tprules.planner import plan as make_plan
    from tprules.runtime import Prepared
    from tprules.runtime.devices import get_device
    from tprules.runtime.execution.executor import chips_of
    from tprules.runtime.plan.groups import unfused

    with tempfile.TemporaryDirectory() as tmp:
        ws, prog = build(args, args.tp, Path(tmp))
        device = get_device("cpu")
        planned = Prepared(prog, make_plan(ws, machine=device.machine), device)
        alone = Prepared(prog, unfused(prog), device)
        held = alone.run().held
        threads = device.threads
        numba.set_num_threads(threads)
        clock = time.thread_time if threads == 1 else time.process_time  # every thread's time, not the wait
        machine = MACHINES[device.machine]

        def once(kernels: list, chip: int) -> float:
            """One run of `kernels` back to back (the parts of a fusion as one sum, so that the
            fastest of several runs is not the sum of each part's luckiest run)."""
            calls = [(c.fn, buffers(c.kernel, held, chip)) for c in kernels]  # fresh outputs, as each launch has
            started = clock()
            for fn, bufs in calls:
                fn(*bufs)
            return clock() - started

        def timed(fused, parts: list, chip: int) -> tuple[float, float]:
            """The fastest run of the fused kernel and of its parts, taking turns (load hits both alike)."""
            once([fused], chip), once(parts, chip)  # warm up
            best_fused = best_parts = float("inf")
            for _ in range(args.repeat):
                best_fused = min(best_fused, once([fused], chip))
                best_parts = min(best_parts, once(parts, chip))
            return best_fused, best_parts

        by_member = {c.kernel.members[0]: c for c in alone.compiled}
        print(f"Llama layer TP={args.tp} on {device.describe()}; each chip {threads} thread(s); fastest of "
              f"{args.repeat} (processor time of {'the thread' if threads == 1 else 'the process'}), estimates for "
              f"{machine.name}")
        print(f"{'group':<34} {'kind':<18} {'fused':>9} {'parts':>9} {'parts/fused':>11} "
              f"{'est fused':>9} {'est parts':>9}")
        totals = [0.0, 0.0, 0.0, 0.0]
        for compiled in planned.compiled:
            k = compiled.kernel
            if len(k.members) == 1 or (args.tp > 1 and not k.members[0].endswith("_0") and k.place != "spine"):
                continue  # one chip's fusions stand for all
            chip = chips_of(k, prog.chips)[0]
            fused, parts = timed(compiled, [by_member[m] for m in k.members], chip)
            est_f = machine.seconds(estimate(k, machine))
            est_p = sum(machine.seconds(estimate(by_member[m].kernel, machine)) for m in k.members)
            for i, v in enumerate((fused, parts, est_f, est_p)):
                totals[i] += v
            print(f"{' '.join(k.members):<34} {k.kind:<18} {fused * 1e3:>7.2f}ms {parts * 1e3:>7.2f}ms "
                  f"{parts / fused:>10.2f}x {est_f * 1e3:>7.2f}ms {est_p * 1e3:>7.2f}ms")
        f, pa, ef, ep = totals
        print(f"{'all of the above':<34} {'':<18} {f * 1e3:>7.2f}ms {pa * 1e3:>7.2f}ms {pa / f:>10.2f}x "
              f"{ef * 1e3:>7.2f}ms {ep * 1e3:>7.2f}ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
