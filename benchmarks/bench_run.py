"""`tprules run` against what a user would run instead: one Llama decoder layer, tensor-parallel.

With `--hf llama,qwen3,gemma`: the Hugging Face model's own forward (eager, torch.compile)
against `tprules run` of its import at each TP (benchmarks/hf_layer.py).

    python benchmarks/bench_run.py [--tp 1,2,4] [--repeat 10] [--impls unfused,planner,numpy,torch,compile]
                                   [--device cpu|cuda|sim] [--matmul auto|library|own] [--seq 128 --hidden 1024 ...]

At each TP, in the same process and in interleaved rounds (each round runs every
implementation once, so drift in the machine's speed hits all alike; the fastest run of
each counts):
- unfused: `tprules run --unfused`, one kernel per statement;
- planner: `tprules run`, the planner's plan for the device (its cost model's estimate
  of the kernels' time is printed beside the measurement);
- hand: the usual fusions of a layer, each checked legal by the rules first;
- numpy: the program statement by statement, one numpy call each (tprules' reference);
- torch: PyTorch eager, one torch call per statement, on torch's own threads;
- compile: the same function through torch.compile (inductor), when it works here.
Every implementation's output is checked against the reference. FLOPs are the matmuls'
(2 m n k each). `cpu` is the process's processor time during the best run's kernels, which
other load on a shared machine disturbs less than the wall time. Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

# Several thread pools share this process (Numba's and PyTorch's OpenMP threads, numpy's
# OpenBLAS): an OpenMP pool that keeps spinning after its run would take the cores from the
# next implementation of the round. Passive waiting hands them back (set before OpenMP loads).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "facts"))
sys.path.insert(0, str(ROOT / "benchmarks"))

IMPLS = ("unfused", "planner", "hand", "numpy", "torch", "compile")


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


def matmul_flops(prog) -> float:
    total = 0.0
    for s in prog.statements:
        if s.cls == "matmul":
            (m, k), n = prog.tensors[s.reads[0]].shape, prog.tensors[s.writes].shape[1]
            total += 2.0 * m * n * k
    return total


def estimated_seconds(ready, machine: str) -> float:
    """The cost model's estimate of the kernels' time, added up over the chips that run them."""
    from tprules.codegen.cost import MACHINES, estimate
    from tprules.runtime.execution.executor import chips_of

    m = MACHINES[machine]
    return sum(m.seconds(estimate(k, m)) * len(chips_of(k, ready.prog.chips)) for k in ready.kernels)


class Kernels:
    """A tprules plan, prepared once; a run is one execution of all its kernels."""

    def __init__(self, prog, plan, device):
        from tprules.runtime import Prepared

        self.ready = Prepared(prog, plan, device)
        self.calls = len(self.ready.kernels)

    def run(self):
        done = self.ready.run()
        return done.seconds, done.process_cpu, done

    def check(self, done) -> tuple[bool, float]:
        """Whether every output matches, and the worst relative error against the reference and
        against expected/ (torch's own outputs, where the folder has them)."""
        r = self.ready.report(done)
        errs = [r.max_rel_err] + [o.expected.max_rel_err for o in r.outputs if o.expected is not None]
        return r.ok, max(errs)


class Statements:
    """The program run statement by statement by `step(statement, operands)`: numpy or torch."""

    def __init__(self, prog, inputs, expected, kind: str, gpu: bool = False):
        """`gpu`: torch on the GPU (a device other than cpu)."""
        self.prog, self.expected = prog, expected
        self.out = prog.outputs[0]
        self.calls = len(prog.statements)
        if kind == "numpy":
            from tprules.runtime.values.reference import reference

            self.fn = lambda: reference(prog, inputs).get(self.out)
            return
        import torch

        values = {t: torch.from_numpy(v.copy()).to("cuda" if gpu else "cpu") for t, v in inputs.items()}
        program = torch_program(prog, self.out)
        fn = program if kind == "torch" else torch.compile(program)
        if gpu:
            self.fn = lambda: fn(values).cpu().numpy()  # .cpu() waits for the GPU's work
        else:
            self.fn = lambda: fn(values).numpy()
        self.fn()  # the first call compiles (torch.compile) or warms up

    def run(self):
        started, cpu = time.perf_counter(), time.process_time()
        value = self.fn()
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        return seconds, cpu, value

    def check(self, value) -> tuple[bool, float]:
        import numpy as np

        ref = self.expected.get(self.out)
        err = float(np.max(np.abs(value - ref)) / max(float(np.max(np.abs(ref))), 1e-30))
        return err <= 1e-4, err


def torch_program(prog, out: str):
    """A function of the input tensors that runs the program one torch call per statement."""
    import torch

    def matmul(s, a, b):
        return a @ (b.T if s.attr("transpose_b") == "1" else b)

    def rmsnorm(s, x, w):
        return x / torch.sqrt(torch.mean(x * x, dim=-1, keepdim=True) + float(s.attr("eps", "1e-6"))) * w

    calls = {
        "matmul": matmul, "rmsnorm": rmsnorm,
        "add": lambda s, a, b: a + b, "mul": lambda s, a, b: a * b, "sub": lambda s, a, b: a - b,
        "silu": lambda s, x: torch.nn.functional.silu(x), "softmax": lambda s, x: torch.softmax(x, dim=-1),
        "scale": lambda s, x: x * float(s.attr("factor")), "transpose": lambda s, x: x.T,
        "sum": lambda s, *xs: sum(xs[1:], xs[0]),
    }
    steps = [(s, calls["sum" if s.fold else s.cls]) for s in prog.statements]

    def program(values):
        values = dict(values)
        for s, call in steps:
            values[s.writes] = call(s, *(values[t] for t in s.reads))
        return values[out]

    return program


def example_layer(tp: int, **shape):
    """facts/generate.py's Llama layer (loaded by its path: `generate` on sys.path is
    benchmarks/generate.py, the model-scale generator)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("facts_generate", ROOT / "facts" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.llama_layer(tp, **shape)


def build(args, tp: int, tmp: Path):
    from tprules.runtime import Program
    from tprules.workspace import Workspace

    b = example_layer(tp, seq=args.seq, hidden=args.hidden, heads=args.heads, ffn=args.ffn)
    b.facts["member"].clear()
    ws = Workspace(b.write(tmp / f"llama-tp{tp}"))
    return ws, Program.from_workspace(ws)


def bench_tp(args, tp: int, tmp: Path) -> list[dict]:
    from tprules.planner import plan as make_plan
    from tprules.runtime.devices import get_device
    from tprules.runtime.plan.groups import unfused
    from tprules.runtime.values.inputs import program_inputs
    from tprules.runtime.values.reference import reference

    ws, prog = build(args, tp, tmp)
    device = get_device(args.device, args.matmul)
    inputs = program_inputs(prog)
    expected = reference(prog, inputs)
    impls: dict[str, object] = {}
    notes = []
    for name in args.impls:
        try:
            if name == "unfused":
                impls[name] = Kernels(prog, unfused(prog), device)
            elif name == "planner":
                impls[name] = Kernels(prog, make_plan(ws, machine=device.machine), device)
            elif name == "hand":
                impls[name] = Kernels(prog, checked_plan(ws, prog, hand_groups(tp)), device)
            else:
                impls[name] = Statements(prog, inputs, expected, name, gpu=args.device == "cuda")
        except Exception as err:  # noqa: BLE001 - torch.compile needs a compiler toolchain; report and go on
            notes.append(f"{name}: not run ({type(err).__name__}: {' '.join(str(err).split())[:160]})")
    for impl in impls.values():
        impl.run()  # warm up: first launches, thread pools, module loads
    best: dict[str, tuple] = {}
    for _ in range(args.repeat):  # rounds over the implementations
        for name, impl in impls.items():
            seconds, cpu, result = impl.run()
            if name not in best or seconds < best[name][0]:
                best[name] = (seconds, best.get(name, (0, float("inf")))[1], result)
            best[name] = (best[name][0], min(best[name][1], cpu), best[name][2])
    flops = matmul_flops(prog)
    rows = []
    for name, impl in impls.items():
        seconds, cpu, result = best[name]
        ok, err = impl.check(result)
        est = estimated_seconds(impl.ready, device.machine) if isinstance(impl, Kernels) else None
        rows.append({"tp": tp, "impl": name, "calls": impl.calls, "wall": seconds, "cpu": cpu, "est": est,
                     "gflops": flops / seconds / 1e9, "ok": ok, "err": err})
    for note in notes:
        print(f"  TP={tp} {note}")
    return rows


def add_layer_options(p: argparse.ArgumentParser) -> None:
    """The Llama layer's shape (the benchmarks' default: seq 128, hidden 1024, 16 heads, ffn 2816)."""
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--ffn", type=int, default=2816)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="tprules run against numpy and PyTorch on a Llama layer")
    p.add_argument("--device", default="cpu", choices=("cpu", "sim", "cuda"))
    p.add_argument("--matmul", default="auto", choices=("auto", "library", "own"))
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--tp", default="1,2,4", help="comma-separated chip counts")
    add_layer_options(p)
    p.add_argument("--impls", default="unfused,planner,numpy,torch,compile",
                   help=f"comma-separated, of: {', '.join(IMPLS)}")
    p.add_argument("--hf", default="", help="comma-separated model types (llama,qwen3,gemma; mixtral,qwen3_moe,olmoe,"
                   "deepseek_v3,qwen2_moe, ...: mixtures of experts): the Hugging Face "
                   "model's own forward (eager, torch.compile) against `tprules run` of its import (hf_layer.py)")
    p.add_argument("--kv-heads", type=int, default=4, help="with --hf: key/value heads")
    p.add_argument("--layers", type=int, default=1, help="with --hf: decoder layers")
    p.add_argument("--vocab", type=int, default=1024, help="with --hf: vocabulary size")
    p.add_argument("--threads", type=int, default=2, help="with --hf: torch's threads")
    p.add_argument("--batch", type=int, default=1, help="with --hf: batch size (a decode-sized step: --seq 1 --batch 8)")
    p.add_argument("--experts", type=int, default=4, help="with --hf, a mixture of experts: experts")
    p.add_argument("--top-k", type=int, default=2, help="with --hf, a mixture of experts: experts per token")
    p.add_argument("--moe-ffn", type=int, default=1408, help="with --hf, a mixture of experts: an expert's width")
    p.add_argument("--batched-mm", action="store_true",
                   help="with --hf, a mixture of experts: also run its import in the batched_mm form")
    p.add_argument("--decode-batch", type=int, default=0, metavar="B",
                   help="with --hf: also each mixture of experts at a decode-sized step (seq 1, batch B), its "
                   "import in both experts' forms (grouped_mm and batched_mm), in the same run")
    args = p.parse_args(argv)
    if args.hf:
        import hf_layer

        args.hf = [m for m in args.hf.split(",") if m]
        args.tp = [int(t) for t in args.tp.split(",")]
        args.impls = [i for i in args.impls.split(",") if i]
        return hf_layer.main(args)
    args.impls = [i for i in args.impls.split(",") if i]
    unknown = sorted(set(args.impls) - set(IMPLS))
    if unknown:
        p.error(f"unknown implementations: {', '.join(unknown)}")
    if args.device != "cpu":  # numpy has no GPU; torch runs on the GPU with cuda
        args.impls = [i for i in args.impls if i in ("unfused", "planner", "hand")
                      or (args.device == "cuda" and i in ("torch", "compile"))]

    from tprules.runtime.devices import get_device

    started = time.perf_counter()
    device = get_device(args.device, args.matmul)
    print(f"Llama layer: seq {args.seq}, hidden {args.hidden}, heads {args.heads}, ffn {args.ffn}, float32; "
          f"device {device.describe()}; fastest of {args.repeat} interleaved runs each; "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}")
    _torch_note()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for tp in [int(t) for t in args.tp.split(",")]:
            rows += bench_tp(args, tp, Path(tmp))
    print_table(rows)
    print(f"(setup and runs: {time.perf_counter() - started:.0f} s)")
    return 0 if all(r["ok"] for r in rows) else 1


def _torch_note() -> None:
    try:
        import torch

        print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    except ImportError:
        print("torch: not installed (torch and compile columns skipped)")


def print_table(rows: list[dict]) -> None:
    print(f"{'TP':>2}  {'implementation':<14} {'calls':>5} {'wall':>9} {'GFLOP/s':>8} {'vs torch':>8} "
          f"{'vs unfused':>10} {'cpu':>9} {'estimate':>9}  check")
    for tp in sorted({r["tp"] for r in rows}):
        at = {r["impl"]: r for r in rows if r["tp"] == tp}
        for r in at.values():
            torch_wall = at["torch"]["wall"] if "torch" in at else None
            unfused = at.get("unfused")
            vs_torch = f"{r['wall'] / torch_wall:.2f}x" if torch_wall else "-"
            vs_unfused = (f"{unfused['wall'] / r['wall']:.2f}x" if unfused and r["impl"] in ("planner", "hand", "unfused")
                          else "-")
            est = f"{r['est'] * 1e3:.1f}ms" if r["est"] is not None else "-"
            print(f"{tp:>2}  {r['impl']:<14} {r['calls']:>5} {r['wall'] * 1e3:>7.1f}ms {r['gflops']:>8.1f} {vs_torch:>8} "
                  f"{vs_unfused:>10} {r['cpu'] * 1e3:>7.1f}ms {est:>9}  {'ok' if r['ok'] else 'MISMATCH'} "
                  f"({r['err']:.1g})")
    print("calls: kernels (tprules) or library calls (one per statement); vs torch: wall / PyTorch eager's; "
          "vs unfused: unfused wall / this wall (above 1: faster); cpu: process time while it ran; "
          "estimate: the cost model's kernel time, added up over the chips")


if __name__ == "__main__":
    sys.exit(main())
