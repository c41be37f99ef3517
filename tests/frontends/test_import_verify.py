"""An imported program is a function of its inputs (issue 39): run on ids the importer did
not choose it gives torch's logits for them, and `tprules import` checks that itself before
it writes (a second input from another seed), refusing in one line naming the first
statement that differs, its module path and ATen op."""

from __future__ import annotations

import numpy as np
import pytest

# issue 39's dory: transformers' defaults but hidden 64, 4 layers (attention and MLP blocks
# as DoryConfig lists them), 4 heads of 16, 2 key/value heads, vocabulary 128 (a narrow MLP
# keeps it fast)
DORY = dict(hidden_size=64, num_hidden_layers=4, layer_types=["sliding_attention", "mlp", "sliding_attention", "mlp"],
            num_attention_heads=4, num_key_value_heads=2, head_dim=16, vocab_size=128, intermediate_size=128)


def _dory(folder):
    import torch
    import transformers
    from transformers import CONFIG_MAPPING, AutoModelForCausalLM

    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(CONFIG_MAPPING["dory"](**DORY)).save_pretrained(folder)
    return folder


def _logits_on(folder, ids):
    from tprules.program.model import Program
    from tprules.runtime.values.inputs import program_inputs
    from tprules.runtime.values.reference import reference
    from tprules.workspace import Workspace

    prog = Program.from_workspace(Workspace(folder))
    inputs = program_inputs(prog)
    inputs["input_ids"] = ids
    return reference(prog, inputs).get("logits")


def _torch_logits(source, ids):
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(source, attn_implementation="eager").eval()
    with torch.no_grad():
        return model(input_ids=torch.from_numpy(ids), use_cache=False).logits.float().numpy()


def test_dory_at_tp2_gives_torch_logits_for_ids_it_was_not_traced_with(tmp_path):
    from tprules.frontends.drivers.hf import import_hf
    from tprules.runtime.values.compare import errors

    source = _dory(tmp_path / "dory")
    out = tmp_path / "program"
    import_hf(source, 2, out)
    own = np.load(out / "data" / "input_ids.npy")
    for seed in (11, 12):
        ids = np.random.default_rng(seed).integers(0, 128, size=own.shape).astype(np.int64)
        assert not np.array_equal(ids, own)
        _, rel = errors(_logits_on(out, ids), _torch_logits(source, ids))
        assert rel < 1e-4, (seed, rel)


def test_afmoe_with_its_zero_router_is_refused_naming_the_tied_top_k(tmp_path):
    """Issue 39's afmoe: its init leaves the router's gate zero, every expert ties for every
    input, and torch's top-k picks among ties in its own order: the import says so from the
    graph (issue 51: ties.py), not from a sampled input, instead of writing a program whose
    logits are off torch's."""
    import torch
    from transformers import CONFIG_MAPPING, AutoModelForCausalLM

    from tprules.frontends.drivers.hf import import_hf
    from tprules.frontends.errors import ImportFailed

    from .tiny import MOE, TINY

    config = CONFIG_MAPPING["afmoe"](**{**TINY, **MOE, "initializer_range": 0.02})
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config).save_pretrained(tmp_path / "afmoe")
    with pytest.raises(ImportFailed, match=r"statement \S+ \(topk_indices\) of model\.layers\.\d\.mlp\.router: "
                                           r"aten\.topk\.default item 1: its operand ties at the top-2's boundary among "
                                           r"elements that are the same for every input .* reaches \S+ \(take_along\)"):
        import_hf(tmp_path / "afmoe", 1, tmp_path / "p")
    assert not (tmp_path / "p").exists()


def test_issue_51s_sparse_attention_indexer_is_refused_naming_its_relu(tmp_path):
    """Issue 51's HY-V4: its indexer's top-4 of 8 keys ties among masked keys in the first
    queries (harmless: the causal mask is applied again after the scatter) and among keys its
    relu scores 0 (not harmless: which one torch attends is its tie-break, which is why the
    program differed from torch on some inputs). Refused in one line naming the top-k and
    the relu, at TP 1 and 2, before any data is computed."""
    import sys
    from pathlib import Path

    from tprules.frontends.drivers.hf import import_hf
    from tprules.frontends.errors import ImportFailed

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from tiny_models import issue51_model

    issue51_model(tmp_path / "hy")
    for tp in (1, 2):
        with pytest.raises(ImportFailed, match=r"statement getitem_18 \(topk_indices\) of model\.layers\.0\.self_attn\."
                                               r"indexer: aten\.topk\.default item 1: its operand can tie at the top-4's "
                                               r"boundary among elements that relu \(relu\) of model\.layers\.0\.self_attn"
                                               r"\.indexer makes equal"):
            import_hf(tmp_path / "hy", tp, tmp_path / f"p{tp}", verify=False)
        assert not (tmp_path / f"p{tp}").exists()


def test_where_the_program_chooses_by_value_the_check_also_tries_a_padded_short_prompt():
    from tprules.frontends.drivers.verify import padded_ids, selects
    from tprules.frontends.graph import Graph, Statement

    ids = np.array([[5, 9, 3, 7, 1, 4]])
    what, padded = padded_ids(ids, 0)
    assert what == "a short prompt then token 0 repeated"
    assert np.array_equal(padded, [[5, 9, 0, 0, 0, 0]]) and np.array_equal(ids, [[5, 9, 3, 7, 1, 4]])
    assert np.array_equal(padded_ids(ids, None)[1], [[5, 9, 9, 9, 9, 9]])  # no padding token: the prompt's last
    graph = Graph(stmts=[Statement("a", "add", ("x", "y"), "a")])
    assert not selects(graph)
    graph.stmts.append(Statement("t", "topk_indices", ("a",), "t", (("k", "2"),)))
    assert selects(graph)


def _with_lowering(monkeypatch, op, fn) -> None:
    """Every import of the test lowers `op` with `fn` (a copy of the op table, the lowerer's)."""
    from tprules.frontends.lowering import walk as lower
    from tprules.frontends.lowering.aten import build_table

    table = build_table()
    table.ops[op] = fn
    monkeypatch.setattr(lower, "op_table", lambda: table)


@pytest.fixture
def rsqrt_as_sigmoid(monkeypatch):
    """A deliberately wrong lowering: rsqrt (the RMS norm's) written as the class sigmoid."""
    import torch

    _with_lowering(monkeypatch, torch.ops.aten.rsqrt.default, lambda ctx, n: ctx.emit(n, "sigmoid", [n.args[0]]))


def test_a_wrong_lowering_is_refused_naming_its_statement_and_nothing_is_written(cli, hf_model, tmp_path,
                                                                                rsqrt_as_sigmoid):
    status, out, err = cli("import", "hf", hf_model("llama"), "--tp", "2", "--out", tmp_path / "p")
    assert status == 2 and out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert "LlamaForCausalLM: the imported program differs from torch on a second input" in err
    assert "first at statement rsqrt (sigmoid) of model.layers.0.input_layernorm: aten.rsqrt.default" in err
    assert not (tmp_path / "p").exists() and [p.name for p in tmp_path.iterdir()] == []


def test_a_value_of_the_input_no_statement_computes_is_refused_not_folded(cli, hf_model, tmp_path, monkeypatch):
    """A lowering that writes nothing for a node reading input_ids (injected): the reader of
    that node is refused in one line naming the node's module and op, never folded."""
    import torch

    _with_lowering(monkeypatch, torch.ops.aten.rsqrt.default, lambda ctx, n: None)
    status, out, err = cli("import", "hf", hf_model("llama"), "--tp", "2", "--out", tmp_path / "p")
    assert status == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert "LlamaForCausalLM: aten.rsqrt.default at model.layers.0.input_layernorm: its value depends on input_ids" \
        in err
    assert not (tmp_path / "p").exists()


def test_no_verify_writes_the_program_unchecked(cli, hf_model, tmp_path, rsqrt_as_sigmoid):
    status, out, err = cli("import", "hf", hf_model("llama"), "--tp", "2", "--out", tmp_path / "p", "--no-verify")
    assert status == 0 and err == ""
    assert (tmp_path / "p" / "source.json").is_file()
    assert "verify" not in out.splitlines()[2]


def test_the_check_is_timed_and_nothing_runs_under_no_data(cli, hf_model, tmp_path):
    status, out, _ = cli("import", "hf", hf_model("llama"), "--tp", "2", "--out", tmp_path / "p")
    assert status == 0 and ", verify " in out.splitlines()[2]
    status, out, _ = cli("import", "hf", hf_model("llama"), "--tp", "2", "--out", tmp_path / "q", "--no-data")
    assert status == 0 and "verify" not in out.splitlines()[2]


def test_the_second_input_is_not_the_written_one(tmp_path):
    from tprules.frontends.drivers.verify import second_ids

    written = np.random.default_rng(0).integers(0, 128, size=(1, 8))
    assert not np.array_equal(second_ids(0, 128, 1, 8), written)
    assert np.array_equal(second_ids(0, 128, 1, 8), second_ids(0, 128, 1, 8))


def test_a_sharding_that_differs_from_the_graph_is_named(tmp_path, hf_model, monkeypatch):
    """The graph agrees with torch while the program does not: the first program statement
    whose whole value differs is named (a weight in data/ doubled, injected)."""
    from tprules.frontends.drivers import hf as importer
    from tprules.frontends.errors import ImportFailed

    real = importer._data

    def doubled_weight(job, built):
        data, expected = real(job, built)
        name = "model.layers.1.post_attention_layernorm.weight"
        data[name] = data[name] * 2
        return data, expected

    monkeypatch.setattr(importer, "_data", doubled_weight)
    with pytest.raises(ImportFailed, match="first at statement .* of model.layers.1.post_attention_layernorm"):
        importer.import_hf(hf_model("llama"), 2, tmp_path / "p")
    assert not (tmp_path / "p").exists()



def test_the_check_takes_the_weights_from_memory_not_read_back(hf_model, tmp_path, monkeypatch):
    """The arrays written to data/ are the check's inputs as they are (a large weight, such
    as Gemma 3n's per-layer embedding, took seconds to read back: most of the check)."""
    import tprules.runtime.values.inputs as inputs
    from tprules.frontends.drivers.hf import import_hf

    read, real = [], inputs._read
    monkeypatch.setattr(inputs, "_read", lambda path, *a, **k: (read.append(path), real(path, *a, **k))[1])
    report = import_hf(hf_model("llama"), 2, tmp_path / "p", seq=4)
    assert report.seconds["verify"] > 0 and read == []
    assert len(list((tmp_path / "p" / "data").iterdir())) > 10  # the folder still holds every input
