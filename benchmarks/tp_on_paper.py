"""On paper: the all-reduce traffic of tensor parallelism against the compute it splits,
for Llama-3-70B at TP 8 on H200s (docs/distributed.md). Nothing runs; it prints figures.

    python benchmarks/tp_on_paper.py [--tp 8] [--tokens 2048] [--link NAME=GB/s ...]

Model (Llama-3-70B's config.json): hidden 8192, 80 layers, 64 query heads and 8 key/value
heads of 128, MLP 28672; activations in bf16. Each layer has two all-reduces of the
activation [tokens, hidden] (after attention's output projection and after the MLP's down
projection). A ring all-reduce of P bytes over N GPUs sends (and receives) 2 (N-1)/N P
bytes per GPU. Compute: 2 FLOP per weight per token, split over the N GPUs, at the H200's
dense bf16 peak (989 TFLOP/s, the H100's tensor cores); attention's score and value products add
4 x seq x hidden FLOP per token per layer (at seq = tokens).
"""

from __future__ import annotations

import argparse

HIDDEN, LAYERS, HEADS, KV_HEADS, HEAD_DIM, FFN = 8192, 80, 64, 8, 128, 28672
BF16 = 2
H200_BF16_FLOPS = 989e12
H200_HBM = 4.8e12  # bytes/s
LINKS = {"NVLink 4 (H200 HGX, 450 GB/s each way)": 450e9, "InfiniBand NDR (400 Gb/s, 50 GB/s)": 50e9}


def layer_weights() -> int:
    attn = HIDDEN * HEADS * HEAD_DIM * 2 + HIDDEN * KV_HEADS * HEAD_DIM * 2  # q, o; k, v
    return attn + 3 * HIDDEN * FFN  # gate, up, down


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tp", type=int, default=8)
    p.add_argument("--tokens", type=int, default=2048, help="tokens in flight (a prefill of this many)")
    args = p.parse_args(argv)
    n, t = args.tp, args.tokens
    payload_token = 2 * HIDDEN * BF16  # per layer: two all-reduces of one token's activation
    ring = 2 * (n - 1) / n
    flops_token = 2 * layer_weights() + 4 * t * HIDDEN
    compute_s = t * flops_token / n / H200_BF16_FLOPS
    print(f"Llama-3-70B, TP {n}, {t} tokens, bf16; {layer_weights() / 1e6:.1f} M weights a layer")
    print(f"all-reduce payload: {payload_token / 1024:.0f} KiB per token per layer, "
          f"{payload_token * LAYERS / 2 ** 20:.2f} MiB per token for {LAYERS} layers; "
          f"{payload_token * t / 2 ** 20:.0f} MiB per layer for {t} tokens")
    print(f"sent by each GPU (ring, 2(N-1)/N): {ring * payload_token / 1024:.0f} KiB per token per layer, "
          f"{ring * payload_token * LAYERS / 2 ** 20:.2f} MiB per token, {ring * payload_token * t / 2 ** 20:.0f} MiB "
          f"per layer")
    print(f"compute per GPU at the H200's peak: {flops_token / n / 1e6:.0f} MFLOP per token per layer, "
          f"{us(compute_s)} per layer for {t} tokens")
    for name, bandwidth in LINKS.items():
        comm_s = ring * payload_token * t / bandwidth
        print(f"  {name}: all-reduces {us(comm_s)} per layer = {comm_s / compute_s:.2f} x the compute; "
              f"comm stays under compute up to TP {break_even(bandwidth, t)}")
    weights_s = layer_weights() * BF16 / n / H200_HBM
    print(f"reading a layer's weights once (what one decode step cannot avoid): {us(weights_s)} per GPU at "
          f"{H200_HBM / 1e12:.1f} TB/s; a decode step's two all-reduces of {payload_token // 2 // 1024} KiB each are "
          f"bound by latency, not bandwidth")
    return 0


def us(seconds: float) -> str:
    return f"{seconds * 1e6:.0f} us" if seconds >= 1e-5 else f"{seconds * 1e9:.0f} ns"


def break_even(bandwidth: float, tokens: int) -> str:
    """The largest TP degree whose all-reduce time stays under its compute time."""
    best = None
    for n in range(2, 257):
        comm = 2 * (n - 1) / n * 2 * HIDDEN * BF16 * tokens / bandwidth
        compute = tokens * (2 * layer_weights() + 4 * tokens * HIDDEN) / n / H200_BF16_FLOPS
        if comm <= compute:
            best = n
    return str(best) if best else "none (not even 2)"


if __name__ == "__main__":
    raise SystemExit(main())
