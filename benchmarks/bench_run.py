"""Fused against unfused: one Llama decoder layer, tensor-parallel, run by `tprules run`'s engine.

    python benchmarks/bench_run.py [--device cpu|cuda|sim] [--repeat 3] [--tp 4 --seq 128 --hidden 1024 ...]

Plans compared, each run `--repeat` times (the fastest counts), compile time apart:
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
    from tprules.runtime import RunProgram, execute
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
        rows = []
        for name in args.plans.split(","):
            plan = plans[name]()
            r = execute(ws, plan, device=args.device, repeat=args.repeat, prog=prog)
            launches = sum(c.launches for c in r.chips)
            rows.append((name, r.groups, r.kernels, launches, r.compile_s, r.run_s, r.max_rel_err, r.ok, r.device))
        base = next((row[5] for row in rows if row[0] == "unfused"), None)
        print(f"device: {rows[0][8]}; fastest of {args.repeat} runs each; setup {time.perf_counter() - started:.1f} s")
        print(f"{'plan':<9} {'groups':>6} {'kernels':>7} {'launches':>8} {'compile':>9} {'run':>10} {'speed-up':>8} "
              f"{'max rel err':>11}  check")
        for name, groups, kernels, launches, compile_s, run_s, err, ok, _ in rows:
            speedup = f"{base / run_s:.2f}x" if base else "-"
            print(f"{name:<9} {groups:>6} {kernels:>7} {launches:>8} {compile_s:>8.1f}s {run_s * 1e3:>8.1f}ms "
                  f"{speedup:>8} {err:>11.2g}  {'ok' if ok else 'MISMATCH'}")
        return 0 if all(row[7] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
