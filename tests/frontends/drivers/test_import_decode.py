"""`tprules import hf --decode`: one decode step after a prompt, its static KV cache in and
out, against torch's own prefill and step (transformers' StaticCache)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tprules.ops import Ops
from tprules.program.model import Program
from tprules.runtime.values.compare import errors
from tprules.runtime.values.inputs import program_inputs
from tprules.runtime.values.reference import reference
from tprules.workspace import Workspace

from ..cli import assert_refused, leftovers
from ..tiny import LATENT_MOE, TINY, make_model

FAMILY = ("llama", "qwen3", "mistral")


def _outputs(folder):
    """The reference's value of every program output, and the program."""
    prog = Program.from_workspace(Workspace(folder))
    return prog, reference(prog, program_inputs(prog))


@pytest.mark.parametrize("tp", [1, 2])
@pytest.mark.parametrize("model_type", FAMILY)
def test_the_step_gives_torchs_logits_and_updated_cache(imported, model_type, tp):
    folder = imported(model_type, tp, decode=True, past=5, cache_len=10)
    prog, values = _outputs(folder)
    layers = TINY["num_hidden_layers"]
    caches = [f"model.layers.{i}.{k}_cache_new" for i in range(layers) for k in ("key", "value")]
    assert sorted(prog.outputs) == sorted(["logits"] + [c if tp == 1 else f"{c}@{k}" for c in caches
                                                        for k in range(tp)])
    assert prog.tensors["input_ids"].shape == (1, 1) and prog.tensors["cache_position"].shape == (1,)
    for out in prog.outputs:
        _, rel = errors(values.get(out), np.load(folder / "expected" / f"{out}.npy"))
        assert rel <= 1e-4, out
    assert np.load(folder / "data" / "cache_position.npy").tolist() == [5]
    assert np.load(folder / "expected" / "prompt_ids.npy").shape == (1, 5)


def test_each_chip_holds_its_own_heads_cache(imported):
    folder = imported("llama", 2, decode=True, past=5, cache_len=10)
    prog = Program.from_workspace(Workspace(folder))
    kv, head = TINY["num_key_value_heads"], TINY["head_dim"]
    for k in range(2):
        t = prog.tensors[f"model.layers.0.key_cache@{k}"]
        assert t.shape == (1, kv // 2, 10, head) and t.home == k
    whole = np.concatenate([np.load(folder / "data" / f"model.layers.1.value_cache@{k}.npy") for k in range(2)], axis=1)
    filled = np.abs(whole).sum(axis=(0, 1, 3))
    assert filled[:5].all() and not filled[5:].any()  # torch's prefill wrote the prompt's 5 positions


def test_a_batch_of_two_writes_each_row_at_the_position(imported):
    folder = imported("llama", 2, decode=True, past=3, cache_len=6, batch=2)
    prog, values = _outputs(folder)
    assert prog.tensors["input_ids"].shape == (2, 1) and prog.tensors["logits"].shape == (2, 1, TINY["vocab_size"])
    for out in ("logits", "model.layers.1.key_cache_new@1"):
        _, rel = errors(values.get(out), np.load(folder / "expected" / f"{out}.npy"))
        assert rel <= 1e-4


def test_the_next_token_is_torchs_from_a_prompt_of_its_own(hf_model, tmp_path):
    """Another architecture (Gemma 2: a sliding window and soft-capped logits), at another
    position, its next token the argmax of torch's logits."""
    from tprules.frontends.drivers.decode import import_decode

    folder = tmp_path / "gemma2"
    import_decode(make_model(tmp_path / "src", "gemma2"), 2, folder, past=7, cache_len=9, seed=3)
    _, values = _outputs(folder)
    want = np.load(folder / "expected" / "logits.npy")
    assert np.argmax(values.get("logits"), axis=-1).tolist() == np.argmax(want, axis=-1).tolist()
    assert errors(values.get("logits"), want)[1] <= 1e-4


BAD = {
    "past_fills_the_cache": (lambda tmp, m: m("llama"), ["--past", "8", "--cache-len", "8"],
                             "--past 8 leaves no room in --cache-len 8"),
    "cache_beyond_positions": (lambda tmp, m: m("llama"), ["--past", "4", "--cache-len", "65"],
                               "LlamaForCausalLM: --cache-len 65 is beyond the model's max_position_embeddings 64"),
    "window_shorter_than_cache": (lambda tmp, m: make_model(tmp / "mistral", "mistral", weights=False,
                                                            sliding_window=4), ["--past", "5", "--cache-len", "8"],
                                  "layer 0 attends over a sliding window of 4 tokens, shorter than --cache-len 8"),
    "seq_with_decode": (lambda tmp, m: m("llama"), ["--seq", "4"], "usage: --seq is the prefill's"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_line_and_leaves_no_dir(cli, hf_model, tmp_path, case):
    setup, extra, message = BAD[case]
    assert_refused(cli, tmp_path, ["import", "hf", setup(tmp_path, hf_model), "--tp", "2", "--decode", "--out",
                                   tmp_path / "out", *extra], message)


@pytest.mark.parametrize("flag", ["--batch", "--tp"])
def test_a_count_of_zero_is_refused_alike_with_and_without_decode(cli, tmp_path, flag):
    """A usage error before the model is read (SOURCE does not exist), the same line with
    --decode as without: exit 2, nothing written."""
    counts = {"--tp": "2", "--batch": "1", flag: "0"}
    lines = []
    for decode in ([], ["--decode"]):
        args = ["import", "hf", tmp_path / "no-model", *decode, "--out", tmp_path / "out"]
        args += [x for pair in counts.items() for x in pair]
        assert_refused(cli, tmp_path, args, f"usage: {flag} takes a count of at least 1; got 0")
        lines.append(cli(*args)[2])
    assert lines[0] == lines[1]


def test_past_without_decode_is_refused(cli, hf_model, tmp_path):
    status, _, err = cli("import", "hf", hf_model("llama"), "--tp", "2", "--past", "4", "--out", tmp_path / "out")
    assert status == 2 and "--past is a decode step's; add --decode" in err
    assert leftovers(tmp_path, "out") == []


def test_the_report_and_source_json_name_the_step(cli, hf_model, tmp_path):
    status, out, err = cli("import", "hf", hf_model("llama"), "--tp", "2", "--decode", "--past", "3", "--out",
                           tmp_path / "p")
    assert status == 0 and err == ""
    assert out.splitlines()[0].endswith(": TP 2, decode step after 3 tokens, cache 4, batch 1")
    source = json.loads((tmp_path / "p" / "source.json").read_text())
    assert (source["decode"], source["past"], source["cache_len"]) == (True, 3, 4)


def _classes(folder) -> list[str]:
    return sorted(line.split("\t")[1] for line in (folder / "op.facts").read_text().splitlines())


@pytest.mark.parametrize("model_type, overrides, kinds, traced", [
    ("llama", {}, 1, 2),
    # three dense layers, then three of experts: layers 0, 1, 3, 4 traced, which the traced
    # step's cache indexes 0 to 3 (frontends/layers/kinds.py `reduced(renumber=True)`)
    ("deepseek_v3", dict(LATENT_MOE, first_k_dense_replace=3), 2, 4),
])
def test_a_stamped_step_computes_what_the_step_traced_whole_does(tmp_path, model_type, overrides, kinds, traced):
    """Six layers: one kind (two traced, four stamped) or two; the same statements of the
    same classes, shapes and placements as the whole trace (fx numbers some nodes of the two
    traces differently), and the step still torch's."""
    from tprules.frontends.drivers.decode import import_decode

    source = make_model(tmp_path / "src", model_type, num_hidden_layers=6, **overrides)
    stamped = import_decode(source, 2, tmp_path / "stamped", past=3, cache_len=5)
    whole = import_decode(source, 2, tmp_path / "whole", past=3, cache_len=5, every_layer=True, verify=False)
    assert (stamped.kinds, stamped.traced, whole.traced) == (kinds, traced, None)
    assert (stamped.statements, stamped.folds, stamped.tensors, stamped.candidates) == \
        (whole.statements, whole.folds, whole.tensors, whole.candidates)
    assert _classes(tmp_path / "stamped") == _classes(tmp_path / "whole")
    for rel in ("placed", "spine"):
        assert len((tmp_path / "stamped" / f"{rel}.facts").read_text().splitlines()) == \
            len((tmp_path / "whole" / f"{rel}.facts").read_text().splitlines())
    prog, values = _outputs(tmp_path / "stamped")
    assert any(out.startswith("model.layers.5.value_cache_new") for out in prog.outputs)
    for out in prog.outputs:
        _, rel = errors(values.get(out), np.load(tmp_path / "stamped" / "expected" / f"{out}.npy"))
        assert rel <= 1e-4, out


def test_candidates_pair_two_layers_only_where_one_feeds_the_other(imported):
    """The mask and the rotary rows, computed once from the position, are read in every layer:
    their readers are not paired across layers (always a `cycle`); the residual that one
    layer passes to the next norm still is."""
    import re

    folder = imported("llama", 2, decode=True, past=5, cache_len=10)
    rows = {rel: [line.split("\t") for line in (folder / f"{rel}.facts").read_text().splitlines()]
            for rel in ("member", "attr", "reads", "writes")}
    layer = {o: m.group(1) for o, k, v in rows["attr"] if k == "module" and (m := re.search(r"layers\.(\d+)", v))}
    writer = {t: o for o, t in rows["writes"]}
    fed = {(writer[t], o) for o, _, t in rows["reads"] if t in writer}
    pairs: dict[str, list[str]] = {}
    for f, o in rows["member"]:
        pairs.setdefault(f, []).append(o)
    across = [(a, c) for a, c in pairs.values() if a in layer and c in layer and layer[a] != layer[c]]
    assert across and all((a, c) in fed or (c, a) in fed for a, c in across)
    assert not [o for o, _, t in rows["reads"] if t == "where"]  # the mask is computed in each layer
    for i in ("0", "1"):  # (frontends/layers/per_layer.py): each layer reads its own copy, named under it
        readers = [o for o, _, t in rows["reads"] if t == f"model.layers.{i}.where"]
        assert readers and {layer[o] for o in readers} == {i}
        assert layer[f"model.layers.{i}.where"] == i


def test_the_position_values_are_computed_in_each_layer(imported):
    """No statement outside the layers is read by two layers: the mask and rotary rows
    computed from the position are copied into each layer that reads them."""
    import re

    folder = imported("llama", 2, decode=True, past=5, cache_len=10)
    rows = {rel: [line.split("\t") for line in (folder / f"{rel}.facts").read_text().splitlines()]
            for rel in ("attr", "reads", "writes")}
    layer = {o: m.group(1) for o, k, v in rows["attr"] if k == "module" and (m := re.search(r"layers\.(\d+)", v))}
    writer = {t: o for o, t in rows["writes"]}
    layers_reading: dict[str, set[str]] = {}
    for o, _, t in rows["reads"]:
        if t in writer and writer[t] not in layer and o in layer:
            layers_reading.setdefault(writer[t], set()).add(layer[o])
    assert layers_reading and all(len(ls) == 1 for ls in layers_reading.values())


def test_two_stacks_of_layers_each_get_their_own_position_values(imported):
    """HRM's two stacks (`model.L_module.layers.0`, `model.H_module.layers.0`) share layer
    numbers: each layer path is a layer of its own, its copies of the position values named
    under it and read only by its own statements (frontends/layers/per_layer.py), and the step
    gives torch's logits and caches."""
    folder = imported("hrm_text", 2, decode=True, past=5, cache_len=8)
    rows = {rel: [line.split("\t") for line in (folder / f"{rel}.facts").read_text().splitlines()]
            for rel in ("attr", "reads")}
    module = {o: v for o, k, v in rows["attr"] if k == "module"}
    for stack in ("L_module", "H_module"):
        path = f"model.{stack}.layers.0"
        copies = {o for o in module if o.startswith(path + ".") and module[o] == path}  # the copied statements
        assert copies, stack
        readers = [o for o, _, t in rows["reads"] if t.startswith(path + ".where")]
        assert readers and all(module[o].startswith(path) for o in readers), stack
    prog, values = _outputs(folder)
    for out in prog.outputs:
        _, rel = errors(values.get(out), np.load(folder / "expected" / f"{out}.npy"))
        assert rel <= 1e-4, out


def test_a_mixture_of_experts_decode_step_imports_without_data(hf_model, imported, tmp_path):
    """`--decode --no-data` on a mixture of experts (the grouped_mm form): the cache is
    allocated by a forward on the meta device, where torch's grouped matmul wants bfloat16;
    its statements' classes those of the import with data."""
    from tprules.frontends.drivers.decode import import_decode

    with_data = imported("mixtral", 2, decode=True, past=5, cache_len=8)
    out = tmp_path / "no-data"
    import_decode(hf_model("mixtral"), 2, out, past=5, cache_len=8, no_data=True)
    def classes(folder):  # but casts: transformers' experts on the CPU cast where on meta they do not
        return sorted(c for line in (folder / "op.facts").read_text().splitlines()
                      if (c := line.split("\t")[1]) != Ops.CAST)

    assert Ops.GROUPED_MATMUL in classes(out) and classes(out) == classes(with_data)
    assert not (out / "data").exists()


@pytest.mark.parametrize("stamps", [True, False])
def test_a_decode_step_is_sharded_once(hf_model, tmp_path, monkeypatch, stamps):
    # each cache is placed at its put_along in the one sharding (Sharder.run's caches), stamped
    # or traced whole; no first sharding with the caches replicated
    from tprules.frontends.drivers import job as job_module
    from tprules.frontends.drivers.decode import import_decode
    from tprules.frontends.sharding.sharder import Sharder

    runs = []
    real = Sharder.run

    def counted(self, *args, **kwargs):
        runs.append(kwargs.get("caches", args[2] if len(args) > 2 else frozenset()))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Sharder, "run", counted)
    if not stamps:
        monkeypatch.setattr(job_module.ImportJob, "stamps", property(lambda self: False))
    import_decode(hf_model("llama"), 2, tmp_path / "program", past=3, cache_len=6)
    assert len(runs) == 1 and len(runs[0]) == 2 * 2  # a key and a value cache per layer (2 layers)
