"""Figures of `tprules import hf`: tiny models imported and run, full-size configs facts only.

    python benchmarks/bench_import.py [--sizes tiny,8b,70b] [--work DIR] [--device cpu] [--repeat N]

- tiny: Llama, Qwen2 and Gemma (hidden 64, 2 layers, 4 heads, 2 key/value heads,
  vocabulary 128), made with transformers and saved with save_pretrained, imported at TP 2
  (`tprules import hf`, the whole command); statements and candidates; then
  `tprules run --device DEVICE` on each: the logits' max error against torch's forward;
- 8b, 70b, 405b: Llama-3-8B's, Llama-3-70B's and Llama-3.1-405B's hyperparameters in a
  config.json written here (no weights, nothing downloaded), imported with --no-data at
  TP 8 (405b: TP 16), sequence 2048; then
  `tprules check` and `tprules plan` on the imported folders (--repeat N: N interleaved
  runs of each, the fastest kept);
- mixtral-8x7b, qwen3-30b-a3b, deepseek-v3, qwen3-235b-a22b: the same for four mixtures
  of experts (TP 8, sequence 512);
- with --ep, the mixtures of experts under their EP plan (`import hf --ep`) on 8 chips;
- with --decode, one decode step of each (`import hf --decode --past 2047 --cache-len 2048`)
  in place of the prefill (docs/decode.md).

Every step is a whole command in its own process (start-up included), timed by wall clock,
with the child's processor time and peak resident memory beside it.
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

LLAMA3 = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 128256,
          "num_key_value_heads": 8, "rope_theta": 500000.0, "max_position_embeddings": 8192, "rms_norm_eps": 1e-5,
          "hidden_act": "silu", "tie_word_embeddings": False, "bos_token_id": 128000, "eos_token_id": 128001}
FULL = {
    "8b": {**LLAMA3, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32},
    "70b": {**LLAMA3, "hidden_size": 8192, "intermediate_size": 28672, "num_hidden_layers": 80, "num_attention_heads": 64},
    # Llama-3.1-405B: 126 layers, hidden 16384, 128 heads, 8 key/value heads, FFN 53248, llama3 RoPE scaling
    "405b": {**LLAMA3, "hidden_size": 16384, "intermediate_size": 53248, "num_hidden_layers": 126,
             "num_attention_heads": 128, "max_position_embeddings": 131072,
             "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                              "original_max_position_embeddings": 8192}},
    # Mixtral-8x7B's and Qwen3-30B-A3B's published hyperparameters (mixtures of experts)
    "mixtral-8x7b": {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "vocab_size": 32000,
                     "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
                     "num_attention_heads": 32, "num_key_value_heads": 8, "num_local_experts": 8,
                     "num_experts_per_tok": 2, "rope_theta": 1e6, "max_position_embeddings": 32768,
                     "rms_norm_eps": 1e-5, "hidden_act": "silu", "tie_word_embeddings": False},
    "qwen3-30b-a3b": {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "vocab_size": 151936,
                      "hidden_size": 2048, "intermediate_size": 6144, "moe_intermediate_size": 768,
                      "num_hidden_layers": 48, "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
                      "num_experts": 128, "num_experts_per_tok": 8, "norm_topk_prob": True, "decoder_sparse_step": 1,
                      "mlp_only_layers": [], "rope_theta": 1e6, "max_position_embeddings": 40960,
                      "rms_norm_eps": 1e-6, "hidden_act": "silu", "tie_word_embeddings": False},
    # DeepSeek-V3's published hyperparameters: 61 layers (3 dense), MLA, 256 routed experts of which
    # 8 per token in 4 of 8 groups, one shared expert (its YaRN rope scaling left out)
    "deepseek-v3": {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "vocab_size": 129280,
                    "hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048,
                    "num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128,
                    "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8, "n_group": 8,
                    "topk_group": 4, "first_k_dense_replace": 3, "routed_scaling_factor": 2.5, "norm_topk_prob": True,
                    "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
                    "v_head_dim": 128, "rope_theta": 10000.0, "max_position_embeddings": 163840,
                    "rms_norm_eps": 1e-6, "hidden_act": "silu", "tie_word_embeddings": False},
    # Qwen3-235B-A22B's published hyperparameters: 94 layers, hidden 4096, 64 heads of 128, 4 key/value
    # heads, 128 experts of FFN 1536, top-8
    "qwen3-235b-a22b": {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "vocab_size": 151936,
                        "hidden_size": 4096, "intermediate_size": 12288, "moe_intermediate_size": 1536,
                        "num_hidden_layers": 94, "num_attention_heads": 64, "num_key_value_heads": 4,
                        "head_dim": 128, "num_experts": 128, "num_experts_per_tok": 8, "norm_topk_prob": True,
                        "decoder_sparse_step": 1, "mlp_only_layers": [], "rope_theta": 1e6,
                        "max_position_embeddings": 40960, "rms_norm_eps": 1e-6, "hidden_act": "silu",
                        "tie_word_embeddings": False},
}
TP = {"8b": 8, "70b": 8, "405b": 16, "mixtral-8x7b": 8, "qwen3-30b-a3b": 8, "deepseek-v3": 8, "qwen3-235b-a22b": 8}
# tokens x experts pairs: the batched_mm form's statements grow with them
DECODE_PAST = 2047  # --decode: a step after this many tokens, cache one longer
SEQ = {"mixtral-8x7b": 512, "qwen3-30b-a3b": 512, "deepseek-v3": 512, "qwen3-235b-a22b": 512}
TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            vocab_size=128, head_dim=16, max_position_embeddings=64, pad_token_id=0, bos_token_id=1, eos_token_id=2,
            initializer_range=0.15)


def command(*args) -> tuple[float, float, float, subprocess.CompletedProcess]:
    """Run `python -m tprules ARGS`; (wall s, child processor s, child peak MiB, result)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "tprules", *map(str, args)]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        child = subprocess.Popen(argv, stdout=out, stderr=err, text=True, env=env)
        _, status, usage = os.wait4(child.pid, 0)  # this child's own processor time and peak memory
        wall = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        done = subprocess.CompletedProcess(argv, os.waitstatus_to_exitcode(status), out.read(), err.read())
    child.returncode = done.returncode
    if done.returncode != 0:
        raise SystemExit(f"tprules {' '.join(map(str, args))}: exit {done.returncode}\n{done.stderr}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, done


def tiny(work: Path, device: str) -> list[dict]:
    import torch
    from transformers import CONFIG_MAPPING, AutoModelForCausalLM

    rows = []
    for model_type in ("llama", "qwen2", "gemma"):
        folder = work / "models" / model_type
        torch.manual_seed(0)
        AutoModelForCausalLM.from_config(CONFIG_MAPPING[model_type](**TINY)).save_pretrained(folder)
        out = work / f"{model_type}-tp2"
        wall, cpu, _, done = command("import", "hf", folder, "--tp", 2, "--out", out, "--format", "json")
        report = json.loads(done.stdout)
        run_wall, run_cpu, _, ran = command("run", out, "--device", device, "--format", "json")
        (logits,) = json.loads(ran.stdout)["outputs"]
        rows.append({"model": model_type, "architecture": report["architecture"], "import_s": wall, "import_cpu_s": cpu,
                     "statements": report["statements"], "candidates": report["candidates"],
                     "run_s": run_wall, "max_abs_err": logits["expected"]["max_abs_err"],
                     "max_rel_err": logits["expected"]["max_rel_err"], "ok": logits["ok"]})
        print(f"tiny {model_type}: import {wall:.1f} s (cpu {cpu:.1f} s), {report['statements']} statements, "
              f"{report['candidates']} candidates; run on {device}: vs torch max abs {logits['expected']['max_abs_err']:.1e}"
              f", max rel {logits['expected']['max_rel_err']:.1e} ({'ok' if logits['ok'] else 'MISMATCH'})", flush=True)
    return rows


def full(work: Path, size: str, repeat: int = 1, ep: bool = False, decode: bool = False) -> dict:
    name = size if size in SEQ else f"llama3-{size}"
    source = work / name
    source.mkdir(parents=True, exist_ok=True)
    (source / "config.json").write_text(json.dumps(FULL[size], indent=1))
    kind = "EP" if ep else "TP"
    out = work / f"{name}-{kind.lower()}{TP[size]}{'-decode' if decode else ''}"
    row = {"model": size if size in SEQ else f"Llama-3{'.1' if size == '405b' else ''}-{size.upper()}",
           "seq": SEQ.get(size, 2048)}
    shape = ["--decode", "--past", DECODE_PAST, "--cache-len", DECODE_PAST + 1] if decode else ["--seq", row["seq"]]
    if decode:
        row["seq"] = f"decode after {DECODE_PAST}"
    wall, cpu, peak, done = command("import", "hf", source, "--tp", TP[size], *shape, "--no-data",
                                    "--out", out, "--format", "json", *(["--ep"] if ep else []))
    report = json.loads(done.stdout)
    row.update(import_s=wall, import_cpu_s=cpu, import_mib=peak, statements=report["statements"],
               candidates=report["candidates"], phases=report["seconds"], layers_traced=report.get("traced_layers"))
    for _ in range(repeat):  # check and plan interleaved, the fastest run of each kept
        for name in ("check", "plan"):
            wall, cpu, peak, _ = command(name, out, "--format", "json")
            if wall < row.get(f"{name}_s", float("inf")):
                row[f"{name}_s"], row[f"{name}_cpu_s"], row[f"{name}_mib"] = wall, cpu, peak
    print(f"{row['model']} {kind} {TP[size]} --no-data seq {row['seq']}: import {row['import_s']:.1f} s "
          f"(cpu {row['import_cpu_s']:.1f} s, peak {row['import_mib']:.0f} MiB; "
          + ", ".join(f"{k} {v:.1f}" for k, v in report["seconds"].items())
          + f"), {row['statements']} statements, {row['candidates']} candidates; "
          f"check {row['check_s']:.2f} s (cpu {row['check_cpu_s']:.2f}, peak {row['check_mib']:.0f} MiB), "
          f"plan {row['plan_s']:.2f} s (cpu {row['plan_cpu_s']:.2f}, peak {row['plan_mib']:.0f} MiB), "
          f"plan / check {row['plan_s'] / row['check_s']:.2f}", flush=True)
    return row


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="tiny,8b,70b")
    ap.add_argument("--work", default="/tmp/tprules-bench-import")
    ap.add_argument("--device", choices=("cpu", "sim"), default="cpu")
    ap.add_argument("--ep", action="store_true", help="the full-size mixtures of experts under their EP plans")
    ap.add_argument("--decode", action="store_true", help="a decode step of each full-size config (docs/decode.md)")
    ap.add_argument("--repeat", type=int, default=1, help="check and plan runs per size (the fastest kept)")
    args = ap.parse_args(argv)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    results = {}
    for size in args.sizes.split(","):
        results[size] = tiny(work, args.device) if size == "tiny" else full(work, size, args.repeat, args.ep, args.decode)
    suffix = ("-ep" if args.ep else "") + ("-decode" if args.decode else "")
    (work / f"bench_import{suffix}.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
