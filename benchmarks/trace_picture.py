"""Draw a `tprules run --trace` file as a timeline picture (for the README, where Perfetto's
UI cannot be reached): one row per thread (a chip, or a rank's host thread), a bar per
kernel, collective and transfer slice of the run, coloured by kind.

    python benchmarks/trace_picture.py TRACE.json OUT.png [--title TEXT]

Needs matplotlib (the `bench` extra). Compile phases are left out: the picture is the run.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

COLOURS = {"kernel": "#4C72B0", "collective": "#DD8452", "transfer": "#55A868"}


def rows_of(trace: dict) -> tuple[list[tuple[int, int]], dict[tuple[int, int], str]]:
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    procs = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    used = sorted({(e["pid"], e["tid"]) for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] in COLOURS})
    labels = {}
    for pid, tid in used:
        proc = procs.get(pid, f"process {pid}").split(" (")[0]
        labels[(pid, tid)] = f"{proc} · {names.get((pid, tid), tid)}" if len(procs) > 1 else names.get((pid, tid), tid)
    return used, labels


def draw(trace: dict, out: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    slices = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] in COLOURS]
    slices.sort(key=lambda e: ("collective", "kernel", "transfer").index(e["cat"]))  # copies drawn over their collective
    rows, labels = rows_of(trace)
    t0 = min(e["ts"] for e in slices)
    fig, ax = plt.subplots(figsize=(12, 0.45 * len(rows) + 1.4), dpi=110)
    for e in slices:
        y = rows.index((e["pid"], e["tid"]))
        start, width = (e["ts"] - t0) / 1e3, max(e["dur"] / 1e3, 0.004)
        # kernels in the upper part of a chip's row; copies and collectives below them
        low, height = (-0.42, 0.5) if e["cat"] == "kernel" else (0.12, 0.3)
        if e["tid"] >= 1000:  # a host thread holds only MPI collectives and messages
            low, height = -0.35, 0.7
        ax.broken_barh([(start, width)], (y + low, height), facecolors=COLOURS[e["cat"]], edgecolor="white",
                       linewidth=0.3)
        if e["cat"] == "kernel" and width > 0.06 * max(1e-9, ax.get_xlim()[1] / 10):
            ax.text(start + width / 2, y - 0.17, e["args"].get("group", ""), ha="center", va="center", fontsize=6,
                    color="white", clip_on=True)
    ax.set_yticks(range(len(rows)), [labels[r] for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("ms from the run's first slice")
    ax.set_title(title, fontsize=10)
    ax.legend(handles=[Patch(color=c, label=k) for k, c in COLOURS.items()], loc="upper center", fontsize=8, ncol=3,
              bbox_to_anchor=(0.5, -0.12 - 0.5 / max(len(rows), 1)), frameon=False)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--title", default="")
    args = ap.parse_args()
    draw(json.loads(args.trace.read_text()), args.out, args.title or args.trace.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
