"""`tprules import torch`: small modules and plans in torch's own API, each imported at TP 2
(and 4): the program holds the collectives where DTensor puts them, and `run` matches the
module's own forward (expected/output.npy)."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("torch")

from ..tiny import facts  # noqa: E402
from ..torch_recipe import MEGATRON_LAYERS, TITAN, write_recipe  # noqa: E402

# name → (model, plan, the folds: (collective kind, fold axis or None, module) in program order)
CASES = {
    "mlp_colwise_rowwise": ("mlp", '{"w1": ColwiseParallel(), "w2": RowwiseParallel()}', [("all_reduce", None, "w2")]),
    "mlp_dtensor_between": ("mlp", '{"w1": ColwiseParallel(use_local_output=False), "w2": RowwiseParallel()}',
                            [("all_reduce", None, "w2")]),
    # a DTensor replicated by w1's output layout: w2 takes its real placement and slices it
    "mlp_gathered_dtensor_sliced": ("mlp", '{"w1": ColwiseParallel(output_layouts=Replicate(), use_local_output=False),'
                                           ' "w2": RowwiseParallel()}', [("all_gather", "2", "w1"),
                                                                         ("all_reduce", None, "w2")]),
    # the bias added to each chip's partial sum (1 / N of it each), so the reduce-scatter stays one
    "headed_bias_reduce_scattered": ("headed", """{
        "mlp.w1": ColwiseParallel(),
        "mlp.w2": RowwiseParallel(output_layouts=Shard(1)),
        "head": ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate()),
    }""", [("reduce_scatter", "1", "mlp.w2"), ("all_gather", "1", "head"), ("all_gather", "2", "head")]),
    "normed_sequence_parallel": ("normed", """{
        "inp": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
        "norm": SequenceParallel(),
        "ff": PrepareModuleInput(input_layouts=Shard(1), desired_input_layouts=Replicate()),
        "ff.w[13]": ColwiseParallel(),
        "ff.w2": RowwiseParallel(output_layouts=Shard(1)),
        "out_norm": PrepareModuleInputOutput(input_layouts=Shard(1), desired_input_layouts=Replicate(),
                                             use_local_input=True, output_layouts=Replicate(),
                                             desired_output_layouts=Replicate()),
    }""", [("reduce_scatter", "1", "inp"), ("all_gather", "1", "ff"), ("reduce_scatter", "1", "ff.w2"),
           ("all_gather", "1", "out_norm")]),
    "normed_output_gathered": ("normed", """{
        "inp": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
        "norm": SequenceParallel(),
        "ff": PrepareModuleInputOutput(input_layouts=Shard(1), desired_input_layouts=Replicate(),
                                       output_layouts=Replicate(), desired_output_layouts=Shard(1)),
        "out_norm": PrepareModuleOutput(output_layouts=Shard(1), desired_output_layouts=Replicate()),
    }""", [("reduce_scatter", "1", "inp"), ("all_gather", "1", "ff"), ("all_gather", "1", "out_norm")]),
    "lm_torchtitan": ("lm", TITAN, [("reduce_scatter", "1", "tok_embeddings")] + [
        (kind, "1", f"layers.{n}.{m}") for n in range(2) for kind, m in (
            ("all_gather", "attention"), ("reduce_scatter", "attention.wo"), ("all_gather", "feed_forward"),
            ("reduce_scatter", "feed_forward.w2"))] + [("all_gather", "1", "output"), ("all_gather", "2", "output")]),
    "lm_vocab_parallel_megatron": ("lm", '{"tok_embeddings": RowwiseParallel(input_layouts=Replicate()),'
                                         + MEGATRON_LAYERS + ' "output": ColwiseParallel(output_layouts=Replicate())}',
                                   [("all_reduce", None, "tok_embeddings")] + [
                                       ("all_reduce", None, f"layers.{n}.{m}") for n in range(2)
                                       for m in ("attention.wo", "feed_forward.w2")] + [("all_gather", "2", "output")]),
    "lm_embedding_colwise": ("lm", '{"tok_embeddings": ColwiseParallel(output_layouts=Replicate())}',
                             [("all_gather", "2", "tok_embeddings")]),
}


def folds(folder) -> list[tuple]:
    """(kind, axis, module) of each fold, in program order."""
    kinds = dict(facts(folder, "collective"))
    attrs = {(o, k): v for o, k, v in facts(folder, "attr")}
    return [(kinds.get(c, "all_reduce"), attrs.get((o, "axis")), attrs[(o, "module")]) for o, c in facts(folder, "fold")]


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    from tprules.frontends.drivers.recipe import import_torch

    done: dict = {}

    def get(case: str, tp: int):
        if (case, tp) not in done:
            kind, plan, _ = CASES[case]
            folder = tmp_path_factory.mktemp(f"{case}-tp{tp}")
            out = folder / "program"
            done[(case, tp)] = out, import_torch(write_recipe(folder, kind, plan), tp, out)
        return done[(case, tp)]

    return get


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_collectives_are_where_torch_puts_them(imported, case):
    out, report = imported(case, 2)
    assert folds(out) == CASES[case][2]
    assert sum(report.collectives.values()) == report.folds == len(CASES[case][2])


@pytest.mark.parametrize("case", ["lm_torchtitan", "normed_sequence_parallel", "mlp_colwise_rowwise",
                                  "headed_bias_reduce_scattered"])
def test_run_matches_the_module_forward_on_cpu(cli, imported, case):
    out, _ = imported(case, 2)
    status, text, err = cli("run", out)
    assert status == 0, err
    assert "matches the reference and expected/" in text.splitlines()[-1]


def test_a_rowwise_bias_is_added_to_the_partial_sums_before_the_collective(imported):
    out, _ = imported("headed_bias_reduce_scattered", 2)
    ops = dict(facts(out, "op"))
    assert [o for o, c in ops.items() if c == "scale"] == ["share_mlp.w2.bias@0", "share_mlp.w2.bias@1"]
    order = list(ops)
    adds = [o for o in order if ops[o] == "add" and any(r.startswith("mlp.w2.bias_share")
                                                         for o2, _, r in facts(out, "reads") if o2 == o)]
    assert len(adds) == 2 and all(order.index(a) < order.index(next(o for o in order if o.startswith("reducescatter")))
                                  for a in adds)


def test_tp1_is_the_plain_program(tmp_path):
    from tprules.frontends.drivers.recipe import import_torch

    report = import_torch(write_recipe(tmp_path, "lm", TITAN), 1, tmp_path / "p")
    assert report.folds == 0 and not any(facts(tmp_path / "p", "placed"))  # every tensor on the spine


def test_sequence_parallel_at_tp4_runs_on_the_simulator(cli, imported):
    out, _ = imported("lm_torchtitan", 4)
    assert folds(out) == CASES["lm_torchtitan"][2]
    status, text, err = cli("run", out, "--device", "sim")
    assert status == 0, err
    assert "matches the reference and expected/" in text.splitlines()[-1]


def test_the_norms_and_residuals_run_on_each_chips_block_of_tokens(imported):
    out, _ = imported("lm_torchtitan", 2)
    ops = dict(facts(out, "op"))
    placed = dict(facts(out, "placed"))
    shapes: dict[str, dict[int, int]] = {}
    for t, axis, size in facts(out, "shape"):
        shapes.setdefault(t, {})[int(axis)] = int(size)
    writes = dict(facts(out, "writes"))
    attrs = {(o, k): v for o, k, v in facts(out, "attr")}
    means = [o for o, c in ops.items() if c == "mean" and attrs[(o, "module")].endswith("attention_norm")]
    assert means and all(o.rsplit("@", 1)[-1] in ("0", "1") for o in means)  # one per chip, none on the spine
    for o in means:
        assert shapes[writes[o]][1] == 4 and placed[writes[o]] == o.rsplit("@", 1)[-1]  # 8 tokens over 2 chips


def test_data_holds_the_inputs_by_forward_parameter_and_expected_the_output(imported):
    out, _ = imported("lm_torchtitan", 2)
    assert (out / "data" / "tokens.npy").is_file() and (out / "expected" / "output.npy").is_file()
    assert np.load(out / "expected" / "output.npy").shape == (2, 8, 32)
    source = json.loads((out / "source.json").read_text())
    assert source["inputs"] == {"tokens": [2, 8]} and source["second_input"] == "inputs(seed=1)"
    assert all(m for o, k, m in facts(out, "attr") if k == "module")
    modules = {m for _, k, m in facts(out, "attr") if k == "module"}
    assert {"layers.0.attention.wq", "layers.1.feed_forward.w2", "tok_embeddings", "output"} <= modules


def test_the_report_line(cli, tmp_path):
    path = write_recipe(tmp_path, "mlp", '{"w1": ColwiseParallel(), "w2": RowwiseParallel()}', seed=False)
    status, out, err = cli("import", "torch", path, "--tp", "2", "--out", tmp_path / "p", "--seq", "4")
    assert status == 0, err
    lines = out.splitlines()
    assert lines[0] == f"import {path} (recipe) -> {tmp_path / 'p'}: TP 2, x [2, 4, 16]"
    assert lines[1].startswith("20 statements (1 fold: 1 all-reduce), ")
    assert "trace" in lines[2] and "verify" in lines[2] and lines[2].endswith(" s)")
    assert lines[3] == "the check's second input drawn by tprules (inputs() takes no seed)"
    status, out, _ = cli("import", "torch", path, "--tp", "2", "--out", tmp_path / "p", "--format", "json")
    assert status == 0 and json.loads(out)["collectives"] == {"all_reduce": 1}
    status, out, _ = cli("import", "torch", path, "--tp", "2", "--out", tmp_path / "p", "--no-verify")
    assert status == 0 and "verify" not in out.splitlines()[2]


def test_no_data_writes_facts_only(cli, tmp_path):
    path = write_recipe(tmp_path, "lm", TITAN)
    status, out, err = cli("import", "torch", path, "--tp", "2", "--out", tmp_path / "p", "--no-data")
    assert status == 0, err
    assert out.splitlines()[0].endswith(", facts only") and "verify" not in out.splitlines()[2]
    assert not (tmp_path / "p" / "data").exists() and not (tmp_path / "p" / "expected").exists()
    assert [k for k, _, _ in folds(tmp_path / "p")].count("reduce_scatter") == 5


def test_a_value_of_the_input_is_never_folded(imported):
    """The causal mask depends on the sequence length only (folded); the tokens on nothing else."""
    out, report = imported("lm_torchtitan", 2)
    assert "tokens" not in report.folded and all("embedding" not in f for f in report.folded)
    reads = {t for _, _, t in facts(out, "reads")}
    assert "tokens" in reads


@pytest.mark.parametrize("cls", ["rmsnorm", "layernorm", "add", "mul", "mean", "softmax"])
def test_a_sequence_shard_runs_per_chip_through_norms_and_residuals(cls):
    """Shard(1) of [batch, seq, hidden] flows through the row and elementwise classes as it is."""
    from tprules.frontends.sharding.placement import REPLICATE, Shard, plain
    from tprules.frontends.sharding.table import rule

    seq = Shard((plain(1, 2, 8),))
    x, w = (2, 8, 16), (16,)
    out = (2, 8, 1) if cls == "mean" else x
    operands = {"add": ([seq, seq], [x, x]), "mul": ([seq, REPLICATE], [x, w])}.get(cls, ([seq, REPLICATE], [x, w]))
    if cls in ("mean", "softmax"):
        operands = ([seq], [x])
    assert rule(cls)({}, *operands, out, 2) == seq
