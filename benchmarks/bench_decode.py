"""One decode step of an imported Llama on the CPU: `tprules run` against the Hugging Face
model's own decode step in torch eager, with the same weights and the same KV cache.

    python benchmarks/bench_decode.py [--batch 1,8] [--tp 1] [--repeat 10] [--past 511 --cache-len 512]
                                      [--hidden 2048 --heads 16 --kv-heads 8 --ffn 5632 --layers 2 --vocab 4096]
                                      [--threads 2] [--impls eager,planner,unfused] [--keep DIR]

transformers builds a Llama from a config (its own modeling code, eager attention, float32,
seeded weights, nothing downloaded) and saves it. For each batch size, `tprules import hf
--decode` writes the program of one decode step after `--past` prompt tokens with a static
cache of `--cache-len` (data/: the caches as torch's own prefill left them, and the new
token); then, in interleaved rounds (every implementation once a round, so the machine's
drift hits all alike; the fastest run of each counts):
- eager: the model's own forward on the new token with transformers' `StaticCache` holding
  the same caches (its `index_copy_` writes the step's keys and values in place; each round
  writes the same position again), on torch's threads;
- at each TP: the imported step's plan (`tprules run`, the planner's plan for the CPU) and
  its unfused run (one kernel a statement). The time is the kernels' (the run's), as
  `tprules run` reports it: the weights and the caches are already where the kernels read them.
Every tprules output (logits and updated caches) is checked against the reference and
against torch's own step (expected/); torch eager's logits against expected/ too. Kernels per
step are the plan's kernels (summed over the chips' groups). Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see bench_run.py: OpenMP pools hand the cores back

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

IMPLS = ("eager", "planner", "unfused")


def make_folder(work: Path, args) -> Path:
    """A seeded float32 Llama of the given shape, saved with save_pretrained."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, LlamaConfig

    transformers.utils.logging.disable_progress_bar()
    transformers.logging.set_verbosity_error()
    config = LlamaConfig(hidden_size=args.hidden, num_hidden_layers=args.layers, num_attention_heads=args.heads,
                         num_key_value_heads=args.kv_heads, head_dim=args.hidden // args.heads,
                         intermediate_size=args.ffn, vocab_size=args.vocab, max_position_embeddings=args.cache_len,
                         pad_token_id=0, bos_token_id=1, eos_token_id=2)
    torch.manual_seed(0)
    folder = work / "llama-model"
    AutoModelForCausalLM.from_config(config, attn_implementation="eager", dtype=torch.float32).save_pretrained(folder)
    return folder


class EagerStep:
    """transformers' decode step in torch eager: `model(token, cache=StaticCache)`, the cache
    holding the import's data/ (torch's prefill of the prompt), its position reset each run."""

    def __init__(self, source: Path, folder: Path, batch: int, past: int, length: int):
        import numpy as np
        import torch
        from transformers import AutoModelForCausalLM, StaticCache

        model = AutoModelForCausalLM.from_pretrained(source, attn_implementation="eager", dtype=torch.float32).eval()
        self.cache = StaticCache(max_cache_len=length, config=model.config)
        data = folder / "data"
        self.ids = torch.from_numpy(np.load(data / "input_ids.npy"))
        with torch.no_grad():  # allocates every layer's cache (the first write), then fills it with data/
            model(input_ids=torch.zeros((batch, 1), dtype=torch.int64), cache=self.cache, use_cache=True)
        for i, layer in enumerate(self.cache.layers):
            layer.keys.copy_(torch.from_numpy(np.load(data / f"model.layers.{i}.key_cache.npy")))
            layer.values.copy_(torch.from_numpy(np.load(data / f"model.layers.{i}.value_cache.npy")))
        self.model, self.past, self.calls = model, past, None
        self.expected = np.load(folder / "expected" / "logits.npy")
        self.torch = torch

    def run(self):
        for layer in self.cache.layers:
            layer.cumulative_length.fill_(self.past)
        started, cpu = time.perf_counter(), time.process_time()
        with self.torch.no_grad():
            logits = self.model(input_ids=self.ids, cache=self.cache, use_cache=True).logits
        return time.perf_counter() - started, time.process_time() - cpu, logits.numpy()

    def check(self, value) -> tuple[bool, float]:
        import numpy as np

        err = float(np.max(np.abs(value - self.expected)) / max(float(np.max(np.abs(self.expected))), 1e-30))
        return err <= 1e-4, err


def bench_batch(source: Path, work: Path, batch: int, args, device) -> list[dict]:
    from hf_layer import Imported, interleaved

    from tprules.frontends.drivers.decode import import_decode

    impls: dict[str, object] = {}
    for tp in args.tp:
        folder = work / f"decode-b{batch}-tp{tp}"
        if not (folder / "source.json").is_file():  # (--keep: a folder imported before is taken as it is)
            started = time.perf_counter()
            import_decode(source, tp, folder, past=args.past, cache_len=args.cache_len, batch=batch, verify=False)
            print(f"  batch {batch} TP {tp}: imported in {time.perf_counter() - started:.1f} s", flush=True)
        if "eager" in args.impls and "eager" not in impls:
            impls["eager"] = EagerStep(source, folder, batch, args.past, args.cache_len)
        for name in ("planner", "unfused"):
            if name in args.impls:
                impls[f"TP {tp} {name}"] = Imported(folder, name == "planner", device)
    best = interleaved(impls, args.repeat)
    rows = []
    for name, impl in impls.items():
        seconds, cpu, result = best[name]
        ok, err = impl.check(result)
        rows.append({"batch": batch, "impl": name, "calls": impl.calls, "wall": seconds, "cpu": cpu, "ok": ok,
                     "err": err})
    return rows


def print_table(rows: list[dict], args) -> None:
    print(f"\nLlama decode step after {args.past} tokens, cache {args.cache_len}: hidden {args.hidden}, ffn {args.ffn}, "
          f"{args.heads} heads, {args.kv_heads} KV heads, {args.layers} layer(s), vocab {args.vocab}, float32; "
          f"fastest of {args.repeat} interleaved rounds")
    print("| batch | run | kernels a step | wall | ÷ torch eager | ÷ unfused | cpu | check |\n"
          "|---:|---|---:|---:|---:|---:|---:|---|")
    for batch in dict.fromkeys(r["batch"] for r in rows):
        at = {r["impl"]: r for r in rows if r["batch"] == batch}
        eager = at.get("eager", {}).get("wall")
        for name, r in at.items():
            unfused = at.get(name.replace("planner", "unfused")) if "planner" in name else None
            label = "torch eager, `model(token, cache=StaticCache)`" if name == "eager" else f"`tprules run`, {name}"
            vs_eager = f"{r['wall'] / eager:.2f}" if eager else ""
            vs_unfused = f"{r['wall'] / unfused['wall']:.2f}" if unfused else ""
            print(f"| {batch} | {label} | {r['calls'] or ''} | {r['wall'] * 1e3:.2f} ms | {vs_eager} | {vs_unfused} | "
                  f"{r['cpu'] * 1e3:.2f} ms | {'ok' if r['ok'] else 'MISMATCH'} ({r['err']:.1g}) |")
    print("÷ unfused: the planner's wall over the unfused wall at the same TP (below 1: faster); cpu: the least "
          "processor time of the process in a round (less disturbed by other load than the wall)")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", default="1,8", help="comma-separated batch sizes")
    p.add_argument("--tp", default="1", help="comma-separated chip counts")
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--past", type=int, default=511, help="prompt tokens before the step")
    p.add_argument("--cache-len", type=int, default=512)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--ffn", type=int, default=5632)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument("--threads", type=int, default=2, help="torch's threads")
    p.add_argument("--impls", default=",".join(IMPLS), help=f"comma-separated, of: {', '.join(IMPLS)}")
    p.add_argument("--keep", metavar="DIR", help="keep the model and the imported programs here (and take those "
                   "already there: give the same shape options)")
    args = p.parse_args(argv)
    args.batch = [int(b) for b in args.batch.split(",")]
    args.tp = [int(t) for t in args.tp.split(",")]
    args.impls = [i for i in args.impls.split(",") if i]
    unknown = sorted(set(args.impls) - set(IMPLS))
    if unknown:
        p.error(f"unknown implementations: {', '.join(unknown)}")

    import torch

    from tprules.runtime.devices import get_device

    torch.set_num_threads(args.threads)
    device = get_device("cpu", "auto")
    print(f"device {device.describe()}; torch {torch.__version__}, {torch.get_num_threads()} threads")
    started = time.perf_counter()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.keep) if args.keep else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        source = work / "llama-model"
        if not (source / "config.json").is_file():
            source = make_folder(work, args)
        for batch in args.batch:
            rows += bench_batch(source, work, batch, args, device)
    print_table(rows, args)
    print(f"(setup and runs: {time.perf_counter() - started:.0f} s)")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
