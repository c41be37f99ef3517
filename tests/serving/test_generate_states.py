"""`tprules generate` on hybrid models: every cache state the decode step reads (a Mamba or
gated-delta layer's conv and recurrent states, MiniMax's lightning-attention state, an
indexer's keys), not only keys and values, is the update the step before wrote, fed back,
each chip's its own; the prefill starts them at zero as transformers' generate does. A
state the prefill does not write is refused in one line."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from tests.frontends.test_decode_states import HYBRID
from tests.frontends.test_import_plan import _coverage
from tests.frontends.tiny import make_model
from tprules.program.model import Program
from tprules.runtime.values.inputs import program_inputs
from tprules.runtime.values.reference import reference
from tprules.serving import generate as gen
from tprules.workspace import Workspace

PROMPT = "5 17 99 4"


@pytest.fixture(scope="module")
def hybrid(tmp_path_factory):
    """`hybrid("bamba")`: the folder of test_decode_states' tiny hybrid of that type (a
    recurrent layer and an attention layer); `hybrid("deepseek_v32")`: import_coverage's tiny
    DeepSeek-V3.2 (its indexer's keys a cache state), as `import_coverage.py --decode` makes it."""
    made: dict = {}

    def get(model_type: str):
        if model_type not in made:
            folder = tmp_path_factory.mktemp(model_type) / "model"
            if model_type in HYBRID:
                make_model(folder, model_type, **HYBRID[model_type][0])
            else:
                coverage = _coverage()
                coverage.DECODE.update(past=5)
                try:
                    coverage.tiny_model(model_type, folder)
                finally:  # DECODE is benchmarks/tiny_models.py's, shared by every load of the script
                    coverage.DECODE.clear()
            made[model_type] = folder
        return made[model_type]

    return get


@pytest.fixture
def prompt(tmp_path):
    path = tmp_path / "prompt.txt"
    path.write_text(PROMPT + "\n")
    return path


class _Fed(dict):
    """A program's inputs, naming those a run was given (greedy's feed)."""

    def __init__(self, values):
        super().__init__(values)
        self.given: set[str] = set()

    def update(self, other):  # type: ignore[override]
        self.given |= set(other)
        super().update(other)


class _Reference:
    """A program folder run statement by statement by the reference (runtime/values/reference.py)
    in place of its compiled kernels: the runner of generate's loop without a compile."""

    def __init__(self, folder):
        self.prog = Program.from_workspace(Workspace(folder))
        self.executor = SimpleNamespace(inputs=_Fed(program_inputs(self.prog)))

    def run(self):
        values, tensors = reference(self.prog, self.executor.inputs), self.prog.tensors
        return SimpleNamespace(outputs={t: {tensors[t].home or 0: values.get(t, tensors[t].home)}
                                        for t in self.prog.outputs})


def _on_reference(ran: dict):
    def runner(work, prompt, tokens, device, seconds):
        ran["prefill"], ran["decode"] = _Reference(work / "prefill"), _Reference(work / "decode")
        return gen.greedy(ran["prefill"], ran["decode"], prompt, tokens)

    return runner


@pytest.mark.parametrize(("model_type", "tp", "kinds"), [
    ("bamba", 1, {"conv", "recurrent"}),  # a Mamba-2 mixer, then attention
    ("qwen3_next", 1, {"conv", "recurrent"}),  # a gated-delta layer, then attention
    ("qwen3_next", 2, {"conv", "recurrent"}),
    ("minimax", 1, {"linear"}),  # attention, then lightning attention (its own cache class)
    ("minimax", 2, {"linear"}),
    ("deepseek_v32", 2, {"indexer_key"}),  # latent attention with an indexer
])
def test_every_state_is_fed_back_and_the_tokens_are_transformers(hybrid, prompt, model_type, tp, kinds):
    """The programs run by the reference (the compiled kernels: the test below): each step
    fed every state the step before wrote, none left at its data/ value."""
    ran: dict = {}
    done = gen.generate(hybrid(model_type), tp, prompt, 4, runner=_on_reference(ran))
    assert done.ok, (done.tokens, done.expected)
    step = ran["decode"]
    states = {t for t in step.prog.inputs if gen._fed(t) == t}
    assert step.executor.inputs.given >= states  # every state the step reads was fed, each chip's own
    assert kinds | {"key", "value"} <= {t.split(".")[-1].split("@")[0].removesuffix("_cache") for t in states}


@pytest.mark.parametrize("tp", [1, 2])
def test_a_mamba_hybrid_generates_transformers_tokens_on_cpu(cli, hybrid, prompt, tmp_path, tp):
    status, out, err = cli("generate", hybrid("bamba"), "--tp", tp, "--prompt-ids", prompt, "--tokens", "4",
                           "--out", tmp_path / "programs", "--format", "json")
    assert status == 0, err
    done = json.loads(out)
    assert done["ok"] and done["tokens"] == done["transformers"] and len(set(done["tokens"][0])) > 1
    fed = {p.stem for p in (tmp_path / "programs" / "decode" / "data").glob("model.layers.0.*_cache*.npy")}
    assert fed == {"model.layers.0.conv_cache", "model.layers.0.recurrent_cache"}


def test_a_state_the_prefill_does_not_write_is_refused(cli, hybrid, prompt, tmp_path, monkeypatch):
    """A prefill whose conv state is not an output named as a state (as if it kept it): the
    step's would be fed nothing, so generate refuses before running anything."""
    from tprules.frontends.drivers import decode
    from tprules.frontends.source import decode_step

    real_import, real_names = decode.import_decode, decode_step.output_names

    def kept(path, kinds):
        return tuple(n.replace("conv_cache_new", "conv_kept") for n in real_names(path, kinds))

    def import_decode(source, tp, out, past=8, **options):
        monkeypatch.setattr(decode_step, "output_names", kept if past == 0 else real_names)
        return real_import(source, tp, out, past=past, **options)

    monkeypatch.setattr(decode, "import_decode", import_decode)
    status, out, err = cli("generate", hybrid("bamba"), "--tp", "1", "--prompt-ids", prompt, "--tokens", "2",
                           "--out", tmp_path / "programs")
    assert (status, out) == (2, "")
    assert len(err.splitlines()) == 1 and "BambaForCausalLM" in err, err
    assert "the decode step reads the cache state model.layers.0.conv_cache, which the prefill does not write" in err


def test_a_one_token_prompt_starts_the_states_as_transformers_does(hybrid, tmp_path):
    """A prefill of one token reads its states as a new cache's (the chunked scan, not the
    single-step update transformers' decode takes)."""
    (tmp_path / "one.txt").write_text("7\n")
    ran: dict = {}
    done = gen.generate(hybrid("bamba"), 1, tmp_path / "one.txt", 3, runner=_on_reference(ran))
    assert done.ok, (done.tokens, done.expected)
    assert not {t for t in ran["prefill"].prog.inputs if "layers.0" in t and gen._fed(t) == t}  # none read
    assert {"model.layers.0.conv_cache_new", "model.layers.0.recurrent_cache_new"} <= set(ran["prefill"].prog.outputs)


def test_on_two_ranks_each_rank_keeps_its_own_states(hybrid, prompt):
    """A Mamba hybrid's loop on two thread ranks (test_generate.on_thread_ranks): transformers'
    tokens on both; each rank holds every state of the step but the other chip's (Bamba's plan
    keeps them whole, on the spine: every rank its own copy), and no cache travels between them."""
    from .test_generate import on_thread_ranks

    seen: dict = {}

    def runner(work, ids, tokens, device, seconds):
        one, got, fed = on_thread_ranks([work / "prefill", work / "decode"], ids, tokens)
        seen.update(one=one, got=got, fed=fed, step=Program.from_workspace(Workspace(work / "decode")).inputs)
        return got[1]

    done = gen.generate(hybrid("bamba"), 2, prompt, 3, runner=runner)
    assert done.ok, (done.tokens, done.expected)
    got, fed = seen["got"], seen["fed"]
    assert all(np.array_equal(got[r], seen["one"]) for r in range(2))
    states = {t for t in seen["step"] if gen._fed(t) == t}
    assert {"model.layers.0.conv_cache", "model.layers.0.recurrent_cache"} <= states
    for r in range(2):
        assert fed[r] == {t for t in states if not t.endswith(f"@{1 - r}")}
    assert fed[0, "sent"] == fed[1, "sent"] == 0
