"""Fused against unfused: one Llama decoder layer, tensor-parallel, run by `tprules run`'s engine.

    python benchmarks/bench_run.py [--device cpu|cuda|sim] [--repeat 3] [--tp 4 --seq 128 --hidden 1024 ...]

Plans compared, each compiled, run once to warm up, then run in `--repeat` rounds over
all plans (the fastest run of each counts):
- unfused: one kernel per statement (the baseline);
- planner: `tprules.planner.plan` (the fusion optimizer under the project's rules);
- hand: the usual fusions of a Llama layer, written out here and each checked legal by
  the rules first (a refused one is left unfused and named).
Every run is checked against the numpy reference. Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "facts"))


def hand_groups(tp: int) -> list[list[str]]:
    """Matmul siblings, matmul epilogues, attention scores with their softmax, the residual
    with the next rmsnorm, SwiGLU in its matmuls' epilogue."""
    groups = [["res1", "rms2"]]
    for c in range(tp):
        groups += [[f"q_{c}", f"v_{c}"], [f"k_{c}", f"kt_{c}"], [f"qk_{c}", f"scale_{c}", f"softmax_{c}"],
                   [f"pv_{c}", f"wo_{c}"], [f"gate_{c}", f"up_{c}", f"silu_{c}", f"swiglu_{c}"]]
    return groups


def checked_plan(ws, prog, groups):
    from tprules.planner.plan import Group, Plan

    answers = ws.ask({"+".join(g): tuple(g) for g in groups})
    legal = [g for g in groups if not answers["+".join(g)]]
    for g in groups:
        if answers["+".join(g)]:
            print(f"  hand plan: {'+'.join(g)} refused ({', '.join(answers['+'.join(g)])}), left unfused")
    taken = {o for g in legal for o in g}
    out = []
    for i, g in enumerate(legal):
        places = sorted({prog.places[o] for o in g} - {"collective"})
        out.append(Group(f"h{i}", tuple(sorted(g, key=prog.position.get)), places[0]))
    out += [Group(s.name, (s.name,), prog.places[s.name]) for s in prog.statements if s.name not in taken]
    return Plan(prog.shim, tuple(out))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="fused vs unfused run of a Llama layer")
    p.add_argument("--device", default="cpu", choices=("cpu", "sim", "cuda"))
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--tp", type=int, default=4)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--ffn", type=int, default=2816)
    p.add_argument("--plans", default="unfused,planner,hand", help="comma-separated: unfused, planner, hand")
    args = p.parse_args(argv)

    from generate import llama_layer

    from tprules.planner import plan as make_plan
    from tprules.runtime import Prepared, RunProgram
    from tprules.runtime.groups import unfused
    from tprules.workspace import Workspace

    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        b = llama_layer(args.tp, seq=args.seq, hidden=args.hidden, heads=args.heads, ffn=args.ffn)
        b.facts["member"].clear()
        ws = Workspace(b.write(Path(tmp) / "llama"))
        prog = RunProgram.from_workspace(ws)
        print(f"Llama layer: TP={args.tp}, seq {args.seq}, hidden {args.hidden}, heads {args.heads}, "
              f"ffn {args.ffn}; {len(prog.statements)} statements; shim {prog.shim}; device {args.device}")
        plans = {"unfused": lambda: unfused(prog), "planner": lambda: make_plan(ws),
                 "hand": lambda: checked_plan(ws, prog, hand_groups(args.tp))}
        names = args.plans.split(",")
        prepared = {name: Prepared(prog, plans[name](), args.device) for name in names}
        for ready in prepared.values():
            ready.run()  # warm up: first launches, thread pools, module loads
        best: dict[str, object] = {}
        busy: dict[str, float] = {}
        for _ in range(args.repeat):  # rounds over the plans, so drift in the machine's speed hits all alike
            for name, ready in prepared.items():
                done = ready.run()
                if name not in best or done.seconds < best[name].seconds:
                    best[name] = done
                cpu = list(done.cpu.values())
                spent = sum(cpu) if cpu and None not in cpu else sum(done.busy.values())
                busy[name] = min(busy.get(name, float("inf")), spent)
        rows = []
        for name, ready in prepared.items():
            r = ready.report(best[name])
            launches = sum(c.launches for c in r.chips)
            rows.append((name, r.groups, r.kernels, launches, written(ready, prog), r.compile_s, r.run_s, busy[name],
                         r.max_rel_err, r.ok, r.device))
        base = next((row for row in rows if row[0] == "unfused"), None)
        print(f"device: {rows[0][10]}; fastest of {args.repeat} runs each; setup {time.perf_counter() - started:.1f} s")
        print(f"{'plan':<8} {'groups':>6} {'kernels':>7} {'launches':>8} {'written':>9} {'compile':>8} "
              f"{'run (wall)':>16} {'kernel time':>17} {'max rel err':>11}  check")
        for name, groups, kernels, launches, stored, compile_s, run_s, busy_s, err, ok, _ in rows:
            wall = f"{run_s * 1e3:.1f}ms" + (f" {base[6] / run_s:.2f}x" if base else "")
            kernel = f"{busy_s * 1e3:.1f}ms" + (f" {base[7] / busy_s:.2f}x" if base else "")
            print(f"{name:<8} {groups:>6} {kernels:>7} {launches:>8} {stored / 2 ** 20:>6.1f}MiB {compile_s:>7.1f}s "
                  f"{wall:>16} {kernel:>17} {err:>11.2g}  {'ok' if ok else 'MISMATCH'}")
        print("written: bytes the kernels store per run; kernel time: the chips' kernel times added up "
              "(processor time on cpu when each chip has one thread, so other load on the machine counts less)")
        return 0 if all(row[9] for row in rows) else 1


def written(ready, prog) -> int:
    """Bytes the kernels write to memory in one run (outputs and scratch, on every chip that
    runs them): what fusion saves, whatever the machine's load."""
    from math import prod

    from tprules.runtime.executor import chips_of

    total = 0
    for k in ready.kernels:
        per_run = sum(prod(p.buffer_shape) * (1 if p.dtype == "i8" else 4)  # f16, bf16 are kept as f32
                      for p in k.params if p.role in ("out", "scratch"))
        total += per_run * len(chips_of(k, prog.chips))
    return total


if __name__ == "__main__":
    sys.exit(main())
