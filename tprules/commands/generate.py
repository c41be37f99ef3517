"""`tprules generate SOURCE_OR_DIR --tp N --prompt-ids FILE --tokens K`: the prefill program,
then K - 1 decode steps on the device, the caches fed back; prints the greedy tokens and
checks them against transformers' generate (tprules/serving/generate.py). Exit 1 when they
differ. `--ranks N`: the programs on N MPI ranks, each rank's caches kept there between steps
(serving/ranks.py). Needs the `import` extra."""

from __future__ import annotations

import argparse
import sys

from . import common


def add_parser(sub):
    p = sub.add_parser("generate", help="greedy tokens of an imported model's prefill and decode programs, "
                                        "checked against transformers")
    p.add_argument("source", metavar="SOURCE_OR_DIR",
                   help="a save_pretrained folder, or a program folder imported from one")
    p.add_argument("--tp", type=int, required=True, metavar="N", help="chips")
    p.add_argument("--prompt-ids", required=True, metavar="FILE",
                   help="the prompt's token ids: a .npy of integers ([P] or [batch, P]) or a text file of integers")
    p.add_argument("--tokens", type=int, required=True, metavar="K", help="tokens to generate")
    p.add_argument("--device", choices=("cpu", "sim", "cuda"), default="cpu", help="where the programs run")
    p.add_argument("--layers", type=int, metavar="L", help="keep the first L decoder layers")
    p.add_argument("--plan", metavar="PLAN.json", help="a tensor-parallel plan replacing the config's base_model_tp_plan")
    p.add_argument("--seed", type=int, default=0, metavar="K", help="seed of the random weights (without *.safetensors)")
    p.add_argument("--out", metavar="DIR", help="keep the two programs here (DIR/prefill, DIR/decode)")
    p.add_argument("--ranks", type=int, metavar="N",
                   help="run the programs on N MPI ranks (rank r holds the chips k with k mod N == r); each rank "
                        "keeps its chips' caches between steps")
    p.add_argument("--timeout", type=float, default=600.0, metavar="S",
                   help="with --ranks: the longest a rank waits for the others at one exchange (default 600)")
    p.add_argument("--mpi", action="store_true", help=argparse.SUPPRESS)  # a rank of --ranks
    p.add_argument("--job", help=argparse.SUPPRESS)  # the launcher's folder, handed to its ranks
    common.add_format(p)
    common.add_show(p)
    return p


def run(args) -> int:
    from ..serving.generate import RanksFailed, generate

    if args.mpi:  # one rank of --ranks: its job is in the launcher's folder
        from pathlib import Path

        from ..serving.ranks import run_rank

        return run_rank(Path(args.job), args.timeout)
    runner = None
    if args.ranks is not None:
        from ..serving.ranks import on_ranks

        command = [args.source, "--tp", str(args.tp), "--prompt-ids", args.prompt_ids, "--tokens", str(args.tokens),
                   "--device", args.device]
        runner = on_ranks(args.ranks, [str(c) for c in command], args.timeout)
    try:
        done = generate(args.source, args.tp, args.prompt_ids, args.tokens, device=args.device, out=args.out,
                        seed=args.seed, layers=args.layers, plan=args.plan, runner=runner)
    except RanksFailed as err:
        return err.code  # the launcher printed the line naming the rank
    if args.format == "json":
        common.emit_json({"tokens": done.tokens.tolist(), "transformers": done.expected.tolist(), "ok": done.ok,
                          "steps": done.steps, "seconds": {k: round(v, 4) for k, v in done.seconds.items()}})
        return 0 if done.ok else 1
    for row, (got, want) in enumerate(zip(done.tokens.tolist(), done.expected.tolist())):
        prefix = f"[{row}] " if len(done.tokens) > 1 else ""
        sys.stdout.write(f"{prefix}tokens: {' '.join(map(str, got))}\n")
        if got != want:
            sys.stdout.write(f"{prefix}transformers: {' '.join(map(str, want))}\n")
    timing = ", ".join(f"{k} {v:.2f} s" for k, v in done.seconds.items())
    verdict = "the same as transformers' generate (greedy, static cache)" if done.ok else \
        "MISMATCH: differs from transformers' generate (greedy, static cache)"
    where = f" on {args.ranks} ranks" if args.ranks is not None else ""
    sys.stdout.write(f"{done.steps} programs run on {args.device}{where} (TP {args.tp}): {verdict}\n{timing}\n")
    return 0 if done.ok else 1
