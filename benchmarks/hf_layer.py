"""`tprules run` against what a user runs instead: the Hugging Face model's own forward.

    python benchmarks/bench_run.py --hf llama,qwen3,gemma [--tp 1,2,4] [--repeat 10] [--layers 1]
                                   [--seq 128 --hidden 1024 --ffn 2816 --heads 16 --kv-heads 4]
    python benchmarks/bench_run.py --hf mixtral,qwen3_moe,olmoe,deepseek_v3,qwen2_moe [--experts 4 --top-k 2
                                   --moe-ffn 1408] [--seq 1 --batch 8] [--batched-mm] [--decode-batch 8]

For each model type: transformers builds the causal LM from a config (its own modeling
code, eager attention, float32, seeded weights, nothing downloaded) and saves it; then, in
interleaved rounds (every implementation once a round, so the machine's drift hits all
alike; the fastest run of each counts):
- eager: `model(input_ids)` in torch eager, on torch's threads;
- compile: the same forward under `torch.compile` (inductor), where it works here;
- at each TP: `tprules import hf` of the saved folder (the same weights and ids), then its
  plan run (`tprules run`, the planner's plan) and its unfused run (one kernel a statement).
A mixture of experts (`MOE` below) gets `--experts` experts of width `--moe-ffn`, `--top-k`
a token; its import takes the experts in transformers' grouped_mm form (tprules' default),
and with `--batched-mm` in the batched_mm form too (`TP n planner, batched_mm`). torch's
forward runs transformers' default experts form (grouped_mm). The config's own TP plan is
imported (transformers 5.24's plans split attention and the experts, `moe_tp_experts`).
With `--decode-batch B`, after the models at `--seq`/`--batch`, each mixture of experts
again at a decode-sized step (seq 1, batch B), in both experts' forms, its own table: the
whole set of figures from one run.
Every tprules output is checked against the reference and against torch's own logits
(`expected/logits.npy`, the tolerance of `tprules run`). Not a test: it prints figures.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from bench_run import Kernels

# transformers' config keys for each model type (the rest is the shape given on the command line)
EXTRA = {
    "llama": {},
    "qwen3": {},
    "gemma": {"hidden_activation": "gelu_pytorch_tanh"},
}
MOE = ("mixtral", "qwen3_moe", "olmoe", "deepseek_v3", "qwen2_moe", "qwen3_next", "glm4_moe", "phimoe", "granitemoe")


def moe_fields(model_type: str, args) -> dict:
    """The experts' fields of a mixture of experts (each config names them its own way);
    every layer a MoE layer; a shared expert (DeepSeek-V3's, Qwen2-MoE's) as wide as one expert."""
    if model_type not in MOE:
        return {}
    e, k, w = args.experts, args.top_k, args.moe_ffn
    fields = {"num_local_experts": e, "num_experts": e, "n_routed_experts": e, "num_experts_per_tok": k,
              "moe_intermediate_size": w, "first_k_dense_replace": 0, "n_shared_experts": 1, "n_group": 1,
              "topk_group": 1, "decoder_sparse_step": 1, "mlp_only_layers": [], "shared_expert_intermediate_size": w}
    if model_type in ("mixtral", "phimoe", "olmoe"):
        fields["intermediate_size"] = w  # their experts' width is the config's intermediate_size
    if model_type == "granitemoe":
        fields["intermediate_size"] = w
    if model_type == "deepseek_v3":  # multi-head latent attention: rope and nope halves of the head, as many KV heads
        d = args.hidden // args.heads
        fields.update(qk_rope_head_dim=d // 2, qk_nope_head_dim=d // 2, v_head_dim=d, kv_lora_rank=4 * d,
                      q_lora_rank=4 * d, head_dim=d // 2, num_key_value_heads=args.heads)
    return fields


def make_folder(work: Path, model_type: str, args) -> Path:
    import torch
    import transformers
    from transformers import CONFIG_MAPPING, AutoModelForCausalLM

    transformers.utils.logging.disable_progress_bar()
    transformers.logging.set_verbosity_error()
    head_dim = args.hidden // args.heads
    fields = {"intermediate_size": args.ffn, **EXTRA.get(model_type, {}), **moe_fields(model_type, args)}
    config = CONFIG_MAPPING[model_type](
        hidden_size=args.hidden, num_hidden_layers=args.layers,
        num_attention_heads=args.heads, **{"num_key_value_heads": args.kv_heads, "head_dim": head_dim, **fields},
        vocab_size=args.vocab, max_position_embeddings=max(2 * args.seq, 256), pad_token_id=0, bos_token_id=1,
        eos_token_id=2)
    torch.manual_seed(0)
    folder = work / f"{model_type}-model"
    AutoModelForCausalLM.from_config(config, attn_implementation="eager", dtype=torch.float32).save_pretrained(folder)
    return folder


class Forward:
    """The model's own forward, `model(input_ids)`, eager or under torch.compile."""

    def __init__(self, folder: Path, ids, expected, compiled: bool):
        import torch
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager", dtype=torch.float32).eval()
        self.ids, self.expected, self.calls = torch.from_numpy(ids), expected, 1
        fn = torch.compile(model) if compiled else model
        self.torch = torch

        def forward():
            with torch.no_grad():
                return fn(input_ids=self.ids, use_cache=False).logits.numpy()

        self.fn = forward
        self.fn()  # torch.compile compiles on the first call

    def run(self):
        started, cpu = time.perf_counter(), time.process_time()
        value = self.fn()
        return time.perf_counter() - started, time.process_time() - cpu, value

    def check(self, value) -> tuple[bool, float]:
        import numpy as np

        err = float(np.max(np.abs(value - self.expected)) / max(float(np.max(np.abs(self.expected))), 1e-30))
        return err <= 1e-4, err


class Imported(Kernels):
    """`tprules run` of an imported folder: the planner's plan or unfused, prepared once."""

    def __init__(self, folder: Path, planned: bool, device):
        from tprules.planner import plan as make_plan
        from tprules.runtime import Program
        from tprules.runtime.plan.groups import unfused
        from tprules.workspace import Workspace

        ws = Workspace(folder)
        prog = Program.from_workspace(ws)
        plan = make_plan(ws, machine=device.machine) if planned else unfused(prog)
        super().__init__(prog, plan, device)


def bench_model(model_type: str, args, device) -> list[dict]:
    import numpy as np

    from tprules.frontends.drivers.hf import import_hf

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        folder = make_folder(work, model_type, args)
        impls: dict[str, object] = {}
        notes = []
        forms = ["grouped_mm"] + (["batched_mm"] if args.batched_mm and model_type in MOE else [])
        for tp in args.tp:
            out = work / f"{model_type}-tp{tp}"
            import_hf(folder, tp=tp, out=out, seq=args.seq, batch=args.batch)
            if "eager" not in impls:
                ids = np.load(out / "data" / "input_ids.npy")
                expected = np.load(out / "expected" / "logits.npy")
                impls["eager"] = Forward(folder, ids, expected, compiled=False)
                if "compile" in args.impls:
                    try:
                        impls["compile"] = Forward(folder, ids, expected, compiled=True)
                    except Exception as err:  # noqa: BLE001 - inductor needs a compiler toolchain; report and go on
                        notes.append(f"compile: not run ({type(err).__name__}: {' '.join(str(err).split())[:160]})")
            for name in ("planner", "unfused"):
                if name in args.impls:
                    impls[f"TP {tp} {name}"] = Imported(out, name == "planner", device)
            for form in forms[1:]:  # the other experts' form, for comparison
                other = work / f"{model_type}-tp{tp}-{form}"
                import_hf(folder, tp=tp, out=other, seq=args.seq, batch=args.batch, experts=form)
                for name in ("planner", "unfused"):
                    if name in args.impls:
                        impls[f"TP {tp} {name}, {form}"] = Imported(other, name == "planner", device)
        best = interleaved(impls, args.repeat)
        for name, impl in impls.items():
            seconds, cpu, result = best[name]
            ok, err = impl.check(result)
            rows.append({"model": model_type, "impl": name, "calls": impl.calls, "wall": seconds, "cpu": cpu,
                         "ok": ok, "err": err})
        for note in notes:
            print(f"  {model_type} {note}")
    return rows


def interleaved(impls: dict, repeat: int) -> dict[str, list]:
    """Each implementation's [fastest wall, least cpu, the fastest run's result]: one warm-up
    run each, then `repeat` rounds, each running every implementation once."""
    for impl in impls.values():
        impl.run()  # warm up
    best: dict[str, list] = {}
    for _ in range(repeat):
        for name, impl in impls.items():
            seconds, cpu, result = impl.run()
            b = best.setdefault(name, [float("inf"), float("inf"), None])
            if seconds < b[0]:
                b[0], b[2] = seconds, result
            b[1] = min(b[1], cpu)
    return best


def print_table(rows: list[dict], args) -> None:
    moe = f", MoE: {args.experts} experts of {args.moe_ffn}, top {args.top_k}" if any(m in MOE for m in args.hf) else ""
    print(f"\nbatch {args.batch}, seq {args.seq}, hidden {args.hidden}, ffn {args.ffn}, {args.heads} heads, "
          f"{args.kv_heads} KV heads{moe}, "
          f"{args.layers} layer(s), vocab {args.vocab}, float32; fastest of {args.repeat} interleaved rounds")
    print("| model | run | kernels | wall | ÷ torch eager | ÷ unfused | cpu | check |\n|---|---|---:|---:|---:|---:|---:|---|")
    for model in dict.fromkeys(r["model"] for r in rows):
        at = {r["impl"]: r for r in rows if r["model"] == model}
        eager = at["eager"]["wall"]
        for name, r in at.items():
            unfused = at.get(name.replace("planner", "unfused")) if "planner" in name else None
            if unfused is None and "planner" in name:
                unfused = at.get(name.replace("planner", "unfused").split(",")[0])
            vs_unfused = f"{r['wall'] / unfused['wall']:.2f}" if unfused else ""
            label = {"eager": "torch eager, `model(ids)`", "compile": "torch.compile"}.get(name, f"`tprules run`, {name}")
            calls = "" if name in ("eager", "compile") else str(r["calls"])
            print(f"| {model} | {label} | {calls} | {r['wall'] * 1e3:.1f} ms | {r['wall'] / eager:.2f} | {vs_unfused} | "
                  f"{r['cpu'] * 1e3:.1f} ms | {'ok' if r['ok'] else 'MISMATCH'} ({r['err']:.1g}) |")
    print("÷ unfused: the planner's wall over the unfused wall at the same TP (below 1: faster); cpu: the least "
          "processor time of the process in a round (less disturbed by other load than the wall)")


def main(args) -> int:
    import copy
    import os

    from tprules.runtime.devices import get_device

    device = get_device(args.device, args.matmul)
    import torch

    torch.set_num_threads(args.threads)
    print(f"device {device.describe()}; torch {torch.__version__}, {torch.get_num_threads()} threads; "
          f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} at the start")
    shapes = [(args, args.hf)]
    if getattr(args, "decode_batch", 0):
        step = copy.copy(args)
        step.seq, step.batch, step.batched_mm = 1, args.decode_batch, True
        shapes.append((step, [m for m in args.hf if m in MOE]))
    tables = []
    for shape, models in shapes:
        rows = []
        for model_type in models:
            done = bench_model(model_type, shape, device)
            rows += done
            print(f"  {model_type} (seq {shape.seq}, batch {shape.batch}): done", flush=True)
            if len(args.hf) > 1:  # each model's rows as they come (a long run cut short keeps them)
                print_table(done, shape)
        tables.append((rows, shape))
    for rows, shape in tables:
        print_table(rows, shape)
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} at the end")
    return 0 if all(r["ok"] for rows, _ in tables for r in rows) else 1
