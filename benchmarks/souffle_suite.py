"""Run Soufflé's own evaluation suite with `tprules eval` on each engine.

    python benchmarks/souffle_suite.py SOUFFLE_CHECKOUT [--suite evaluation] [--engines fast,compiled,pydatalog]
        [--timeout 60] [--pydatalog-timeout 20] [--jobs 2] [--only NAME,...] [--json OUT]

For every program `tests/<suite>/<name>/<name>.dl` of a Soufflé checkout (tag 2.5; the suite
folder is `evaluation` unless `--suite` names another, e.g. `example`), this
runs `tprules eval <name>.dl -F <name>/facts -D <tmp>` (in the case's folder, as Soufflé's
test driver does) and compares every `.csv` it writes with the case's expected `.csv`
(rows sorted, the same set of files). Each case and engine is one of:

  pass      the same relations as Soufflé
  wrong     a relation differs (or a file is missing or extra)
  crash     a Python traceback or an internal error
  timeout   no answer within the timeout
  refused   tprules refuses a construct it does not support, named (exit 2, "unsupported")
  rejected  tprules rejects the program for another reason (exit 2; the message is shown)

The programs stay in the Soufflé checkout; nothing is copied into this repository.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENGINES = ("fast", "compiled", "pydatalog")


def cases(checkout: Path, folder: str = "evaluation") -> list[Path]:
    suite = checkout / "tests" / folder
    if not suite.is_dir():
        sys.exit(f"souffle_suite.py: {suite} is not a folder; give the root of a Soufflé checkout")
    return sorted(d for d in suite.iterdir() if d.is_dir() and (d / f"{d.name}.dl").is_file())


def _digits(field: str):
    return f"{int(field):0>20d}" if field.isdigit() else field


def sorted_rows(path: Path) -> list[str]:
    """A .csv's rows in the order Soufflé's test driver compares them."""
    rows = [row.rstrip() for row in path.read_text().splitlines()]
    return sorted(rows, key=lambda row: [_digits(f) for f in row.split("\t")])


def compare(case: Path, out: Path) -> str | None:
    """None when the written relations are the expected ones, else what differs."""
    want = {p.name for p in case.glob("*.csv")}
    got = {p.name for p in out.glob("*.csv")}
    if want != got:
        missing, extra = sorted(want - got), sorted(got - want)
        return "; ".join(filter(None, [f"missing {', '.join(missing)}" if missing else "",
                                       f"extra {', '.join(extra)}" if extra else ""]))
    for name in sorted(want):
        a, b = sorted_rows(case / name), sorted_rows(out / name)
        if a != b:
            only_a = sorted(set(a) - set(b))[:2]
            only_b = sorted(set(b) - set(a))[:2]
            return f"{name}: expected {len(a)} rows, got {len(b)} (missing {only_a}, extra {only_b})"
    return None


def run_case(case: Path, engine: str, timeout: float) -> tuple[str, str, float]:
    """(outcome, detail, seconds) of one program on one engine."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        out.mkdir()
        command = [sys.executable, "-m", "tprules", "eval", f"{case.name}.dl", "-F", "facts", "-D", str(out),
                   "--engine", engine]
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        start = time.perf_counter()
        try:
            done = subprocess.run(command, cwd=case, capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            return "timeout", f"no answer within {timeout:g} s", timeout
        seconds = time.perf_counter() - start
        err = done.stderr.strip()
        if "Traceback" in err or done.returncode not in (0, 2):
            last = err.splitlines()[-1] if err else f"exit status {done.returncode}"
            return "crash", last, seconds
        if done.returncode == 2:
            first = err.splitlines()[0] if err else ""
            found = re.search(r"unsupported: tprules does not support (.*)$", first)
            if found:
                return "refused", found.group(1), seconds
            return "rejected", first, seconds
        diff = compare(case, out)
        return ("pass", "", seconds) if diff is None else ("wrong", diff, seconds)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkout", type=Path, help="root of a Soufflé checkout (tag 2.5)")
    parser.add_argument("--suite", default="evaluation", help="the folder under tests/ (default: evaluation)")
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per program (fast, compiled)")
    parser.add_argument("--pydatalog-timeout", type=float, default=20.0, help="seconds per program (pydatalog)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", help="comma-separated case names")
    parser.add_argument("--json", type=Path, help="also write every outcome here")
    args = parser.parse_args(argv)
    engines = [e for e in args.engines.split(",") if e]
    chosen = cases(args.checkout, args.suite)
    if args.only:
        names = set(args.only.split(","))
        chosen = [c for c in chosen if c.name in names]
    jobs = [(c, e) for c in chosen for e in engines]
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(lambda job: run_case(job[0], job[1], args.pydatalog_timeout if job[1] == "pydatalog"
                                                     else args.timeout), jobs))
    outcome = {(c.name, e): r for (c, e), r in zip(jobs, results)}
    width = max((len(c.name) for c in chosen), default=4)
    print(f"{'case':<{width}}  " + "  ".join(f"{e:<10}" for e in engines))
    for case in chosen:
        cells = [outcome[case.name, e][0] for e in engines]
        details = sorted({outcome[case.name, e][1] for e in engines if outcome[case.name, e][0] != "pass"} - {""})
        print(f"{case.name:<{width}}  " + "  ".join(f"{c:<10}" for c in cells) + ("  " + " | ".join(details)
                                                                                   if details else ""))
    print()
    for engine in engines:
        counts = Counter(outcome[c.name, engine][0] for c in chosen)
        refused = Counter(outcome[c.name, engine][1] for c in chosen if outcome[c.name, engine][0] == "refused")
        summary = ", ".join(f"{k} {counts[k]}" for k in ("pass", "wrong", "crash", "timeout", "refused", "rejected")
                            if counts[k])
        print(f"{engine}: {counts['pass']} of {len(chosen)} pass ({summary})")
        for construct, n in refused.most_common():
            print(f"    refused {n:>3}  {construct}")
    if args.json:
        args.json.write_text(json.dumps([{"case": c, "engine": e, "outcome": r[0], "detail": r[1],
                                          "seconds": round(r[2], 3)} for (c, e), r in sorted(outcome.items())],
                                        indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
