"""Does the stamped import (each layer kind traced once) equal a full trace, file for file,
on every architecture that imports?

    python benchmarks/stamp_check.py [--tp 2] [--layers 4] [--only llama,gemma2] [--work DIR]

For each model type of benchmarks/import_coverage.py: its tiny config (with the coverage
script's small expert, state-space and latent-attention fields where the config has them)
with --layers decoder layers (so that there is something to stamp), `import hf --no-data` twice, stamped and with
--every-layer, and every .facts file compared. Prints one line per model type: `same`
(with the layer kinds found and the layers traced), `DIFFERENT` (naming the files),
`traced whole` (the importer fell back to a full trace) or `not imported` (the import
itself fails, as in the coverage table).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from tiny_models import MOE, OVERRIDES, TINY, architectures, fitted  # noqa: E402


def check(model_type: str, work: Path, tp: int, layers: int) -> str:
    import transformers
    from transformers import CONFIG_MAPPING

    from tprules.errors import BadInput
    from tprules.frontends.drivers.hf import import_hf

    transformers.utils.logging.disable_progress_bar()
    source = work / model_type
    defined = CONFIG_MAPPING[model_type]().to_dict()
    moe = {k: v for k, v in MOE.items() if k in defined}  # a mixture of experts' own fields, small
    CONFIG_MAPPING[model_type](**{**TINY, **moe, **fitted(model_type), **OVERRIDES.get(model_type, {}),
                                  "num_hidden_layers": layers}).save_pretrained(source)
    try:
        stamped = import_hf(source, tp, work / f"{model_type}-stamped", no_data=True)
        import_hf(source, tp, work / f"{model_type}-traced", no_data=True, every_layer=True)
    except BadInput as err:
        return f"not imported ({str(err).splitlines()[0][:80]})"
    if stamped.kinds is None:
        return "traced whole (nothing to stamp at this layer count, or the graph does not fit)"
    a, b = work / f"{model_type}-stamped", work / f"{model_type}-traced"
    names = sorted({p.name for p in a.glob("*.facts")} | {p.name for p in b.glob("*.facts")})
    differ = [n for n in names if not ((a / n).exists() and (b / n).exists()
                                       and (a / n).read_bytes() == (b / n).read_bytes())]
    if differ:
        return "DIFFERENT: " + ", ".join(differ)
    return f"same ({stamped.kinds} layer kind{'s' if stamped.kinds > 1 else ''}, {stamped.traced} of {layers} traced)"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tp", type=int, default=2)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--only", default="")
    ap.add_argument("--work")
    args = ap.parse_args(argv)
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="tprules-stamp-"))
    types = [t for t in architectures() if not args.only or t in args.only.split(",")]
    bad = 0
    for model_type in types:
        try:
            result = check(model_type, work, args.tp, args.layers)
        except Exception as err:  # noqa: BLE001 - a broken tiny config is reported, not fatal
            result = f"not imported ({type(err).__name__}: {str(err).splitlines()[0][:80] if str(err) else ''})"
        bad += result.startswith("DIFFERENT")
        print(f"{model_type:24} {result}", flush=True)
        shutil.rmtree(work / f"{model_type}-stamped", ignore_errors=True)
        shutil.rmtree(work / f"{model_type}-traced", ignore_errors=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
