"""Compile every CUDA kernel of a set of programs for a GPU architecture, with no GPU: each
program unfused, as planned (with our own tiles and split around a library's gemm) and the
hand-made fused groups of tests/data/compile/groups.json (every stage kind in its fused
forms). The same code as `tprules compile` (tprules/commands/compile.py, codegen/cuda/nvvm.py).

    python benchmarks/ptx_check.py [--arch sm_90] [--json OUT.json] [PROGRAM...]

PROGRAM is a program folder or the name of an example under facts/ (default: every
example). A kernel whose source equals one built before is built and printed once (the
JSON lists every kernel, `reused` for those). Needs the cuda-compile extra (`pip install -e '.[cuda-compile]'`) and must run
with NUMBA_ENABLE_CUDASIM unset. Prints one line per distinct kernel; exit 0 when every
kernel builds, 1 otherwise, 77 when NVVM cannot be loaded (nothing was checked).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
GROUPS = ROOT / "tests" / "data" / "compile" / "groups.json"


def jobs(folder: Path) -> list[tuple[str, dict]]:
    """(label, build_program options) for one program."""
    out = [("unfused", {"unfused": True}), ("plan", {}), ("plan, library gemm", {"matmul": "library"})]
    extra = json.loads(GROUPS.read_text())["groups"].get(folder.name)
    if extra:
        out.append(("fused groups", {"fused": extra}))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("programs", nargs="*")
    parser.add_argument("--arch", default="sm_90", help="GPU architecture (default sm_90)")
    parser.add_argument("--cc", help="the architecture as a compute capability, e.g. 9.0 (instead of --arch)")
    parser.add_argument("--json", help="write every kernel's result here")
    args = parser.parse_args(argv)
    from tprules.codegen.cuda import nvvm
    from tprules.commands.compile import build_program
    from tprules.errors import BadInput
    from tprules.workspace import Workspace

    arch = f"sm_{args.cc.replace('.', '')}" if args.cc else args.arch
    try:
        compiler = nvvm.Compiler(nvvm.parse_arch(arch))
    except BadInput as err:
        print(f"skipped: {err}", file=sys.stderr)
        return 77
    names = args.programs or sorted(p.name for p in (ROOT / "facts").iterdir() if (p / "op.facts").exists())
    started = time.perf_counter()
    results, failed, total = [], 0, 0
    for name in names:
        folder = Path(name) if Path(name).is_dir() else ROOT / "facts" / name
        ws = Workspace(folder)
        for label, options in jobs(folder):
            report = build_program(ws, compiler=compiler, **options)
            for b in report.builds:
                results.append({"program": name, "job": label, **b.to_json(), "reused": b.reused, "seconds": b.seconds})
                if b.reused:  # the same source as a kernel before: built and reported once
                    continue
                total += 1
                failed += not b.ok
                k = b.kernel
                what = f"{name} ({label}): {k.group} ({k.kind})"
                if b.ok:
                    usage = "" if b.registers is None else f"  {b.registers} registers, {b.shared_bytes} B shared"
                    print(f"ok      {what}{usage}")
                else:
                    print(f"FAILED  {what}: statement {b.statement}: {b.error}")
    seconds = time.perf_counter() - started
    print(f"{len(results)} kernels, {total} distinct, compiled for {arch} in {seconds:.1f} s; {failed} failed")
    if args.json:
        Path(args.json).write_text(json.dumps({"arch": arch, "seconds": seconds, "kernels": results}, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
