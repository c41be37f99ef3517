"""On a machine with a GPU: check every CUDA kernel against the reference, then time fused
against unfused with `--device cuda`. One short run (a few minutes, mostly compiling).

    python benchmarks/gpu_check.py [--json results.json] [--repeat 20] [--skip-bench]

Checks, each against the numpy reference, with our own matmul tiles (`--matmul own`) and,
when a GPU matmul library is present (cuBLAS through CuPy or PyTorch), with the library
path too (`--matmul library`: matmul stages split around the library's gemm):
1. every example under facts/, unfused and as the planner plans it;
2. every hand-made fused plan of tests/data/runtime/fused/ (every stage kind: matmul
   prologue and epilogue, sibling matmuls, row ops with neighbours, two-pass int8 reads,
   multi-stage groups; the fused-fold cases must mismatch);
3. the Llama-layer benchmark (benchmarks/bench_run.py --device cuda) at TP 1, 2, 4 with
   each matmul core, beside PyTorch eager on the GPU when torch sees one.
Exit 0 when everything matched as expected. Run it with NUMBA_ENABLE_CUDASIM unset.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))


def environment(device_name: str) -> dict:
    import numba
    import numpy

    from tprules.runtime.devices import get_device

    device = get_device(device_name)  # first: it decides between the simulator and a GPU
    info = {"python": sys.version.split()[0], "numpy": numpy.__version__, "numba": numba.__version__}
    try:
        from importlib.metadata import version

        info["numba_cuda"] = version("numba-cuda")
    except Exception:  # noqa: BLE001 - informative only
        info["numba_cuda"] = "?"
    info["device"] = device.describe()
    info["matmul"] = {"library": device.core.library, "reason": device.core.reason, "kind": device.core.kind}
    try:
        from numba import cuda

        info["driver"] = ".".join(map(str, cuda.cudadrv.driver.driver.get_version()))
        info["runtime"] = ".".join(map(str, cuda.runtime.get_version()))
    except Exception as err:  # noqa: BLE001 - informative only
        info["driver"] = f"? ({err})"
    return info


def check(label: str, run, expect_ok: bool, results: list) -> None:
    started = time.perf_counter()
    try:
        r = run()
        good = r.ok == expect_ok
        entry = {"check": label, "ok": r.ok, "expected": expect_ok, "passed": good, "kernels": r.kernels,
                 "groups": r.groups, "max_rel_err": r.max_rel_err, "compile_s": r.compile_s, "run_s": r.run_s}
        bad = [o.tensor for o in r.outputs if not o.ok]
        note = f"max rel err {r.max_rel_err:.2g}" + (f"; mismatched: {', '.join(bad)}" if bad else "")
    except Exception as err:  # noqa: BLE001 - report and go on to the next check
        good = False
        entry = {"check": label, "passed": False, "error": f"{type(err).__name__}: {err}",
                 "traceback": traceback.format_exc()[-2000:]}
        note = entry["error"]
    results.append(entry)
    print(f"{'PASS' if good else 'FAIL'}  {label:<55} {time.perf_counter() - started:6.1f}s  {note}", flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="CUDA kernels against the reference, and fused vs unfused timing")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--repeat", type=int, default=20, help="timed runs per plan in the benchmark")
    p.add_argument("--skip-bench", action="store_true")
    p.add_argument("--device", default="cuda", help="cuda (default); sim or cpu to try this script without a GPU")
    args = p.parse_args(argv)

    from plans import cases, fused_plan

    from tprules.planner import plan as make_plan
    from tprules.runtime import Program, execute
    from tprules.runtime.plan.groups import unfused
    from tprules.workspace import Workspace

    started = time.perf_counter()
    info = environment(args.device)
    print(json.dumps(info), flush=True)
    results: list[dict] = []
    examples = sorted(p.name for p in (ROOT / "facts").iterdir() if (p / "op.facts").exists())
    loaded = {}
    cores = ["own"] + (["library"] if info["matmul"]["kind"] == "library" else [])
    for core in cores:
        for name in examples:
            ws = Workspace(ROOT / "facts" / name)
            prog = Program.from_workspace(ws)
            loaded[name] = (ws, prog)
            check(f"{name} unfused [{core}]",
                  lambda ws=ws, prog=prog, core=core: execute(ws, unfused(prog), device=args.device, prog=prog,
                                                              matmul=core), True, results)
            check(f"{name} planned [{core}]",
                  lambda ws=ws, prog=prog, core=core: execute(ws, make_plan(ws), device=args.device, prog=prog,
                                                              matmul=core), True, results)
        for case_name, case in cases().items():
            ws, prog = loaded[case["program"]]
            plan = fused_plan(prog, case["groups"])
            check(f"fused {case_name} [{core}]",
                  lambda ws=ws, plan=plan, prog=prog, core=core: execute(ws, plan, device=args.device, prog=prog,
                                                                         matmul=core),
                  case["matches_reference"], results)
    bench = None
    if not args.skip_bench:
        import io
        from contextlib import redirect_stdout

        import bench_run

        for core in cores:
            out = io.StringIO()
            with redirect_stdout(out):
                status = bench_run.main(["--device", args.device, "--repeat", str(args.repeat), "--matmul", core,
                                         "--impls", "unfused,planner,torch"])
            bench = out.getvalue()
            print(bench, end="")
            results.append({"check": f"bench_run --device {args.device} --matmul {core}", "passed": status == 0,
                            "output": bench})
    failed = [r["check"] for r in results if not r["passed"]]
    print(f"{len(results) - len(failed)} passed, {len(failed)} failed in {time.perf_counter() - started:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps({"environment": info, "results": results}, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
