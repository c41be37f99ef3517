"""Which decoder-only architectures of the installed transformers import, run, and match torch.

    python benchmarks/import_coverage.py [--tp 2] [--ep] [--device none|cpu|sim] [--only llama,qwen2] [--work DIR]
                                         [--decode] [--keep] [--experts grouped_mm|batched_mm] [--indexers]

For every causal-LM model type whose config class has a `base_model_tp_plan` (116 in transformers
5.24, 119 in 5.25; the plans are the installed release's): its tiny model (benchmarks/tiny_models.py),
a model saved with transformers' own save_pretrained, `tprules import hf` at --tp, and the logits of
tprules' reference executor (and, with --device, of the fused program on that device) against torch's
forward. Every architecture is tried with two weight seeds (WEIGHT_SEEDS) and two inputs each: the ids the import wrote with its
expected/, and ids from another seed against torch's forward on them (the import's own check before
writing, frontends/drivers/verify.py, tries a third); a mixture of experts also with a second expert count
and top-k (EXPERTS, 8 experts of width 32, top-1, where its config has those fields); a match is
every combination matching. A program its plan did not shape fails (`unshaped`), whatever its
logits: one with no collective at TP > 1 (every chip computes everything), or one that keeps whole
an lm_head or input embedding that the model's own plan (transformers' `tp_plan`) splits (`shaped`).
Prints a Markdown table (the coverage table of docs/import-tour.md), a count per result and per
refusal, and writes it as JSON.

With `--ep`, every causal-LM model type whose config class has a `base_model_ep_plan`,
imported under it (`import hf --ep`: whole experts per chip, in place of the TP plan); a
program without a collective fails as `unshaped` (its experts were not split).

An architecture with a sparse-attention indexer (DeepSeek-V3.2's, GLM-DSA's, ...: issue 51;
tiny_models.indexer) is tried on DRAWN drawn inputs and the import check's tie-prone one (a
short prompt, then padding) rather than one, and also with its indexer's top-k below the
traced 8 tokens (index_topk 4, so that the first queries tie among masked keys), imported at
8 tokens and at a prompt shorter than that top-k: each such import either matches torch on
every input or is refused in one line naming a tied top-k (`tied`); anything else is the
row's result. `--indexers` tries only those architectures, and issue 51's own HY-V4 (a row
of its own).

With `--experts`, a mixture of experts is imported in that form of transformers' experts
(`import hf --experts`); without it, in the importer's default form.

With --decode, each import is one decode step (`import hf --decode`, DECODE's prompt and
cache): every program output (the logits and every layer's updated cache) against torch's
own prefill and step in expected/; the second input is the import's own check (a second
prompt and token, frontends/drivers/decode.py).

Each architecture's tiny models and imported programs (under --work's models/ and
programs/) are deleted once it is tried, whatever its result (a full run kept tens of GB);
`--keep` keeps those of an architecture that did not match (not `ok`), to look into.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from anywhere
sys.path.insert(0, str(Path(__file__).resolve().parent))  # its tiny models, loaded by path in the tests

from tiny_models import (  # noqa: E402
    DECODE,
    INPUT_SEED,
    ISSUE_51,
    WEIGHT_SEEDS,
    architectures,
    experts_fields,
    indexer,
    issue51_model,
    tiny_model,
)

FORM: dict = {}  # --experts: import_hf's experts form (empty: the importer's default)
DRAWN = 10  # an indexer architecture's drawn inputs (issue 51; one for the others)
ISSUE = "hy_v4 (issue 51)"  # --indexers: the issue's own model, a row of its own
# an import refused in one line naming a top-k that ties (frontends/drivers/ties.py, or the check's own, verify.py)
TIED = re.compile(r"\(topk_indices\) of \S+: aten\.topk\.default item 1.*\btie(s)? at the top-\d+'s boundary")


def try_one(model_type: str, work: Path, tp: int, device: str, ep: bool = False) -> dict:
    """Every weight seed of WEIGHT_SEEDS (and for a mixture of experts, with its EXPERTS
    count and top-k too); the row is the first combination that does not match (or the
    first one's), with the worst error over all of them."""
    worst, skipped, first = 0.0, [], None
    second = experts_fields(model_type)
    for experts in ([None, second] if second else [None]):
        for seed in WEIGHT_SEEDS:
            row = try_seed(model_type, work, tp, device, seed, experts, ep)
            if experts is not None and row["result"] == "no tiny model":
                skipped.append(f"{experts}: {row['detail']}")
                break
            if row["result"] != "ok":
                return {**row, "experts": experts}
            worst = max(worst, row["reference_rel_err"])
            first = first or row
    row = {**first, "reference_rel_err": worst, "combinations": "weights x inputs" + (" x experts" if second else "")}
    if skipped:
        row["skipped"] = skipped
    found = indexer(model_type) if not ep and not DECODE else None
    if found is not None:
        return with_indexer(row, model_type, work, tp, device, *found)
    return row


def with_indexer(row: dict, model_type: str, work: Path, tp: int, device: str, fields: dict, short: int,
                 build=None, seed: int = WEIGHT_SEEDS[0]) -> dict:
    """Issue 51: the indexer's top-k below the traced length (`fields`), imported at the
    traced 8 tokens and at a prompt of `short` tokens, shorter than that top-k. A variant
    either matches torch on every input or is refused in one line naming a tied top-k
    (`tied`); anything else is the row's result."""
    done = []
    for seq in (8, short):
        got = try_seed(model_type, work, tp, device, seed, fields, False, seq=seq, variant=f"indexer{seq}", build=build)
        if "reference_rel_err" in got:
            row["reference_rel_err"] = max(row.get("reference_rel_err", 0.0), got["reference_rel_err"])
        tied = "statements" not in got and bool(TIED.search(got.get("detail", "")))  # refused, naming a tied top-k
        done.append(f"seq {seq}: " + ("tied (refused)" if tied else got["result"] if "reference_rel_err" not in got
                                      else f"{got['result']} {got['reference_rel_err']:.1e}"))
        if got["result"] != "ok" and not tied:
            return {**row, **{k: v for k, v in got.items() if k != "model_type"}, "indexer": "; ".join(done)}
        row.setdefault("tied", []).extend([got["detail"]] if tied else [])
    return {**row, "indexer": "; ".join(done)}


def try_issue(work: Path, tp: int, device: str) -> dict:
    """Issue 51's own model (tiny_models.ISSUE_51), as `with_indexer` tries a variant."""
    model_type, fields, seed = ISSUE_51
    row = {"model_type": ISSUE, "architecture": "HYV4ForCausalLM", "result": "ok"}
    return with_indexer(row, model_type, work, tp, device, fields, 3, build=issue51_model, seed=seed)


def try_seed(model_type: str, work: Path, tp: int, device: str, seed: int, experts: dict | None = None,
             ep: bool = False, seq: int = 8, variant: str = "", build=None) -> dict:
    """One tiny model (`experts`: fields of its config over the tiny ones; `build(folder)`: a
    model of its own), imported at `seq` tokens and compared with torch; `variant` names its
    folders."""
    import numpy as np

    from tprules.errors import BadInput
    from tprules.frontends.drivers.hf import import_hf
    from tprules.runtime import Program, execute
    from tprules.runtime.values.compare import errors
    from tprules.runtime.values.inputs import program_inputs
    from tprules.runtime.values.reference import reference
    from tprules.workspace import Workspace

    row = {"model_type": model_type, "weight_seed": seed}
    tag = f"w{seed}" + (f"-{variant}" if variant else "-experts" if experts else "") + (f"-ep{tp}" if ep else "")
    folder, out = work / "models" / f"{model_type}-{tag}", work / "programs" / f"{model_type}-{tag}-{_kind(ep)}{tp}"
    try:
        if build is not None:
            build(folder)
        else:
            tiny_model(model_type, folder, seed, experts, tp if ep else 0)
    except Exception as err:  # noqa: BLE001
        row.update(result="no tiny model", detail=f"transformers: {type(err).__name__}: {str(err)[:160]}")
        return row
    started = time.perf_counter()
    try:
        if DECODE:
            from tprules.frontends.drivers.decode import import_decode

            report = import_decode(folder, tp, out, **DECODE)
        else:
            report = import_hf(folder, tp, out, seq=seq, ep=ep, **FORM)
    except BadInput as err:
        detail = str(err).split(": ", 1)[-1] if "config.json" in str(err) else str(err)
        mismatch = "differs from torch on a" in detail  # the import's own check (verify.py)
        row.update(result="MISMATCH" if mismatch else "refused", detail=detail)
        return row
    except Exception as err:  # noqa: BLE001
        row.update(result="crash", detail=f"{type(err).__name__}: {err}"[:200], trace=traceback.format_exc())
        return row
    row.update(architecture=report.architecture, import_s=round(time.perf_counter() - started, 2),
               statements=report.statements, candidates=report.candidates,
               verify_s=round(report.seconds.get("verify", 0.0), 3), plan_from=report.plan_from,
               replicated_experts=list(report.replicated))
    why = shaped(out, tp, {} if ep else plan_sharded(folder), _kind(ep).upper())
    if why is not None:
        row.update(result="unshaped", detail=why)
        return row
    ws = Workspace(out)
    prog = Program.from_workspace(ws)
    inputs = program_inputs(prog)
    if DECODE:  # every output against torch's step; the second prompt was the import's own check
        values = reference(prog, inputs)
        rel = max(errors(values.get(t), np.load(out / "expected" / f"{t}.npy"))[1] for t in prog.outputs)
        row.update(reference_rel_err=rel, result="ok" if rel <= 1e-4 else "MISMATCH")
        return row
    _, rel = errors(reference(prog, inputs).get("logits"), np.load(out / "expected" / "logits.npy"))
    model = _torch_model(folder)
    for ids in other_ids(model_type, folder, seed, inputs["input_ids"].shape):
        inputs["input_ids"] = ids
        _, rel_other = errors(reference(prog, inputs).get("logits"), _torch_logits(model, ids))
        rel = max(rel, rel_other)
    row.update(reference_rel_err=rel, result="ok" if rel <= 1e-4 else "MISMATCH")
    if device != "none":
        try:
            run = execute(ws, device=device)
        except Exception as err:  # noqa: BLE001
            row.update(result="run failed", detail=f"{type(err).__name__}: {err}"[:200], trace=traceback.format_exc())
            return row
        row.update(run_ok=run.ok, run_rel_err=max(o.expected.max_rel_err for o in run.outputs if o.expected))
        row["result"] = "ok" if row["result"] == "ok" and run.ok else "MISMATCH"
    return row


def plan_sharded(folder: Path) -> dict[str, str]:
    """The lm_head and input embedding weights that the model's own plan (transformers'
    `tp_plan`, as it applies it) splits: weight name (a tied one by its first name, as the
    import names it) → `module style`."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.distributed.parallel_utils import _get_parameter_plan

    from tprules.frontends.sharding.styles import style

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(folder))
    plan = dict(getattr(model, "tp_plan", None) or {})
    names = {id(p): n for n, p in model.named_parameters()}  # the first name of a tied weight
    paths = {id(m): n for n, m in model.named_modules()}
    out = {}
    for get in (model.get_input_embeddings, model.get_output_embeddings):
        try:
            module = get()
        except (NotImplementedError, AttributeError):  # a model that does not say
            continue
        if module is None or id(module) not in paths or getattr(module, "weight", None) is None:
            continue
        path = paths[id(module)]
        name = _get_parameter_plan(f"{path}.weight", plan) or _get_parameter_plan(path, plan, is_weight=False)
        found = style(name) if name is not None else None
        if found is not None and found.weight not in (None, "replicate"):
            out[names[id(module.weight)]] = f"{path} {name}"
    return out


def _kind(ep: bool) -> str:
    return "ep" if ep else "tp"


def shaped(folder: Path, tp: int, sharded: dict[str, str], kind: str = "TP") -> str | None:
    """Why an imported program is not the one its plan shapes (None: it is): at TP > 1, no
    collective (no `fold` fact: every chip computes everything), or a weight in `sharded`
    (plan_sharded) kept whole on the spine."""
    if tp == 1:
        return None
    if not _rows(folder / "fold.facts"):
        return f"no collective at {kind} {tp}: the plan split nothing"
    spine = {row[0] for row in _rows(folder / "spine.facts")}
    whole = [f"{weight} ({why})" for weight, why in sorted(sharded.items()) if weight in spine]
    if whole:
        return f"replicates what the model's plan splits: {', '.join(whole)}"
    return None


def _rows(path: Path) -> list[list[str]]:
    return [line.split("\t") for line in path.read_text().splitlines()] if path.exists() else []


def _vocab(folder: Path) -> int:
    return int(_config(folder).vocab_size)


def other_ids(model_type: str, folder: Path, seed: int, shape) -> list:
    """The inputs a program is tried on beyond its own: ids from another seed (DRAWN of them
    for an indexer architecture, and then the import check's tie-prone one: a short prompt,
    then padding; issue 51)."""
    import numpy as np

    from tprules.frontends.drivers.verify import padded_ids

    rng = np.random.default_rng(INPUT_SEED + seed)
    vocab = _vocab(folder)
    drawn = [rng.integers(0, vocab, size=shape).astype(np.int64) for _ in range(DRAWN if indexer(model_type) else 1)]
    if len(drawn) > 1:
        pad = getattr(_config(folder), "pad_token_id", None)
        drawn.append(padded_ids(drawn[0], pad if isinstance(pad, int) and 0 <= pad < vocab else None)[1])
    return drawn


def _config(folder: Path):
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(folder)
    return config if getattr(config, "vocab_size", None) else config.get_text_config()


def _torch_model(folder: Path):
    """The saved model, as the importer builds it."""
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager", dtype=torch.float32,
                                                experts_implementation="batched_mm").eval()


def _torch_logits(model, ids):
    """torch's forward of `model` on `ids`."""
    import torch

    with torch.no_grad():
        return model(input_ids=torch.from_numpy(ids), use_cache=False).logits.float().numpy()


def isolated(model_type: str, work: Path, tp: int, device: str, memory_gib: float, ep: bool = False) -> dict:
    """`try_one` in a forked process under a memory limit: a model too big for the machine is
    one row (`crash`), not the end of the run."""
    import multiprocessing
    import resource

    ctx = multiprocessing.get_context("fork")
    rows = ctx.Queue()

    def child():
        limit = int(memory_gib * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        try:
            rows.put(try_issue(work, tp, device) if model_type == ISSUE else try_one(model_type, work, tp, device, ep))
        except MemoryError:
            rows.put({"model_type": model_type, "result": "crash", "detail": f"more than {memory_gib:g} GiB"})

    p = ctx.Process(target=child)
    p.start()
    p.join(1800)
    if p.is_alive():
        p.kill()
    try:
        return rows.get(timeout=1)
    except Exception:  # noqa: BLE001 - the child died (memory, a signal) without a row
        return {"model_type": model_type, "result": "crash", "detail": f"the process ended ({p.exitcode}): "
                                                                       f"more than {memory_gib:g} GiB?"}


def cleanup(work: Path, model_type: str, row: dict, keep: bool = False) -> None:
    """Delete `model_type`'s tiny models and programs under `work` (every seed and variant:
    `models/TYPE-w*`, `programs/TYPE-w*`), unless `keep` and the row is not ok."""
    if keep and row.get("result") != "ok":
        return
    model_type = ISSUE_51[0] if model_type == ISSUE else model_type
    for sub in ("models", "programs"):
        for folder in (work / sub).glob(f"{model_type}-w*"):
            shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tp", type=int, default=2)
    ap.add_argument("--ep", action="store_true", help="the EP plans (base_model_ep_plan) on --tp chips")
    ap.add_argument("--device", choices=("none", "cpu", "sim"), default="none")
    ap.add_argument("--only", help="comma-separated model types")
    ap.add_argument("--work", default="/tmp/tprules-coverage")
    ap.add_argument("--memory-gib", type=float, default=6.0,
                    help="address space of the process trying one architecture (a default vision tower may be large)")
    ap.add_argument("--decode", action="store_true", help="one decode step after a prompt (DECODE), not the prefill")
    ap.add_argument("--keep", action="store_true",
                    help="keep the models and programs of an architecture that did not match (not ok); without it, "
                         "every architecture's folders are deleted once it is tried")
    ap.add_argument("--indexers", action="store_true",
                    help="only the architectures with a sparse-attention indexer, and issue 51's model (its own row)")
    ap.add_argument("--experts", choices=("grouped_mm", "batched_mm"),
                    help="the experts form a mixture of experts is imported in (default: the importer's)")
    args = ap.parse_args(argv)
    if args.experts:
        FORM.update(experts=args.experts)
    if args.decode:
        DECODE.update(past=5, cache_len=8)
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    kind = _kind(args.ep)
    types = args.only.split(",") if args.only else architectures(kind)
    if args.indexers:
        types = [t for t in types if indexer(t)] + [ISSUE]
    rows = []
    print("| model type | architecture | result | statements | candidates | reference vs torch (max rel err) |")
    print("|---|---|---|---:|---:|---|")
    for model_type in types:
        row = isolated(model_type, work, args.tp, args.device, args.memory_gib, args.ep)
        cleanup(work, model_type, row, args.keep)
        rows.append(row)
        err = f"{row['reference_rel_err']:.1e}" if "reference_rel_err" in row else ""
        if "run_rel_err" in row:
            err += f"; {args.device} {row['run_rel_err']:.1e}"
        if "indexer" in row:
            err += f"; indexer top-k below the length: {row['indexer']}"
        what = row["result"] if row["result"] in ("ok", "MISMATCH") else f"{row['result']}: {row.get('detail', '')}"
        print(f"| {model_type} | {row.get('architecture', '')} | {what} | {row.get('statements', '')} | "
              f"{row.get('candidates', '')} | {err} |", flush=True)
    (work / f"coverage{'-decode' if args.decode else ''}-{kind}{args.tp}.json").write_text(json.dumps(rows, indent=1))
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["result"]] = counts.get(row["result"], 0) + 1
    print(f"\n{len(rows)} architectures at {kind.upper()} {args.tp}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    print(f"transformers {transformers.__version__}; experts replicated by the plan (left whole on every chip): "
          + (", ".join(r["model_type"] for r in rows if r.get("replicated_experts")) or "none"))
    why: dict[str, int] = {}
    for row in rows:
        if row["result"] not in ("ok", "MISMATCH"):
            why[refusal_class(row.get("detail", ""))] = why.get(refusal_class(row.get("detail", "")), 0) + 1
    for reason, n in sorted(why.items(), key=lambda kv: -kv[1]):
        print(f"- {n}: {reason}")
    return 0


def refusal_class(detail: str) -> str:
    """What a refusal is about, in a few words (the README's line per remaining refusal class)."""
    import re

    op = re.search(r"(aten\.[a-z_0-9]+)\.[a-zA-Z_]+ at ", detail)
    if op and "no registry class" in detail:
        return f"no registry class for {op.group(1)}"
    if op:
        return f"{op.group(1)}: " + re.sub(r".* at [^ ]+: ", "", detail)[:60]
    for words in ("cannot import", "transformers:", "heads", "split", "expected input_ids"):
        if words in detail:
            return re.sub(r"^[A-Za-z0-9]+: ", "", detail.split("config.json: import: ")[-1])[:90]
    return detail[:90]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
