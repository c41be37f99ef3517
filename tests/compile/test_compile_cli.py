"""`tprules compile`: its report, JSON, --out, bad input, and what it says when a kernel
does not build or NVVM is missing."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from tprules.program.builder import ProgramBuilder

from .conftest import python, tprules

MLP = "facts/megatron-mlp-tp2"


def test_text_report_has_a_row_per_kernel(nvvm):
    r = tprules("compile", MLP, "--device", "cuda", "--arch", "sm_90")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith(f"compile {MLP} for sm_90   NVVM ") and ", ptxas " in lines[0]
    assert lines[1] == "plan: 4 groups -> 4 kernels, 3 distinct sources; matmul: own tiles"
    header = lines[3].split()
    assert header[:4] == ["group", "place", "kinds", "registers"] and header[-1] == "members"
    rows = {ln.split()[0]: ln for ln in lines[4:8]}
    assert set(rows) == {"g0", "g1", "g2", "g3"}
    assert re.match(r"g0\s+chip:0\s+matmul\+matmul\s+\d+\s+2\.0 KiB\s+0 B/0 B\s+\d+x256, \d+x256\s+mm1_0, gelu_0, mm2_0$",
                    rows["g0"]), rows["g0"]
    assert re.match(r"4 kernels \(3 distinct\) compiled for sm_90 in .*: every kernel builds; at most \d+ registers, "
                    r"2\.0 KiB shared, no spills$", lines[-1]), lines[-1]
    assert r.stderr == ""


def test_json_and_out_keep_ptx_and_cubins(nvvm, tmp_path):
    out = tmp_path / "kernels"
    r = tprules("compile", MLP, "--arch", "sm_80", "--unfused", "--format", "json", "--out", out)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["arch"] == "sm_80" and data["ok"] is True
    keys = {"group", "members", "registers", "shared_bytes", "spill_stores", "spill_loads", "launch"}
    assert len(data["kernels"]) == 9 and all(keys <= set(k) for k in data["kernels"])
    mm = next(k for k in data["kernels"] if k["group"] == "mm1_0")
    assert mm["members"] == ["mm1_0"] and mm["shared_bytes"] == 2048 and mm["launch"] == [[2, 256]]
    assert mm["registers"] > 0 and mm["spill_stores"] == mm["spill_loads"] == 0
    ptx = sorted(out.glob("*.ptx"))
    assert len(ptx) == data["distinct"] == len(list(out.glob("*.cubin"))) == len(list(out.glob("*.py")))
    assert ".target sm_80" in (out / "mm1_0.ptx").read_text()
    assert (out / "mm1_0.cubin").read_bytes()[:4] == b"\x7fELF"


def test_library_gemm_splits_the_matmul_kernels(nvvm):
    r = tprules("compile", MLP, "--matmul", "library", "--format", "json")
    assert r.returncode == 0, r.stderr
    g0 = json.loads(r.stdout)["kernels"][0]
    assert g0["kinds"] == "pointwise+gemm+pointwise+gemm" or "gemm" in g0["kinds"]
    assert None in g0["launch"]  # the library's gemm is not our launch


@pytest.mark.parametrize("arch", ["90", "sm90", "compute_90", ""])
def test_a_bad_architecture_is_one_line_and_exit_2(cli, arch):
    status, out, err = cli("compile", MLP, "--arch", arch)
    assert status == 2 and out == ""
    assert err == f"usage: --arch takes a GPU architecture such as sm_90 or sm_80; got {arch!r}\n"


def test_an_architecture_nvvm_does_not_build_for_is_one_line_and_exit_2(nvvm):
    r = tprules("compile", MLP, "--arch", "sm_50")  # CUDA 13 builds for 7.5 and newer
    assert r.returncode == 2 and r.stdout == ""
    assert re.fullmatch(r"usage: NVVM [\d.]+ \(numba-cuda [\d.]+\) does not build for sm_50: CCSupportError: .*\n",
                        r.stderr), r.stderr


def test_without_nvvm_it_says_what_to_install():
    code = ("import sys, numba.cuda.cudadrv.nvvm as n\n"
            "def missing(*a, **k): raise OSError('libnvvm.so: cannot open shared object file')\n"
            "n.NVVM = missing\n"
            "from tprules.cli import main\n"
            f"sys.exit(main(['compile', '{MLP}']))\n")
    r = python("-c", code)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == ("not installed: NVVM cannot be loaded (libnvvm.so: cannot open shared object file); install it: "
                        "pip install -e '.[cuda-compile]' (NVVM, NVRTC and ptxas of CUDA 13)\n")


def test_with_the_simulator_on_it_says_to_unset_it(cli):
    status, out, err = cli("compile", MLP)  # this test session runs the simulator
    assert status == 2 and out == ""
    assert err == ("usage: NUMBA_ENABLE_CUDASIM=1 turns on the CUDA simulator, which cannot make PTX; "
                   "unset it to compile\n")


def test_without_ptxas_it_builds_ptx_and_says_so(nvvm):
    code = ("import sys\nfrom tprules.codegen.cuda import nvvm\nnvvm.find_ptxas = lambda: None\n"
            f"from tprules.cli import main\nsys.exit(main(['compile', '{MLP}']))\n")
    r = python("-c", code)
    assert r.returncode == 0, r.stderr
    assert re.search(r"^g0 .* matmul\+matmul\s+-\s+-\s+-\s+", r.stdout, re.M), r.stdout
    assert r.stdout.splitlines()[-1].startswith("ptxas not found: PTX only")


def test_a_kernel_that_does_not_build_names_group_statement_and_first_error(nvvm, tmp_path):
    """Issue 23's bug put back (an embedding indexing its table with float32 ids, the
    renderer's typing turned off): exit 1, naming the group, the statement and NVVM's
    first error line; the other kernels are still reported."""
    b = ProgramBuilder(chips=1)
    ids = b.tensor("ids", [2, 3], "i64", spine=True, data=np.array([[4, 0, 2], [2, 2, 1]], np.int64))
    e = b.stmt("emb", "embedding", [b.tensor("table", [5, 4], spine=True), ids], b.tensor("e", [2, 3, 4], spine=True))
    b.stmt("act", "sigmoid", [e], b.tensor("out", [2, 3, 4], spine=True))
    folder = b.write(tmp_path / "p")
    code = ("import sys\nfrom tprules.codegen.cuda import typed\nfrom tprules.codegen.render.emit import Scope\n"
            "typed.check = lambda *a: None\nScope.index = lambda self, e, idx: self.at(e, idx)\n"
            f"from tprules.cli import main\nsys.exit(main(['compile', '{folder}', '--unfused']))\n")
    r = python("-c", code)
    assert r.returncode == 1, r.stderr
    assert re.search(r"^emb\s+spine\s+pointwise\s+FAILED", r.stdout, re.M)
    assert re.search(r"^act\s+spine\s+pointwise\s+\d+", r.stdout, re.M)
    assert ("FAILED emb (statement emb): NumbaTypeError: Unsupported array index type float32 in "
            "Tuple(float32, int64)") in r.stdout
    assert re.search(r": 1 failed; at most \d+ registers, 0 B shared, no spills$", r.stdout.splitlines()[-1])
    fused = python("-c", code.replace(", '--unfused'", ""))  # the plan fuses both: the member is found alone
    assert fused.returncode == 1 and re.search(r"^FAILED g0 \(statement emb\): NumbaTypeError: ", fused.stdout, re.M), \
        fused.stdout


def test_a_sequence_parallel_program_builds_for_sm_90(nvvm):
    """facts/sp-mlp-tp2: each chip's slice of the reduce-scatter, fused with its residual and
    RMSNorm, is a row kernel that NVVM builds for a real architecture."""
    r = tprules("compile", "facts/sp-mlp-tp2", "--device", "cuda", "--arch", "sm_90", "--format", "json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["ok"] is True and data["arch"] == "sm_90"
    rows = [k for k in data["kernels"] if k["members"][0].startswith("scatter_")]
    assert [k["members"] for k in rows] == [["scatter_0", "residual_0", "norm_0"], ["scatter_1", "residual_1", "norm_1"]]
    assert all(k["registers"] > 0 and k["spill_stores"] == 0 for k in rows)
    # the reduce-scatter's fold is no kernel (run lowers it as a collective); the all-gather's is
    assert [k["members"] for k in data["kernels"] if k["members"] in (["scatter"], ["allgather"])] == [["allgather"]]


def test_collective_kernels_build_for_sm_90(nvvm):
    """facts/async-tp-mlp-tp2 under the shim that declares collective kernels: each kernel's
    parts (its fold, and its matmuls or norm beside it) build, as `run` compiles them
    (runtime/plan/collective.py); the reduce-scatter's fold is the collective, no kernel."""
    r = tprules("compile", "facts/async-tp-mlp-tp2", "--shim", "cuda-lane:h200:Bf16SymmMem", "--device", "cuda",
                "--arch", "sm_90", "--format", "json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["ok"] is True and data["arch"] == "sm_90"
    by_group: dict[str, list[list[str]]] = {}
    for k in data["kernels"]:
        by_group.setdefault(k["group"], []).append(k["members"])
    kernels = {g: sorted(ms) for g, ms in by_group.items() if len(ms) > 1}
    assert sorted(kernels.values()) == [[["allgather"], ["mm1_0"], ["mm1_1"]], [["allreduce"], ["norm"], ["res"]],
                                        [["mm2_0"], ["mm2_1"], ["scatter_0"], ["scatter_1"]]]
