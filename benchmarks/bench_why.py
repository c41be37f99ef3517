"""Time `why` (proofs and why-nots) on a program, after loading, for a sample of tuples.

    python benchmarks/bench_why.py DIR [--per-kind 5] [--seed 0] [--limit-ms 200]

For each kind of question (legal, refused for each reason that occurs, why-not of a
refused candidate's `legal`, why-not of reasons that do not hold, an unknown candidate)
it explains a random sample and renders the tree as `tprules why` prints it. Each
question starts as a fresh `tprules why` does after loading: a new explainer over the
model as evaluation left it (nothing decoded or indexed by earlier questions).
One untimed question first imports the modules explaining needs. Prints each kind's
median and worst time and the worst overall; exits 1 when the worst exceeds --limit-ms.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from anywhere

from tprules.explain.explainer import Explainer  # noqa: E402
from tprules.explain.query import read_atom  # noqa: E402
from tprules.explain.render import Renderer, to_text  # noqa: E402
from tprules.explain.terms import atom_text  # noqa: E402
from tprules.workspace import Workspace  # noqa: E402

NOT_HOLDING = ("cycle", "spans_chips", "chip_and_spine", "too_many_inputs")


def questions(ws: Workspace, per_kind: int, rng: random.Random) -> dict[str, list[str]]:
    """Atoms to explain, by kind."""
    model = ws.model

    def sample(items):
        items = sorted(items)
        return rng.sample(items, min(per_kind, len(items)))

    refused = sorted(model.tuples("refused"))
    legal = sorted(f for (f,) in model.tuples("legal"))
    kinds: dict[str, list[str]] = {"legal": [atom_text("legal", (f,)) for f in sample(legal)]}
    for reason in sorted({r for _, r in refused}):
        kinds[f"refused {reason}"] = [atom_text("refused", t) for t in sample(t for t in refused if t[1] == reason)]
    blocked = sorted({f for f, _ in refused})
    kinds["why-not legal (blocked)"] = [atom_text("legal", (f,)) for f in sample(blocked)]
    held = set(refused)
    kinds["why-not refused"] = [atom_text("refused", (f, r)) for f in sample(legal + blocked)
                                for r in NOT_HOLDING if (f, r) not in held]
    kinds["why-not unknown candidate"] = ['legal("no_such_candidate")']
    return kinds


class FreshStart:
    """A model as loading leaves it, for each question: nothing an earlier question decoded or indexed.

    The fast engine's model gets a new view over the same columns, with only the inputs
    decoded (as `evaluate` leaves them); a tuple model keeps only the indexes evaluation
    built. A benchmark may look inside the models; the tools do not.
    """

    def __init__(self, ws: Workspace):
        self.ws, self.model = ws, ws.model
        self.loaded = dict(getattr(self.model, "_indexes", {}))

    def __call__(self):
        model, ws = self.model, self.ws
        if hasattr(model, "arrays"):
            from tprules.datalog.engine.fast_model import ColumnarModel

            fresh = ColumnarModel(ws.checked, model.symbols, model.arrays)
            fresh.round_arrays = model.round_arrays
            for rel, tuples in ws.program.facts.relations.items():
                if rel in model.arrays:
                    fresh.relations.decoded[rel] = tuples
            return fresh
        model._indexes = dict(self.loaded)
        return model


def time_one(ws: Workspace, text: str, fresh: FreshStart) -> tuple[float, int]:
    model = fresh()
    started = time.perf_counter()
    explainer = Explainer(ws.checked, model, ws.program.facts, ws.program.position)
    answer = explainer.explain(read_atom(text, ws.checked))
    lines = to_text(Renderer("--subproof {id}").explanation(answer), width=1000).count("\n")
    return time.perf_counter() - started, lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", help="program folder")
    parser.add_argument("--per-kind", type=int, default=5, help="tuples sampled per kind of question")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit-ms", type=float, default=200.0, help="exit 1 when the worst time exceeds this")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    ws = Workspace(args.dir)
    _ = ws.model  # evaluate now
    gc.freeze()  # as `tprules why` and `tprules repl` do after loading (see settle_after_loading)
    load = time.perf_counter() - started
    statements = len(ws.program.order)
    candidates = len({f for f, _ in ws.model.tuples("member")})
    print(f"{args.dir}: {statements} statements, {candidates} candidates; loaded and evaluated in {load:.2f} s")
    fresh = FreshStart(ws)
    time_one(ws, 'legal("warm_up")', fresh)  # untimed: imports modules once, as any first command does
    worst = (0.0, "")
    print(f"{'question':<28} {'n':>3} {'median ms':>10} {'worst ms':>9}  worst tuple (lines of tree)")
    for kind, atoms in questions(ws, args.per_kind, random.Random(args.seed)).items():
        if not atoms:
            continue
        times = []
        slowest = (0.0, "", 0)
        for text in atoms:
            seconds, lines = time_one(ws, text, fresh)
            times.append(seconds)
            slowest = max(slowest, (seconds, text, lines))
        worst = max(worst, slowest[:2])
        print(f"{kind:<28} {len(times):>3} {statistics.median(times) * 1000:>10.1f} {slowest[0] * 1000:>9.1f}  "
              f"{slowest[1]} ({slowest[2]})")
    print(f"worst: {worst[0] * 1000:.1f} ms for {worst[1]} (limit {args.limit_ms:.0f} ms)")
    return 0 if worst[0] * 1000 <= args.limit_ms else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
