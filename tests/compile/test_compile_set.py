"""The CI set, compiled with no GPU (benchmarks/ptx_check.py, which is
`tprules compile`'s code): every example unfused, as planned (our tiles, and split around a
library's gemm) and its hand-made fused groups (tests/data/compile/groups.json: every stage
kind in its fused forms); a tiny imported Llama, Qwen2 and Gemma at TP 4, the same ways; and what issues 21 and 22 added: a
tiny Mixtral (top-k routing, experts' rows by id), a tiny Bamba (a Mamba layer's conv1d) and a tiny GLM-4-MoE
(group-limited routing: a scatter of the groups' mask, a gather of the router's weights) at TP 2.
Everything is built for sm_90 (the H100/H200 generation the GPU check runs on); for sm_80
(A100) the examples and the fused groups, which hold every stage kind: the imported models'
kernels are made of the same stages, and building them twice doubled this module's time."""

from __future__ import annotations

import json

import pytest

from tests.frontends.tiny import GROUP_ROUTING, MAMBA, MUST_WORK, make_model

from .conftest import ARCHES, ROOT, python

EXAMPLES = sorted(p.name for p in (ROOT / "facts").iterdir() if (p / "op.facts").exists())
# model type → (its tiny config's own fields, TP)
IMPORTS = {**{m: ({}, 4) for m in MUST_WORK}, "mixtral": ({}, 2), "bamba": (MAMBA, 2), "glm4_moe": (GROUP_ROUTING, 2)}
PROGRAMS = EXAMPLES + [f"hf-{m}-tp{tp}" for m, (_, tp) in IMPORTS.items()]
MODELS_ARCH = ARCHES[0]  # the imported models are built for this one only (see above)
BUILDS = [(arch, p) for arch in ARCHES for p in PROGRAMS if arch == MODELS_ARCH or not p.startswith("hf-")]


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    """hf-NAME-tpN → the program folder of that tiny model imported at TP N (none without torch)."""
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        return {}
    from tprules.frontends.drivers.hf import import_hf

    out = {}
    for m, (fields, tp) in IMPORTS.items():
        folder = tmp_path_factory.mktemp(f"{m}-tp{tp}")
        import_hf(make_model(folder / "model", m, **fields), tp, folder / "program")
        out[f"hf-{m}-tp{tp}"] = folder / "program"
    return out


@pytest.fixture(scope="session")
def compiled(nvvm, models, tmp_path_factory):
    """arch → {program: [every distinct kernel's result]}, one process per arch."""
    done = {}

    def get(arch: str) -> dict[str, list[dict]]:
        if arch not in done:
            out = tmp_path_factory.mktemp(arch) / "kernels.json"
            imported = map(str, models.values()) if arch == MODELS_ARCH else ()
            r = python("benchmarks/ptx_check.py", "--arch", arch, "--json", str(out), *EXAMPLES, *imported,
                       timeout=1200)
            assert r.returncode in (0, 1), r.stderr[-2000:]
            names = {str(v): k for k, v in models.items()}
            by_program: dict[str, list[dict]] = {}
            for k in json.loads(out.read_text())["kernels"]:
                by_program.setdefault(names.get(k["program"], k["program"]), []).append(k)
            done[arch] = by_program
        return done[arch]

    return get


@pytest.mark.parametrize("arch, program", BUILDS)
def test_every_kernel_builds_for_the_architecture(compiled, models, arch, program):
    if program.startswith("hf-") and program not in models:
        pytest.skip("the import extra (torch, transformers) is not installed")
    kernels = compiled(arch)[program]
    jobs = {k["job"] for k in kernels}
    assert {"unfused", "plan"} <= jobs
    failed = [f"{k['group']} ({k['job']}): statement {k['statement']}: {k['error']}" for k in kernels if not k["ok"]]
    assert not failed, failed
    assert all(k["registers"] > 0 for k in kernels)  # ptxas ran on each (the nvcc wheel is in the extra)


@pytest.mark.parametrize("arch", ARCHES)
def test_the_fused_groups_cover_every_stage_kind(compiled, arch):
    fused = [k for ks in compiled(arch).values() for k in ks if k["job"] == "fused groups"]
    kinds = {part for k in fused for part in k["kinds"].split("+")}
    assert {"matmul", "row", "pointwise", "absmax"} <= kinds, kinds


def test_each_chips_attention_builds_as_one_stage(compiled, models, arch=MODELS_ARCH):
    """In the imported models' plans each chip's attention is one online-softmax stage
    (codegen/cuda/attention.py), with our tiles and split around a library's gemm."""
    if not models:
        pytest.skip("the import extra (torch, transformers) is not installed")
    for m in MUST_WORK:
        kernels = [k for k in compiled(arch)[f"hf-{m}-tp4"] if "attention" in k["kinds"].split("+")]
        assert kernels and all(k["ok"] for k in kernels), m
        assert {k["job"] for k in kernels} >= {"plan"}, m


def test_a_compiler_error_is_plain_text_where_numba_colours_it():
    from tprules.codegen.cuda.nvvm import first_error

    coloured = ("\x1b[1m\x1b[1mFailed in cuda mode pipeline (step: nopython frontend)\n\x1b[1m\x1b[1m"
                "Unsupported array index type float32 in Tuple(float32, int64)\x1b[0m\n\x1b[0m\x1b[1mDuring: typing\x1b[0m")
    assert first_error("NumbaTypeError", coloured) == \
        "NumbaTypeError: Unsupported array index type float32 in Tuple(float32, int64)"
