"""`tprules import hf SOURCE --tp N --out DIR` (a prefill, or with --decode one decode step)
and `tprules import torch RECIPE.py --tp N --out DIR`: a program folder from a Hugging Face
model folder and its tensor-parallel plan, or from a module and its plan in torch's own API
(tprules/frontends/drivers/), each reported by one renderer (`_shown`: text or JSON). Needs
the `import` extra."""

from __future__ import annotations

import sys

from . import common


def add_parser(sub):
    p = sub.add_parser("import", help="write a program folder from a model (needs the import extra)")
    frontends = p.add_subparsers(dest="frontend", metavar="FRONTEND", parser_class=type(p))
    frontends.required = True
    hf = frontends.add_parser("hf", help="a Hugging Face causal LM folder (config.json, *.safetensors)")
    hf.add_argument("source", metavar="SOURCE", help="a save_pretrained folder: config.json and optional *.safetensors")
    hf.add_argument("--tp", type=int, required=True, metavar="N", help="chips")
    hf.add_argument("--out", required=True, metavar="DIR", help="the program folder to write (replaced if an earlier import)")
    hf.add_argument("--seq", type=int, metavar="S", help="sequence length of the traced prefill (default 8)")
    hf.add_argument("--batch", type=int, default=1, metavar="B", help="batch size (default 1)")
    hf.add_argument("--layers", type=int, metavar="L", help="keep the first L decoder layers")
    hf.add_argument("--plan", metavar="PLAN.json", help="a tensor-parallel plan replacing the config's base_model_tp_plan")
    hf.add_argument("--ep", action="store_true",
                    help="the config's base_model_ep_plan (whole experts per chip) in place of its TP plan, as "
                         "transformers' enable_expert_parallel; with --plan, PLAN.json is an EP plan")
    hf.add_argument("--seed", type=int, default=0, metavar="K",
                    help="seed of the random weights (without *.safetensors) and of input_ids (default 0)")
    hf.add_argument("--no-data", action="store_true",
                    help="facts only: trace on meta tensors, write no weights and no expected logits")
    hf.add_argument("--every-layer", action="store_true",
                    help="trace every decoder layer instead of each layer kind once (the same facts, slower)")
    hf.add_argument("--experts", choices=("grouped_mm", "batched_mm"), default=None,
                    help="a mixture of experts' form: grouped_mm (the default: sorted by expert, one grouped "
                         "matmul reading each expert's weights once; under --ep too) or batched_mm (each pair's weights "
                         "gathered, a bmm)")
    hf.add_argument("--no-verify", action="store_true",
                    help="skip the check before writing: the program's reference on a second input against "
                         "torch's forward (nothing to check under --no-data)")
    hf.add_argument("--decode", action="store_true",
                    help="one decode step instead of the prefill: a token, its position and a static KV cache in, "
                         "the logits and the updated cache out")
    hf.add_argument("--past", type=int, metavar="P", help="--decode: the prompt's length before the step (default 8)")
    hf.add_argument("--cache-len", type=int, metavar="L", help="--decode: the static cache's length (default P + 1)")
    common.add_format(hf)
    common.add_show(hf)
    tt = frontends.add_parser("torch", help="a module and its TP plan in torch's own API (a recipe file)")
    tt.add_argument("recipe", metavar="RECIPE.py", help="defines model(), inputs() and PLAN (parallelize_module's dict)")
    tt.add_argument("--tp", type=int, required=True, metavar="N", help="chips")
    tt.add_argument("--out", required=True, metavar="DIR", help="the program folder to write (replaced if an earlier import)")
    tt.add_argument("--seq", type=int, metavar="S", help="passed to inputs(seq=S)")
    tt.add_argument("--batch", type=int, metavar="B", help="passed to inputs(batch=B)")
    tt.add_argument("--no-data", action="store_true",
                    help="facts only: model() and inputs() on meta tensors, no data/ and no expected/")
    tt.add_argument("--no-verify", action="store_true",
                    help="skip the check before writing: the program's reference on a second input against "
                         "the module's forward (nothing to check under --no-data)")
    common.add_format(tt)
    common.add_show(tt)
    return p


def run(args) -> int:
    if args.frontend == "torch":
        return _run_torch(args)
    if args.decode or args.past is not None or args.cache_len is not None:
        return _run_decode(args)
    from ..frontends.drivers.hf import import_hf
    from ..progress import Progress

    args.seq = 8 if args.seq is None else args.seq
    report = import_hf(args.source, args.tp, args.out, seq=args.seq, batch=args.batch, layers=args.layers,
                       plan=args.plan, seed=args.seed, no_data=args.no_data, every_layer=args.every_layer,
                       progress=Progress(), verify=not args.no_verify, ep=args.ep, experts=args.experts)
    heading = f"{'EP' if report.ep else 'TP'} {report.tp}, batch {args.batch}, seq {args.seq}"
    return _shown(args, args.source, report, {"architecture": report.architecture, "tp": report.tp, "ep": report.ep},
                  heading, f"{report.folds} folds", _plan_line(report) + _layers(report), tail=_plan_keys(report))


def _run_decode(args) -> int:
    from ..errors import UsageError
    from ..frontends.drivers.decode import import_decode
    from ..progress import Progress

    if not args.decode:
        raise UsageError(f"{'--past' if args.past is not None else '--cache-len'} is a decode step's; add --decode")
    if args.seq is not None:
        raise UsageError("--seq is the prefill's; a decode step takes --past and --cache-len")
    past = 8 if args.past is None else args.past
    report = import_decode(args.source, args.tp, args.out, past=past, cache_len=args.cache_len, batch=args.batch,
                           layers=args.layers, plan=args.plan, seed=args.seed, no_data=args.no_data,
                           progress=Progress(), verify=not args.no_verify, every_layer=args.every_layer)
    length = past + 1 if args.cache_len is None else args.cache_len
    head = {"architecture": report.architecture, "tp": report.tp, "decode": True, "past": past, "cache_len": length,
            "batch": args.batch}
    heading = f"TP {report.tp}, decode step after {past} tokens, cache {length}, batch {args.batch}"
    return _shown(args, args.source, report, head, heading, f"{report.folds} folds", _plan_line(report) + _layers(report),
                  tail=_plan_keys(report))


def _plan_line(report) -> str:
    """The plan's line: where it came from (the installed transformers release: the models'
    plans change between releases) and the experts it leaves whole on every chip."""
    if report.plan_from is None:
        return ""
    whole = f"; experts replicated on every chip (the plan does not split them): {', '.join(report.replicated)}" \
        if report.replicated else ""
    return f"plan: {report.plan_from}{whole}\n"


def _plan_keys(report) -> dict:
    """The JSON's keys of the plan (_plan_line), before the layer kinds."""
    return {"plan_from": report.plan_from, "replicated_experts": list(report.replicated),
            "layer_kinds": report.kinds, "traced_layers": report.traced}


def _layers(report) -> str:
    if report.kinds is None:
        return ""
    kinds = "1 layer kind" if report.kinds == 1 else f"{report.kinds} layer kinds"
    return f"{kinds}: {report.traced} layers traced, the rest stamped\n"


KINDS = (("all_gather", "all-gather"), ("reduce_scatter", "reduce-scatter"), ("all_reduce", "all-reduce"))


def _run_torch(args) -> int:
    from ..frontends.drivers.recipe import import_torch
    from ..progress import Progress

    report = import_torch(args.recipe, args.tp, args.out, seq=args.seq, batch=args.batch, no_data=args.no_data,
                          verify=not args.no_verify, progress=Progress())
    collectives = report.collectives or {}
    shapes = ", ".join(f"{name} {shape}" for name, shape in (report.inputs or {}).items())
    kinds = ", ".join(f"{collectives[k]} {word}{'s' if collectives[k] != 1 else ''}" for k, word in KINDS
                      if collectives.get(k))
    folds = f"{report.folds} fold{'' if report.folds == 1 else 's'}{': ' + kinds if kinds else ''}"
    drawn = "the check's second input drawn by tprules (inputs() takes no seed)\n" if report.drawn else ""
    head = {"recipe": report.architecture, "tp": report.tp, "inputs": report.inputs}
    return _shown(args, args.recipe, report, head, f"TP {report.tp}, {shapes or 'no tensor inputs'}", folds, drawn,
                  {"collectives": collectives}, {"second_input_drawn": report.drawn})


def _shown(args, source, report, head: dict, heading: str, folds: str, last: str, counted: dict | None = None,
           tail: dict | None = None) -> int:
    """The report of an import, every frontend's: as text (`heading` the first line's after
    the folder, `folds` the second's count of folds, `last` the lines after the timing) or as
    JSON (`head` the keys after `out`, `counted` after the counts, `tail` before `seconds`:
    by default the layer kinds)."""
    if args.format == "json":
        counts = {"statements": report.statements, "candidates": report.candidates, "tensors": report.tensors,
                  "folds": report.folds}
        if tail is None:
            tail = {"layer_kinds": report.kinds, "traced_layers": report.traced}
        common.emit_json({"out": str(report.out), **head, **counts, **(counted or {}), "folded": report.folded,
                          **tail, "seconds": {k: round(v, 4) for k, v in report.seconds.items()}})
        return 0
    timing = ", ".join(f"{k} {v:.2f} s" for k, v in report.seconds.items())
    sys.stdout.write(f"import {source} ({report.architecture}) -> {report.out}: {heading}"
                     f"{'' if not args.no_data else ', facts only'}\n"
                     f"{report.statements} statements ({folds}), {report.candidates} candidates, "
                     f"{report.tensors} tensors; folded into inputs: {', '.join(report.folded) or 'nothing'}\n"
                     f"{timing} (total {report.total_s:.2f} s)\n{last}")
    return 0
