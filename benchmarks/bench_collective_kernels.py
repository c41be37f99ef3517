"""Figures of collective kernels (docs/collective-kernels.md): the same program planned with
them and without them, run over MPI ranks on the CPU; and check/plan of the 70B-shaped
sequence-parallel import under a shim that declares them against one that does not.

    python benchmarks/bench_collective_kernels.py ranks [--hidden 2048] [--seq 512] [--ranks 2 4] [--repeat 3]
    python benchmarks/bench_collective_kernels.py seventy [--tp 8] [--seq 2048] [--work DIR]

`ranks` writes a sequence-parallel layer (an all-gather of the tokens into the column
matmuls, GELU, the row matmuls into a reduce-scatter of the tokens, and a tensor-parallel
projection whose all-reduce feeds the residual add and RMSNorm) with two shims of its own,
`cpu:bench:SymmMem` (declares every pattern, `min_collective_block` 128) and
`cpu:bench:Plain` (the same answers, no pattern), and runs `tprules run --ranks N --trace`
under each: the run's time (`run_s` of the JSON, the fastest of --repeat) and, from the
trace, each kernel's compute, transfer in flight and the compute hidden by it (rank 0's,
over every run). `seventy` imports facts/recipes/llama3_70b.py as bench_torch_import.py does
and times `check` and `plan` under `cuda-lane:h200:Bf16SymmMem` and `cuda-lane:h100:Bf16`.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench import measure, tprules  # noqa: E402

DECLARING, PLAIN = "cpu:bench:SymmMem", "cpu:bench:Plain"
PATTERNS = ("all_gather_matmul", "matmul_reduce_scatter", "all_reduce_norm")


def sp_layer(chips: int, hidden: int, seq: int, ffn: int):
    """The layer as a ProgramBuilder, its two shims declared in the program."""
    from tprules.program.builder import ProgramBuilder
    from tprules.shim.base import own_shim

    b = ProgramBuilder(chips=chips)
    limits = {"min_collective_block": 128, "max_members": 64, "max_inputs": 64, "max_matmuls": 16}
    own_shim(b, DECLARING, PATTERNS, limits)
    own_shim(b, PLAIN, (), {k: v for k, v in limits.items() if k != "min_collective_block"})
    rows = seq // chips
    xs = [b.tensor(f"x_{k}", [rows, hidden], chip=k) for k in range(chips)]
    x = b.gather("ag", xs, b.tensor("x", [seq, hidden], spine=True), "sp_in", axis=0)
    parts = []
    for k in range(chips):
        h = b.stmt(f"up_{k}", "matmul", [x, b.tensor(f"w1_{k}", [hidden, ffn // chips], chip=k)],
                   b.tensor(f"h_{k}", [seq, ffn // chips], chip=k))
        a = b.stmt(f"act_{k}", "gelu", [h], b.tensor(f"a_{k}", [seq, ffn // chips], chip=k))
        parts.append(b.stmt(f"down_{k}", "matmul", [a, b.tensor(f"w2_{k}", [ffn // chips, hidden], chip=k)],
                            b.tensor(f"p_{k}", [seq, hidden], chip=k)))
    ys = b.reduce_scatter("rs", parts, b.tensor("y", [seq, hidden], spine=True), "sp_out", axis=0,
                          blocks=[b.tensor(f"y_{k}", [rows, hidden], chip=k) for k in range(chips)])
    for k, y in enumerate(ys):
        b.stmt(f"res_{k}", "add", [y, xs[k]], b.tensor(f"r_{k}", [rows, hidden], chip=k))
    z = b.tensor("z", [seq, hidden], spine=True)
    proj = [b.stmt(f"proj_{k}", "matmul", [z, b.tensor(f"wo_{k}", [hidden, hidden], chip=k)],
                   b.tensor(f"q_{k}", [seq, hidden], chip=k)) for k in range(chips)]
    s = b.fold("ar", proj, b.tensor("s", [seq, hidden], spine=True), "proj_out")
    t = b.stmt("resid", "add", [s, z], b.tensor("t", [seq, hidden], spine=True))
    b.stmt("norm", "rmsnorm", [t, b.tensor("nw", [hidden], spine=True)], b.tensor("n", [seq, hidden], spine=True))
    return b


def kernel_times(trace: Path) -> dict[str, dict[str, float]]:
    """Rank 0's collective kernels from a trace: pattern → seconds of compute, transfer in
    flight and compute hidden, summed over every run in the trace, and the runs counted."""
    events = json.loads(trace.read_text())["traceEvents"]
    pid0 = min(e["pid"] for e in events if e.get("ph") == "X")
    out: dict[str, dict[str, float]] = {}
    for e in events:
        if e.get("ph") == "X" and e["pid"] == pid0 and e["cat"] == "collective" and "hidden_s" in e["args"]:
            row = out.setdefault(e["args"]["kind"], {"runs": 0, "compute_s": 0.0, "transfer_s": 0.0, "hidden_s": 0.0,
                                                     "wall_s": 0.0})
            row["runs"] += 1
            row["wall_s"] += e["dur"] / 1e6
            for key in ("compute_s", "transfer_s", "hidden_s"):
                row[key] += e["args"][key]
    return out


def collectives(trace: Path) -> dict[str, float]:
    """Rank 0's folds run alone (the plain shim's collectives): kind → seconds, every run."""
    events = json.loads(trace.read_text())["traceEvents"]
    pid0 = min(e["pid"] for e in events if e.get("ph") == "X")
    out: dict[str, float] = {}
    for e in events:
        if e.get("ph") == "X" and e["pid"] == pid0 and e["cat"] == "collective" and "hidden_s" not in e["args"]:
            kind = e["args"].get("kind", e["name"])
            out[kind] = out.get(kind, 0.0) + e["dur"] / 1e6
    return out


def ranks(args) -> int:
    lines = [f"Sequence-parallel layer, hidden {args.hidden}, sequence {args.seq}, ffn {args.ffn}, CPU; "
             f"fastest of {args.repeat} runs", "",
             "| ranks | shim | run (ms) | kernel | compute (ms) | transfer in flight (ms) | hidden (ms) |",
             "|---:|---|---:|---|---:|---:|---:|"]
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.ranks:
            folder = sp_layer(n, args.hidden, args.seq, args.ffn).write(Path(tmp) / f"layer-{n}")
            for shim in (DECLARING, PLAIN):
                trace = Path(tmp) / f"trace-{n}-{shim.split(':')[-1]}.json"
                out = Path(tmp) / f"run-{n}-{shim.split(':')[-1]}.out"
                run = measure(tprules("run", folder, "--shim", shim, "--ranks", n, "--repeat", args.repeat,
                                      "--format", "json", "--trace", trace), out, args.timeout)
                if run.status != 0:
                    lines.append(f"| {n} | {shim} | failed: {out.with_suffix('.err').read_text().strip()[-200:]} |")
                    continue
                report = json.loads(out.read_text())
                ms = report["run_s"] * 1e3
                times = kernel_times(trace)
                if not times:
                    alone = ", ".join(f"{k} {v * 1e3 / args.repeat:.1f}" for k, v in sorted(collectives(trace).items()))
                    lines.append(f"| {n} | {shim} | {ms:.1f} | none (folds alone, ms a run: {alone}) | | | |")
                for kind, row in sorted(times.items()):
                    per = row["runs"] or 1
                    lines.append(f"| {n} | {shim} | {ms:.1f} | {kind} | {row['compute_s'] * 1e3 / per:.1f} | "
                                 f"{row['transfer_s'] * 1e3 / per:.1f} | {row['hidden_s'] * 1e3 / per:.1f} |")
    print("\n".join(lines))
    return 0


def seventy(args) -> int:
    work = args.work or Path(tempfile.mkdtemp(prefix="tprules-70b-"))
    out = work / "program"
    if not (out / "op.facts").exists():
        run = measure(tprules("import", "torch", args.recipe.resolve().relative_to(ROOT), "--tp", args.tp, "--seq", args.seq,
                              "--no-data", "--no-verify", "--out", out), work / "import.out", args.timeout)
        if run.status != 0:
            print(f"import failed: {(work / 'import.err').read_text().strip()[-300:]}")
            return 1
    lines = [f"{args.recipe.name}, torchtitan's plan with sequence parallel, TP {args.tp}, sequence {args.seq}, "
             f"no weights; best of {args.repeat}", "", "| command | shim | wall (s) | CPU (s) | peak (MiB) |",
             "|---|---|---:|---:|---:|"]
    for step in ("check", "plan"):
        for shim in ("cuda-lane:h100:Bf16", "cuda-lane:h200:Bf16SymmMem"):
            runs = [measure(tprules(step, out, "--shim", shim, "--format", "json"), work / f"{step}.out", args.timeout)
                    for _ in range(args.repeat)]
            ok = [r for r in runs if r.status == 0]
            if not ok:
                lines.append(f"| {step} | {shim} | failed | | |")
                continue
            best = min(ok, key=lambda r: r.wall_s)
            lines.append(f"| {step} | {shim} | {best.wall_s:.2f} | {best.cpu_s:.2f} | {best.peak_mib:.0f} |")
    print("\n".join(lines))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="what", required=True)
    r = sub.add_parser("ranks")
    r.add_argument("--hidden", type=int, default=2048)
    r.add_argument("--seq", type=int, default=512)
    r.add_argument("--ffn", type=int, default=4096)
    r.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    r.add_argument("--repeat", type=int, default=3)
    r.add_argument("--timeout", type=float, default=1800.0)
    s = sub.add_parser("seventy")
    s.add_argument("--tp", type=int, default=8)
    s.add_argument("--seq", type=int, default=2048)
    s.add_argument("--repeat", type=int, default=1)
    s.add_argument("--work", type=Path)
    s.add_argument("--recipe", type=Path, default=ROOT / "facts" / "recipes" / "llama3_70b.py")
    s.add_argument("--timeout", type=float, default=1800.0)
    args = p.parse_args(argv)
    return ranks(args) if args.what == "ranks" else seventy(args)


if __name__ == "__main__":
    sys.exit(main())
