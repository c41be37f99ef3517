"""The torchtitan-style Llama 3 of facts/recipes/ through the importer's passes at TP 1: traced
to core ATen (source/core_aten.py), lowered by the op table (lowering/walk.py), and its statements run by
the class table's references on an input the trace did not see, against the module's own
forward. Complex rotary from a complex64 buffer, GQA (torchtitan's expand form and
torch.repeat_interleave), causal SDPA and SwiGLU all lower."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

RECIPES = Path(__file__).resolve().parents[3] / "facts" / "recipes"


def _recipe(name: str):
    """The recipe module, loaded as the importer loads one: its own folder first on sys.path."""
    sys.path.insert(0, str(RECIPES))
    try:
        spec = importlib.util.spec_from_file_location(f"_recipe_{name}", RECIPES / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(RECIPES))
    return module


def _lowered(model, args):
    from tprules.frontends.lowering.walk import Lowerer
    from tprules.frontends.source.constants import Constants
    from tprules.frontends.source.core_aten import export

    with torch.no_grad():
        program = export(model, args, {})
    constants = Constants(program, model)
    return Lowerer(program, constants, "torchtitan-llama3").run(), constants


def _reference(graph, constants, ids: np.ndarray) -> np.ndarray:
    """The graph's logits, each statement by its class's reference (runtime/values/semantics.py)."""
    from tprules.runtime.values.semantics import apply

    env = {}
    for v in graph.values.values():
        if v.role == "input":
            env[v.name] = ids
        elif v.role == "weight":
            env[v.name] = constants.weight(v.name).float().numpy()
        elif v.role == "folded":
            env[v.name] = np.asarray(constants.value(graph.folded[v.name]).float().numpy())
    for s in graph.stmts:
        out = graph.values[s.writes]
        env[s.writes] = np.asarray(apply(s.cls, dict(s.attrs), [env[r] for r in s.reads], {}, out.dtype,
                                         out.shape)).reshape(out.shape)
    return env["logits"]


@pytest.fixture(scope="module")
def recipe():
    return _recipe("llama3_debug")


@pytest.mark.parametrize("kv_repeat", ["expand", "interleave"])
def test_the_debug_llama_lowers_and_computes_its_forward(recipe, kv_repeat):
    model = recipe.model(dataclasses.replace(recipe.ARGS, kv_repeat=kv_repeat))
    graph, constants = _lowered(model, recipe.inputs(seq=8))
    (ids,) = recipe.inputs(seq=8, seed=1)  # not the traced input: nothing of it folded in
    with torch.no_grad():
        want = model(ids).numpy()
    got = _reference(graph, constants, ids.numpy())
    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()
    classes = {s.cls for s in graph.stmts}
    assert {"embedding", "matmul", "bmm", "softmax", "sub", "expand", "rsqrt", "sigmoid"} <= classes
    modules = {s.module for s in graph.stmts}
    assert {"tok_embeddings", "layers.0.attention_norm", "layers.1.attention.wk", "layers.1.feed_forward.w2",
            "norm", "output"} <= modules


def test_both_forms_of_the_kv_repeat_are_the_same_program(recipe):
    graphs = [_lowered(recipe.model(dataclasses.replace(recipe.ARGS, kv_repeat=k)), recipe.inputs())[0]
              for k in ("expand", "interleave")]
    assert [(s.cls, s.attrs) for s in graphs[0].stmts] == [(s.cls, s.attrs) for s in graphs[1].stmts]


def test_the_rotary_table_is_a_constant_of_the_buffer(recipe):
    """freqs_cis (complex64) folds into real and imaginary tables; no complex value is an input."""
    graph, _ = _lowered(recipe.model(), recipe.inputs())
    tables = {part: [v.shape for v in graph.values.values() if v.role == "folded" and f"_{part}_" in v.name]
              for part in ("real", "imag")}
    assert tables == {"real": [(1, 8, 1, 4)], "imag": [(1, 8, 1, 4)]}  # [1, seq, 1, pairs], shared by the layers
    assert all(v.dtype in ("f32", "i8", "i64") for v in graph.values.values())


def test_the_70b_recipe_has_llama_3_70b_shape():
    recipe = _recipe("llama3_70b")
    with torch.device("meta"):
        model = recipe.model()
        (ids,) = recipe.inputs(seq=16, batch=2)
    block = model.layers["79"]
    assert len(model.layers) == 80 and model.tok_embeddings.weight.shape == (128256, 8192)
    assert block.attention.wq.weight.shape == (8192, 8192) and block.attention.wk.weight.shape == (1024, 8192)
    assert block.feed_forward.w1.weight.shape == (28672, 8192)
    assert ids.shape == (2, 16) and ids.device.type == "meta"
    assert sum(p.numel() for p in model.parameters()) == 70_553_706_496
