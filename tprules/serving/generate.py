"""`tprules generate SOURCE_OR_DIR --tp N --prompt-ids FILE --tokens K`: greedy generation
with imported programs, as a serving engine runs them, checked against transformers.

1. two programs are imported (frontends/drivers/decode.py): the prefill, the prompt's P
   tokens written into a static cache of P + K from position 0, and the decode step of one
   token after P;
2. both are planned and compiled once for the device; the prefill runs on the prompt with an
   empty cache, then each decode step on the last greedy token at the next position, with
   the caches the previous program wrote fed back as they are, each chip's its own;
3. the greedy tokens are compared with transformers' `generate(do_sample=False)` with a
   static cache on the same weights.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..frontends.errors import ImportFailed
from ..paths import display_path
from ..pos import Pos


@dataclass
class Generated:
    tokens: np.ndarray  # [B, K], the programs' greedy tokens
    expected: np.ndarray  # [B, K], transformers' generate
    steps: int  # programs run: the prefill and K - 1 decode steps
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return bool(np.array_equal(self.tokens, self.expected))


def source_of(path) -> Path:
    """A model folder, or the one an imported program folder names in its source.json."""
    path = Path(path)
    marker = path / "source.json"
    if marker.is_file() and not (path / "config.json").is_file():
        try:
            return Path(json.loads(marker.read_text())["source"])
        except (OSError, ValueError, KeyError) as err:
            raise ImportFailed(f"cannot read the model folder it was imported from: {err}",
                               Pos(display_path(marker), 0)) from None
    return path


def read_prompt(path, vocab: int) -> np.ndarray:
    """The prompt's token ids [B, P]: a .npy of integers ([P] or [B, P]), or a text file of
    integers separated by spaces, commas or new lines (one prompt); each in [0, vocab)."""
    path = Path(path)
    where = Pos(display_path(path), 0)
    try:
        if path.suffix == ".npy":
            ids = np.load(path, allow_pickle=False)
        else:
            words = [w for w in re.split(r"[\s,]+", path.read_text()) if w]
            bad = next((w for w in words if not re.fullmatch(r"[+-]?\d+", w)), None)
            if bad is not None:
                raise ImportFailed(f"--prompt-ids: {bad!r} is not an integer token id", where)
            ids = np.array([int(w) for w in words], dtype=np.int64)
    except (OSError, ValueError) as err:
        raise ImportFailed(f"--prompt-ids: cannot read it: {str(err).splitlines()[0][:200]}", where) from None
    if ids.dtype.kind not in "iu":
        raise ImportFailed(f"--prompt-ids: token ids of dtype {ids.dtype}; expected integers", where)
    if ids.ndim == 1:
        ids = ids[None, :]
    if ids.ndim != 2 or ids.size == 0:
        raise ImportFailed(f"--prompt-ids: a prompt of shape {list(ids.shape)}; expected [P] or [batch, P] ids, "
                           "at least one", where)
    outside = ids[(ids < 0) | (ids >= vocab)]
    if outside.size:
        raise ImportFailed(f"--prompt-ids: token id {int(outside[0])} is outside the vocabulary (0 to {vocab - 1})",
                           where)
    return ids.astype(np.int64)


class RanksFailed(Exception):
    """The ranks of `--ranks` ended without tokens: the launcher printed the line naming the
    rank (runtime/distributed/launch.py); `code` is the exit status."""

    def __init__(self, code: int):
        super().__init__(f"the ranks ended with exit status {code}")
        self.code = code


def generate(source, tp: int, prompt_ids, tokens: int, device: str = "cpu", out=None, seed: int = 0,
             layers: int | None = None, plan=None, progress=None, runner=None) -> Generated:
    """Greedy tokens of the imported programs on `device` against transformers' generate;
    `runner(work, prompt, tokens, device, seconds)` runs the programs in `work` (default: in
    this process; `generate --ranks`: on MPI ranks, serving/ranks.on_ranks)."""
    import time

    from ..errors import UsageError
    from ..frontends.drivers.decode import import_decode
    from ..frontends.source.pretrained import build_model, read_source

    if tokens < 1:
        raise UsageError(f"--tokens takes a count of at least 1; got {tokens}")
    model_dir = source_of(source)
    src = read_source(model_dir, layers, plan)
    prompt = read_prompt(prompt_ids, int(src.config.get_text_config().vocab_size))
    batch, past = prompt.shape
    length = past + tokens
    seconds: dict[str, float] = {}
    started = time.perf_counter()
    work = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="tprules-generate-"))
    try:
        common = dict(cache_len=length, batch=batch, layers=layers, plan=plan, seed=seed, verify=False)
        import_decode(model_dir, tp, work / "prefill", past=0, step=past, **common)
        if tokens > 1:
            import_decode(model_dir, tp, work / "decode", past=past, **common)
            carried(src, work)
        seconds["import"] = time.perf_counter() - started
        got = (runner or _run)(work, prompt, tokens, device, seconds)
        started = time.perf_counter()
        want = _transformers(src, build_model(src, seed, False), prompt, tokens)
        seconds["transformers"] = time.perf_counter() - started
    finally:
        if out is None:
            shutil.rmtree(work, ignore_errors=True)
    return Generated(got, want, tokens, seconds)


def carried(src, work: Path) -> None:
    """Every cache state the decode step reads is one the prefill writes (the step's input,
    each chip's, fed by the prefill's `_new` output): else refused in one line naming the
    model and the state, rather than a step run on its data/'s state and tokens that are not
    transformers'."""
    from ..program.model import Program
    from ..workspace import Workspace

    written = {_fed(t) for t in Program.from_workspace(Workspace(work / "prefill")).outputs}
    read = [t for t in Program.from_workspace(Workspace(work / "decode")).inputs if _fed(t) == t]
    missing = [t for t in read if t not in written]
    if missing:
        raise src.fail(f"generate: the decode step reads the cache state {missing[0]}, which the prefill does not "
                       "write (refused: it would not be fed back)")


def _run(work: Path, prompt: np.ndarray, tokens: int, device: str, seconds: dict) -> np.ndarray:
    """The programs in this process: the prefill, then each decode step."""
    import time

    started = time.perf_counter()
    prefill = _prepared(work / "prefill", device)
    step = _prepared(work / "decode", device) if tokens > 1 else None
    seconds["compile"] = time.perf_counter() - started
    started = time.perf_counter()
    got = greedy(prefill, step, prompt, tokens)
    seconds["run"] = time.perf_counter() - started
    return got


def greedy(prefill, step, prompt: np.ndarray, tokens: int, world=None) -> np.ndarray:
    """The prefill (runtime.Prepared) on the prompt with empty caches, then `tokens` − 1 runs
    of the decode step, each on the last greedy token at the next position, with the caches
    the previous program wrote fed back as they are, each chip's its own. On ranks (`world`
    a RankWorld) each rank feeds back the caches of its own chips, and the rank holding the
    logits tells the others the tokens. [B, tokens] greedy tokens."""
    from ..frontends.graph import INPUT
    from ..frontends.source import decode_step as ds

    past = prompt.shape[1]
    caches = {t: np.zeros(prefill.prog.tensors[t].shape, np.float32) for t in prefill.prog.inputs
              if _fed(t) == t}
    outputs = _step(prefill, {INPUT: prompt, ds.POSITION: np.array([0], np.int64), **caches})
    chosen = [_chosen(prefill, outputs, world)]
    for k in range(1, tokens):
        assert step is not None
        fed = {_fed(t): v for t, v in outputs.items() if _fed(t) not in (None, t)}
        inputs = {INPUT: chosen[-1][:, None].astype(np.int64), ds.POSITION: np.array([past + k - 1], np.int64)}
        outputs = _step(step, {**inputs, **{t: fed[t] for t in step.prog.inputs if t in fed}})
        chosen.append(_chosen(step, outputs, world))
    return np.stack(chosen, axis=1).astype(np.int64)


def _chosen(prepared, outputs: dict[str, np.ndarray], world=None) -> np.ndarray:
    """Each sequence's greedy token of the last position: from the logits where this process
    holds them, else from the rank that holds them (on ranks)."""
    from ..frontends.graph import OUTPUT

    logits = outputs.get(OUTPUT)
    chosen = None if logits is None else np.argmax(logits[:, -1, :], axis=-1)
    if world is None or not world.collectives:
        assert chosen is not None  # one process holds every chip
        return chosen
    home = prepared.prog.tensors[OUTPUT].home
    return world.bcast(chosen, "the greedy tokens", root=0 if home is None else world.owner(home))


def _fed(tensor: str) -> str | None:
    """The cache state input that `tensor` is or, updated, is fed back to as the next step's
    (`..conv_cache_new@k` → `..conv_cache@k`: decode_step.state_of); None for anything else."""
    from ..frontends.source.decode_step import state_of

    state = state_of(tensor)
    return None if state is None else state[0]


def _prepared(folder: Path, device: str):
    from ..program.model import Program
    from ..runtime import Prepared, run_plan
    from ..workspace import Workspace

    ws = Workspace(folder)
    prog = Program.from_workspace(ws)
    return Prepared(prog, run_plan(ws, prog, device), device)


def _step(prepared, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """One run of a prepared program on `inputs` (the rest: its data/): each output's value."""
    prog = prepared.prog
    given = {t: np.ascontiguousarray(v, dtype=prepared.executor.inputs[t].dtype) for t, v in inputs.items()
             if t in prepared.executor.inputs}
    prepared.executor.inputs.update(given)
    done = prepared.run()
    values = {}
    for t, per_chip in done.outputs.items():
        home = prog.tensors[t].home
        if per_chip:  # (on ranks: held by this rank's chips)
            values[t] = per_chip[home if home in per_chip else min(per_chip)]
    return values


def _transformers(src, model, prompt: np.ndarray, tokens: int) -> np.ndarray:
    """transformers' greedy tokens with a static cache."""
    import torch

    model.generation_config.eos_token_id = None  # K tokens, as the programs make: no stop at an end token
    ids = torch.from_numpy(prompt)
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=tokens, do_sample=False,
                             cache_implementation="static", pad_token_id=0)
    return out[:, prompt.shape[1]:].numpy().astype(np.int64)
