"""One MoE layer on the same chips, its experts split two ways: TP experts (`moe_tp_experts`,
every chip a slice of every expert) against EP (`import hf --ep`, E/N whole experts per chip).

    python benchmarks/ep_vs_tp.py [--chips 2] [--seq 32] [--work DIR]

A Mixtral made here (hidden 256, 8 experts of FFN 512, top-2, one layer, no weights
downloaded) imported both ways, in each of transformers' experts forms (`--experts
grouped_mm`, the default, and `batched_mm`); for the experts module only (the groups `plan` places under
`model.layers.0.mlp.experts`): from `plan --show cost`, the bytes the experts' kernels move
on one chip, the all-reduce's bytes, and what each chip holds of the weights (`[inputs]`);
from `run --device cpu --trace`, the experts' kernels each chip runs and their time. Prints
a Markdown table (docs/import-tour.md's).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXPERTS = "model.layers.0.mlp.experts"
TP_EXPERTS = {"layers.*.mlp.experts.gate_up_proj": "packed_colwise", "layers.*.mlp.experts.down_proj": "rowwise",
              "layers.*.mlp.experts": "moe_tp_experts"}
CONFIG = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=1, num_attention_heads=4,
              num_key_value_heads=2, head_dim=64, vocab_size=128, num_local_experts=8, num_experts_per_tok=2,
              max_position_embeddings=128, initializer_range=0.05)
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20}


def tprules(*args) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "tprules", *map(str, args)], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"tprules {' '.join(map(str, args))}: exit {done.returncode}\n{done.stderr}")
    return done


def _bytes(text: str) -> float:
    number, unit = text.split()
    return float(number) * UNITS[unit]


def _size(n: float) -> str:
    for unit in ("MiB", "KiB"):
        if n >= UNITS[unit]:
            return f"{n / UNITS[unit]:.1f} {unit}"
    return f"{n:.0f} B"


def measure(folder: Path, chips: int) -> dict:
    groups = json.loads(tprules("plan", folder, "--format", "json").stdout)["groups"]
    mine = {g["group"]: g["place"] for g in groups if all(m.startswith(EXPERTS) for m in g["modules"])}
    err = tprules("plan", folder, "--show", "cost").stderr.splitlines()
    moved = {k: 0.0 for k in range(chips)}
    reduce = ""
    for line in err:
        m = re.match(r"\[cost\] (g\d+)\s+[\d.]+ ms  [^:]+: (?:[\d.]+ MFLOP, )?([\d.]+ \w+) moved", line)
        if m is None or m.group(1) not in mine:
            continue
        place = mine[m.group(1)]
        if place.startswith("chip:"):
            moved[int(place[5:])] += _bytes(m.group(2))
        if "all-reduce of" in line:
            reduce = line.split("all-reduce of ")[1].split(" over")[0]
    (inputs,) = [x for x in err if x.startswith("[inputs]")]
    own = inputs.split("chip 0 ")[1].split(",")[0]
    trace = folder.parent / f"{folder.name}-trace.json"
    tprules("run", folder, "--device", "cpu", "--trace", trace)
    events = json.loads(trace.read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    kernels = {k: 0 for k in range(chips)}
    busy = {k: 0.0 for k in range(chips)}
    for e in events:
        group = e.get("args", {}).get("group")
        if e.get("cat") == "kernel" and group in mine and mine[group].startswith("chip:"):
            kernels[e["tid"]] += 1
            busy[e["tid"]] += e["dur"]
    return {"moved": _size(moved[0]), "all_reduce": reduce, "weights_per_chip": own,
            "kernels": kernels[0], "busy_ms": busy[0] / 1e3}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chips", type=int, default=2)
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--work", default="/tmp/tprules-ep-vs-tp")
    args = ap.parse_args(argv)
    import torch
    from transformers import AutoModelForCausalLM, MixtralConfig

    work = Path(args.work)
    source = work / "mixtral"
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(MixtralConfig(**CONFIG)).save_pretrained(source)
    plan = work / "tp-experts.json"
    plan.write_text(json.dumps(TP_EXPERTS))
    rows = {}
    for form in ("grouped_mm", "batched_mm"):
        for name, extra in (("TP experts (moe_tp_experts)", ["--plan", plan]), ("EP (--ep)", ["--ep"])):
            out = work / f"{'ep' if extra == ['--ep'] else 'tp'}-{form}"
            tprules("import", "hf", source, "--tp", args.chips, "--seq", args.seq, "--out", out, "--experts", form,
                    *extra)
            rows[f"{name}, {form}"] = measure(out, args.chips)
    print(f"| one MoE layer, {args.chips} chips, seq {args.seq} | experts' bytes moved on chip 0 | all-reduce | "
          "expert weights on each chip | experts' kernels on chip 0 | their time on chip 0 (cpu) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, r in rows.items():
        print(f"| {name} | {r['moved']} | {r['all_reduce']} | {r['weights_per_chip']} | {r['kernels']} | "
              f"{r['busy_ms']:.2f} ms |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
