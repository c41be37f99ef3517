"""One process against MPI ranks: the Llama layer at TP 4 run by `tprules run` in one
process (a thread per chip) and with `--ranks 1, 2, 4` (processes started by mpiexec).

    python benchmarks/bench_ranks.py [--ranks 1,2,4] [--repeat 10] [--rounds 2] [--seq 128 --hidden 1024 ...]

Each configuration is a real command line (`tprules run DIR [--ranks N] --repeat R
--format json`), run in interleaved rounds so that drift in the machine's load hits all
alike; per configuration the round with the fastest run counts. Printed per
configuration: the fastest run of the program (its slowest rank), the all-reduce share of
it (each rank's time in all-reduces, waiting for slower ranks included, over its run
time, averaged over ranks), the bytes each rank hands to its all-reduces per run, the
kernel time added up over the chips, and the wall time of the whole command (start,
planning, compiling, the R runs, the report). Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "facts"))


def run(folder: Path, ranks: int | None, repeat: int, device: str) -> dict:
    command = [sys.executable, "-m", "tprules", "run", str(folder), "--repeat", str(repeat), "--format", "json",
               "--device", device]
    if ranks is not None:
        command += ["--ranks", str(ranks)]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}): {done.stderr.strip()}")
    report = json.loads(done.stdout)
    report["command_s"] = wall
    return report


def figures(report: dict) -> dict:
    ranks = report.get("ranks", [])
    share = sum(r["allreduce_s"] / r["run_s"] for r in ranks) / len(ranks) if ranks else 0.0
    return {"run_s": report["run_s"], "share": share,
            "bytes": ranks[0]["allreduce_bytes"] if ranks else 0,
            "kernel_s": sum(c["busy_s"] for c in report["chips"]), "command_s": report["command_s"],
            "ok": report["ok"], "max_rel_err": report["max_rel_err"]}


def main(argv=None) -> int:
    from bench_run import add_layer_options

    p = argparse.ArgumentParser(description="the Llama layer in one process and on MPI ranks")
    p.add_argument("--ranks", default="1,2,4", help="comma-separated rank counts (default 1,2,4)")
    p.add_argument("--repeat", type=int, default=10, help="runs per command; the fastest counts")
    p.add_argument("--rounds", type=int, default=2, help="interleaved rounds over the configurations")
    p.add_argument("--device", default="cpu", choices=("cpu", "sim", "cuda"))
    p.add_argument("--tp", type=int, default=4)
    add_layer_options(p)
    args = p.parse_args(argv)

    from bench_run import example_layer

    with tempfile.TemporaryDirectory() as tmp:
        b = example_layer(args.tp, seq=args.seq, hidden=args.hidden, heads=args.heads, ffn=args.ffn)
        b.facts["member"].clear()
        folder = b.write(Path(tmp) / "llama")
        configs = [None] + [int(n) for n in args.ranks.split(",")]
        print(f"Llama layer: TP={args.tp}, seq {args.seq}, hidden {args.hidden}, heads {args.heads}, ffn {args.ffn}; "
              f"device {args.device}; {os.cpu_count()} cores; fastest of {args.repeat} runs x {args.rounds} rounds")
        best: dict = {}
        for _ in range(args.rounds):
            for n in configs:
                f = figures(run(folder, n, args.repeat, args.device))
                if n not in best or f["run_s"] < best[n]["run_s"]:
                    best[n] = f
        print(f"{'processes':<14} {'run':>9} {'all-reduce share':>17} {'all-reduce bytes/rank':>22} "
              f"{'kernel time':>12} {'command wall':>13}  check")
        for n in configs:
            f = best[n]
            name = "1 (threads)" if n is None else f"{n} rank{'s' if n > 1 else ''}"
            print(f"{name:<14} {f['run_s'] * 1e3:>7.1f}ms {f['share']:>16.0%} {f['bytes'] / 2 ** 10:>18.0f} KiB "
                  f"{f['kernel_s'] * 1e3:>10.1f}ms {f['command_s']:>12.1f}s  "
                  f"{'ok' if f['ok'] else 'MISMATCH'} ({f['max_rel_err']:.1g})")
        return 0 if all(f["ok"] for f in best.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
