"""`tprules generate`: the prefill program and decode steps, the caches fed back, give
transformers' greedy tokens; a bad prompt file is one line and exit 2."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

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
    from tprules.frontends.drivers.decode import import_decode
    from tprules.serving import generate

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


def _prepared_on(world, folder):
    from tprules.planner import plan as make_plan
    from tprules.runtime import Prepared, Program
    from tprules.workspace import Workspace

    ws = Workspace(folder)
    prog = Program.from_workspace(ws)
    return Prepared(prog, make_plan(ws), "cpu", share=False, world=world)


def on_thread_ranks(folders, prompt, tokens: int):
    """generate's loop on two thread ranks (tests/runtime/ranks.py) over the prefill and
    decode folders: each rank's tokens, the cache inputs its decode step holds, and the bytes
    it sent beyond the reference's exchanges; and the tokens of one process."""
    import threading

    spec = importlib.util.spec_from_file_location("thread_ranks", Path(__file__).parent.parent / "runtime" / "ranks.py")
    ranks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ranks)
    from tprules.runtime.execution.world import World
    from tprules.serving.generate import greedy

    one = greedy(*[_prepared_on(World(2), f) for f in folders], prompt, tokens)
    hub, got, fed, failures = ranks._Hub(2), {}, {}, []

    def rank(r):
        try:
            world = ranks.ThreadWorld(hub, r)
            world.assign(2)
            prefill, step = (_prepared_on(world, f) for f in folders)
            before = world.traffic.message_bytes  # (the reference's exchanges are behind)
            got[r] = greedy(prefill, step, prompt, tokens, world)
            fed[r] = {t for t in step.executor.inputs if "_cache" in t}
            fed[r, "sent"] = world.traffic.message_bytes - before
        except BaseException as err:  # noqa: BLE001 - raised again below
            failures.append(err)
            hub.barrier.abort()

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[0]
    return one, got, fed


def test_on_two_ranks_each_rank_feeds_back_its_own_chips_caches(imported):
    """generate's loop on two thread ranks (tests/runtime/ranks.py): the one-process tokens,
    each rank's decode step fed only its own chip's caches, and no cache sent between ranks."""
    common = dict(decode=True, cache_len=6, batch=2, layers=1, verify=False)
    folders = [imported("llama", 2, past=0, step=3, **common), imported("llama", 2, past=3, **common)]
    prompt = np.array([[5, 17, 99], [3, 42, 7]])
    one, got, fed = on_thread_ranks(folders, prompt, 3)
    assert np.array_equal(got[0], one) and np.array_equal(got[1], one) and len({tuple(r) for r in one}) == 2
    for r in range(2):
        assert fed[r] == {f"model.layers.0.{kind}_cache@{r}" for kind in ("key", "value")}
    assert fed[0, "sent"] == fed[1, "sent"] == 0  # the runs' exchanges are the plan's collectives and the tokens


@pytest.mark.skipif(not (Path(sys.executable).parent / "mpiexec").exists() and shutil.which("mpiexec") is None,
                    reason="needs MPI: pip install -e '.[mpi]'")
def test_generate_on_two_mpi_ranks_gives_transformers_tokens(hf_model, tmp_path):
    (tmp_path / "prompt.txt").write_text("5 17 99\n")
    args = ["generate", hf_model("llama"), "--tp", "2", "--prompt-ids", tmp_path / "prompt.txt", "--layers", "1"]
    done = subprocess.run([sys.executable, "-m", "tprules", *map(str, args), "--tokens", "3", "--ranks", "2",
                           "--format", "json"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] and report["steps"] == 3 and report["tokens"] == report["transformers"]
    refused = subprocess.run([sys.executable, "-m", "tprules", *map(str, args), "--tokens", "2", "--ranks", "3"],
                             capture_output=True, text=True, timeout=600)
    assert (refused.returncode, refused.stdout) == (2, "")
    line = refused.stderr.strip().splitlines()[-1]
    assert "refused: 3 ranks for the 2 chips" in line and "at most one rank per chip" in line
