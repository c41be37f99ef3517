"""A digest of what `tprules import` writes, to show that a change of the importer left every
imported program as it was.

    python benchmarks/import_digest.py --out DIGEST.json [--models DIR] [--only llama,qwen2]
                                       [--modes tp,ep,decode,torch] [--compare OLD.json]

For every architecture of the coverage tables (benchmarks/tiny_models.py: the TP prefill, the EP
plans, the decode step at TP 2, as benchmarks/import_coverage.py imports them, first weight seed)
and every `import torch` recipe under tests/frontends/, runs `tprules import` through the command
line and records the SHA-256 of each file of the program folder (`*.facts`, `source.json`'s
program fields, `data/`, `expected/`), or the one-line refusal. `--models` keeps the tiny models
between runs (they are rebuilt only when missing). `--compare` prints every program whose digest
differs from OLD.json's and exits 1 if any does.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from tiny_models import WEIGHT_SEEDS, architectures, tiny_model  # noqa: E402

RECIPES = ["facts/recipes/llama3_debug.py"]


def digest(folder: Path) -> dict[str, str]:
    out = {}
    for path in sorted(folder.rglob("*")):
        if not path.is_file():
            continue
        rel = str(path.relative_to(folder))
        data = path.read_bytes()
        if rel == "source.json":  # timings and paths vary from run to run
            doc = json.loads(data)
            for key in ("seconds", "source", "out", "tprules", "created"):
                doc.pop(key, None)
            data = json.dumps(doc, sort_keys=True).encode()
        out[rel] = hashlib.sha256(data).hexdigest()[:16]
    return out


def one(argv: list[str], out: Path) -> dict:
    from tprules.cli import main

    shutil.rmtree(out, ignore_errors=True)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code
    if code != 0:
        return {"refused": err.getvalue().strip().splitlines()[-1:] or [f"exit {code}"]}
    return digest(out)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", default="/tmp/tprules-digest-models")
    ap.add_argument("--work", default="/tmp/tprules-digest-programs")
    ap.add_argument("--only")
    ap.add_argument("--modes", default="tp,ep,decode,torch")
    ap.add_argument("--compare")
    args = ap.parse_args(argv)
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    models, work = Path(args.models), Path(args.work)
    found: dict[str, dict] = {}
    modes = args.modes.split(",")
    for mode in modes:
        if mode == "torch":
            for recipe in RECIPES:
                found[f"torch/{recipe}"] = one(["import", "torch", str(ROOT / recipe), "--tp", "2",
                                                "--out", str(work / "torch")], work / "torch")
            continue
        kind = "ep" if mode == "ep" else "tp"
        types = args.only.split(",") if args.only else architectures(kind)
        for model_type in types:
            folder = models / f"{model_type}-{kind}"
            if not (folder / "config.json").exists():
                try:
                    tiny_model(model_type, folder, WEIGHT_SEEDS[0], None, 2 if kind == "ep" else 0)
                except Exception as err:  # noqa: BLE001
                    found[f"{mode}/{model_type}"] = {"no tiny model": type(err).__name__}
                    continue
            argv_ = ["import", "hf", str(folder), "--tp", "2", "--out", str(work / mode)]
            if mode == "ep":
                argv_.append("--ep")
            if mode == "decode":
                argv_ += ["--decode", "--past", "5", "--cache-len", "8"]
            found[f"{mode}/{model_type}"] = one(argv_, work / mode)
            print(mode, model_type, "refused" if "refused" in found[f"{mode}/{model_type}"] else "ok", flush=True)
            Path(args.out).write_text(json.dumps(found, indent=1, sort_keys=True))  # a run cut short keeps what it did
    Path(args.out).write_text(json.dumps(found, indent=1, sort_keys=True))
    if args.compare:
        old = json.loads(Path(args.compare).read_text())
        differ = [k for k in sorted(set(old) | set(found)) if k.split("/")[0] in modes and
                  (not args.only or k.split("/", 1)[1] in args.only.split(",") or k.startswith("torch/"))
                  and old.get(k) != found.get(k)]
        for key in differ:
            a, b = old.get(key, {}), found.get(key, {})
            files = sorted(f for f in set(a) | set(b) if a.get(f) != b.get(f))
            print(f"DIFFERS {key}: {', '.join(files[:8])}")
        print(f"{len(found)} programs, {len(differ)} differ")
        return 1 if differ else 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
