"""`tprules generate`: the prefill program and decode steps, the caches fed back, give
transformers' greedy tokens; a bad prompt file is one line and exit 2."""

from __future__ import annotations

import json

import numpy as np
import pytest


def test_the_programs_greedy_tokens_are_transformers(cli, hf_model, tmp_path):
    np.save(tmp_path / "prompt.npy", np.array([[5, 17, 99], [3, 42, 7]]))  # a batch of two prompts
    status, out, err = cli("generate", hf_model("llama"), "--tp", "2", "--prompt-ids", tmp_path / "prompt.npy",
                           "--tokens", "3", "--layers", "1", "--out", tmp_path / "programs", "--format", "json")
    assert status == 0, err
    done = json.loads(out)
    assert done["ok"] and done["steps"] == 3
    assert np.array(done["tokens"]).shape == (2, 3) and done["tokens"] == done["transformers"]
    assert len({tuple(row) for row in done["tokens"]}) == 2  # the two prompts go their own ways
    # the decode step's caches are each chip's own, fed back from the step before as they are
    prefill = json.loads((tmp_path / "programs" / "prefill" / "source.json").read_text())
    assert (prefill["past"], prefill["step"], prefill["cache_len"]) == (0, 3, 6)
    assert (tmp_path / "programs" / "decode" / "data" / "model.layers.0.key_cache@1.npy").exists()


def test_a_mismatch_exits_1_and_shows_both(cli, hf_model, tmp_path, monkeypatch):
    """From a program folder (the model folder its source.json names), transformers' tokens
    made to differ: exit 1, both shown."""
    from tprules.frontends import generate
    from tprules.frontends.decode import import_decode

    import_decode(hf_model("llama"), 1, tmp_path / "step", past=3, layers=1, no_data=True)
    (tmp_path / "prompt.txt").write_text("5 17 99\n")
    real = generate._transformers
    monkeypatch.setattr(generate, "_transformers", lambda *a: real(*a) + 1)  # transformers' tokens, each off by one
    status, out, _ = cli("generate", tmp_path / "step", "--tp", "1", "--prompt-ids", tmp_path / "prompt.txt",
                         "--tokens", "1", "--layers", "1")
    assert status == 1 and "MISMATCH" in out and "transformers: " in out
    got, want = [line.split(": ")[1].split() for line in out.splitlines()[:2]]
    assert [int(w) - 1 for w in want] == [int(g) for g in got]


BAD = {
    "not_an_integer": ("prompt.txt", "5 x 9", "--prompt-ids: 'x' is not an integer token id"),
    "outside_the_vocabulary": ("prompt.txt", "5 128", "--prompt-ids: token id 128 is outside the vocabulary (0 to 127)"),
    "floats": ("prompt.npy", np.array([1.5, 2.0]), "--prompt-ids: token ids of dtype float64; expected integers"),
    "empty": ("prompt.txt", "\n", "--prompt-ids: a prompt of shape [1, 0]; expected [P] or [batch, P] ids"),
    "unreadable": ("prompt.npy", "not numpy", "--prompt-ids: cannot read it"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_prompt_file_is_one_line_and_exit_2(cli, hf_model, tmp_path, case):
    name, content, message = BAD[case]
    path = tmp_path / name
    if isinstance(content, np.ndarray):
        np.save(path, content)
    else:
        path.write_text(content)
    status, out, err = cli("generate", hf_model("llama"), "--tp", "2", "--prompt-ids", path, "--tokens", "2")
    assert (status, out) == (2, "")
    assert len(err.splitlines()) == 1 and message in err and err.startswith(str(path)), err
