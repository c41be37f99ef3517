"""Time to the first result: a cold `tprules run` (empty kernel cache) against torch.compile's
first call on the same Llama decoder layer, the warm run, and the cold run of whole tiny models.

    python benchmarks/bench_cold.py [--tp 1,4] [--rounds 1] [--jobs N] [--models DIR,...] [--seq 128 --hidden 1024 ...]

For each TP, in each round, one after the other on the same machine (so a change in its load
hits all alike):
- tprules cold: the wall clock of the whole command `tprules run DIR` (interpreter start-up,
  planning, compiles, the run and the comparison with the reference), with an empty
  TPRULES_CACHE_DIR;
- tprules warm: the same command again, the cache filled by the cold run;
- torch.compile: the first call of the layer (one torch call per statement, benchmarks/bench_run.py's
  `torch_program`) through torch.compile, in a fresh process with an empty Inductor cache
  (TORCHINDUCTOR_CACHE_DIR), timed from torch.compile to its result (`first call`), and that
  process's whole wall clock (`process`, torch's import included).
`--models` adds the cold and warm `tprules run` of program folders (e.g. tiny models imported
with `tprules import hf`), with their distinct kernel sources and the moves that need none.
Not a test: it prints a Markdown table of what it measured, with the machine's load.
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
sys.path.insert(0, str(Path(__file__).resolve().parent))

TORCH_FIRST_CALL = """
import json, sys, time
sys.path[:0] = [{root!r}, {bench!r}]
import numpy as np
import torch
from bench_run import torch_program
from tprules.runtime import Program
from tprules.runtime.values.inputs import program_inputs
from tprules.workspace import Workspace
prog = Program.from_workspace(Workspace({folder!r}))
values = {{t: torch.from_numpy(v.copy()) for t, v in program_inputs(prog).items()}}
started = time.perf_counter()
fn = torch.compile(torch_program(prog, prog.outputs[0]))
fn(values)
print(json.dumps({{"first_call_s": time.perf_counter() - started}}))
"""


def tprules_run(folder: Path, cache: Path, jobs: int | None) -> dict:
    env = {**os.environ, "TPRULES_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "tprules", "run", str(folder), "--format", "json"]
    if jobs is not None:
        command += ["--jobs", str(jobs)]
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        return {"wall_s": wall, "error": (done.stderr.strip().splitlines() or ["?"])[-1]}
    report = json.loads(done.stdout)
    return {"wall_s": wall, "ok": report["ok"], "compile_s": report["compile_s"], "kernels": report["kernels"],
            "compiled": report["compiled"], "uncompiled": report.get("uncompiled", 0)}


def torch_first_call(folder: Path, inductor: Path) -> dict:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(inductor), "TRITON_CACHE_DIR": str(inductor / "triton")}
    script = TORCH_FIRST_CALL.format(root=str(ROOT), bench=str(Path(__file__).resolve().parent), folder=str(folder))
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        return {"process_s": wall, "error": (done.stderr.strip().splitlines() or ["?"])[-1]}
    return {"process_s": wall, **json.loads(done.stdout.strip().splitlines()[-1])}


def layer_folder(tp: int, args, tmp: Path) -> Path:
    from bench_run import example_layer

    b = example_layer(tp, seq=args.seq, hidden=args.hidden, heads=args.heads, ffn=args.ffn)
    b.facts["member"].clear()
    return b.write(tmp / f"llama-tp{tp}")


def row(name: str, round_: int, cold: dict, warm: dict, torch: dict) -> str:
    first = torch.get("first_call_s")
    status = "" if cold.get("ok", False) else f" ({cold.get('error', 'MISMATCH')})"
    cells = [name, str(round_), f"{cold['wall_s']:.1f} s{status}", f"{cold.get('compile_s', 0):.1f} s",
             f"{warm['wall_s']:.1f} s", f"{first:.1f} s" if first else torch.get("error", "-"),
             f"{torch['process_s']:.1f} s" if "process_s" in torch else "-",
             f"{cold['wall_s'] / first:.2f}" if first else "-",
             str(cold.get("kernels", "-")), str(cold.get("compiled", "-")), str(cold.get("uncompiled", "-")), load()]
    return "| " + " | ".join(cells) + " |"


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tp", default="1,4")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--jobs", type=int, default=None, help="tprules run --jobs (default: its own, one per core)")
    p.add_argument("--models", default="", help="comma-separated program folders to run cold and warm")
    p.add_argument("--no-torch", action="store_true", help="leave torch.compile out")
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--ffn", type=int, default=2816)
    args = p.parse_args(argv)
    print(f"{os.cpu_count()} cores; load average at the start {load()}")
    print("| program | round | tprules cold (wall) | compile | warm (wall) | torch.compile first call | "
          "its process | cold / first call | kernels | distinct sources | run by numpy | load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="tprules-cold-") as tmp_name:
        tmp = Path(tmp_name)
        folders = [(f"Llama layer TP {tp}", layer_folder(int(tp), args, tmp)) for tp in args.tp.split(",") if tp]
        folders += [(Path(m).name, Path(m)) for m in args.models.split(",") if m]
        for r in range(args.rounds):
            for n, (name, folder) in enumerate(folders):
                cache = tmp / f"cache-{r}-{n}"
                layer = name.startswith("Llama")
                torch = torch_first_call(folder, tmp / f"inductor-{r}-{n}") if layer and not args.no_torch else {}
                cold = tprules_run(folder, cache, args.jobs)
                warm = tprules_run(folder, cache, args.jobs)
                print(row(name, r + 1, cold, warm, torch), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
