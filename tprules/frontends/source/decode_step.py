"""One decode step of a causal LM, as torch runs it: transformers' `StaticCache` (the cache
that its export path for ExecuTorch, `TorchExportableModuleWithStaticCache`, builds), here
with each layer's keys and values as forward's inputs and their update as its outputs.

ExecuTorch's module keeps the cache as buffers, which the program would fold into constants;
the step below hands the same `StaticLayer`s tensors of the inputs instead, so the cache is
what a serving engine passes in: `model.layers.I.key_cache` and `model.layers.I.value_cache`
[batch, kv heads, L, head], as StaticCache lays them out (their updates `..._new`). The
position of the new token, `cache_position` [1], is the layers' `cumulative_length` (where
`StaticLayer.update` writes, and what the model reads its position ids and causal mask
from); the write is `index_copy_` at that position.

A layer's cache may hold more than keys and values, each state an input and its update an
output the same way (`state_kinds`): an indexer's keys (DeepSeek-V3.2's StaticIndexedLayer,
`model.layers.I.indexer_key_cache`), and a hybrid model's recurrent state (a Mamba or
gated-delta layer's LinearAttentionLayer: `conv_cache` and `recurrent_cache`, `conv_1_cache`
for a second state), which the step reads as transformers' own decode does (its layers'
`has_previous_state`).
"""

from __future__ import annotations

import re
from contextlib import contextmanager

import numpy as np

from ..errors import ImportFailed
from .arrays import as_numpy

POSITION = "cache_position"
KINDS = ("key", "value")
# a cache state kind → the layer's attribute holding it (a linear-attention layer's: a dict by state index)
SLOTS = {"key": "keys", "value": "values", "indexer_key": "indexer_keys", "conv": "conv_states",
         "recurrent": "recurrent_states"}


def layers_path(model) -> str:
    """The module path of the decoder layers' list (`model.layers`): a layer's cache is named
    under its layer, `model.layers.3.key_cache`, so that stamping renames it with the layer."""
    import torch

    total = getattr(model.config.get_text_config(), "num_hidden_layers", None)
    for path, module in model.named_modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) == total and path.rsplit(".", 1)[-1] == "layers":
            return path
    return "cache"


def cache_input(path: str, kind: str, layer: int) -> str:
    return f"{path}.{layer}.{kind}_cache"


def cache_output(path: str, kind: str, layer: int) -> str:
    return f"{cache_input(path, kind, layer)}{NEW}"


NEW = "_new"
# a program tensor named by cache_input or cache_output (whole, or one chip's `@k`): the kind
# follows the layer's index directly, where a weight's name goes on with its module's path
_STATE = re.compile(r"(?P<input>.+\.\d+\.(?P<kind>[a-z0-9_]+)_cache)(?P<new>_new)?(?P<chip>@\d+)?")


def state_of(tensor: str) -> tuple[str, str, bool] | None:
    """A cache state's program tensor (cache_input's or cache_output's name, a chip's `@k` kept)
    → (the input it is or updates, with the chip; its kind; whether it is the update); None
    for any other tensor. `generate` feeds each update back to its input by it."""
    m = _STATE.fullmatch(tensor)
    if m is None:
        return None
    return m["input"] + (m["chip"] or ""), m["kind"], m["new"] is not None


def static_cache(src, model, batch: int, length: int, traced: bool = False):
    """transformers' StaticCache of `length` for the model, every layer allocated, or one line
    saying why the model's cache cannot be static. `traced`: each layer a `step_layer()`,
    a sliding-window one too, as TorchExportableModuleWithStaticCache makes it a `StaticLayer`
    (the sliding layer counts its tokens in a Python int, which a trace would bake in as the
    position): the same layer while the window is no shorter than the cache (refused
    otherwise), the mask still the model's sliding one; a layer that holds more (an indexer's
    keys, a linear-attention state beside the keys) keeps its class with the step's update."""
    import types

    import torch
    from transformers import StaticCache
    from transformers.cache_utils import StaticLayer, StaticSlidingWindowLayer

    config = model.config.get_text_config()
    try:
        cache = StaticCache(max_cache_len=length, config=config)
    except Exception as err:  # noqa: BLE001 - transformers raises many kinds
        raise src.fail(f"--decode: transformers cannot make its cache static: {_line(err)}") from None
    for i, layer in enumerate(cache.layers):
        if not _known(layer):  # a layer whose state is neither keys and values nor a known recurrent state
            raise src.fail(f"--decode: layer {i}'s cache is a {type(layer).__name__}, not keys and values, an "
                           "indexer's keys or a recurrent state (not imported)")
        window = getattr(layer, "max_cache_len", length)
        if window < length:  # StaticSlidingWindowLayer: a window shorter than the cache rolls it
            raise src.fail(f"--decode: layer {i} attends over a sliding window of {window} tokens, shorter than "
                           f"--cache-len {length}: transformers rolls that layer's cache, which is not imported; "
                           f"give --cache-len {window} or less")
        if traced and type(layer) in (StaticLayer, StaticSlidingWindowLayer):
            cache.layers[i] = step_layer()(length)
        elif traced and isinstance(layer, StaticLayer):
            setattr(layer, "update", types.MethodType(step_layer().update, layer))  # noqa: B010 - an instance's own
    device = next(iter(model.parameters())).device
    ids = torch.zeros((batch, 1), dtype=torch.int64, device=device)
    try:  # allocated by the model's own first write (its head counts), then emptied
        with torch.no_grad(), _allocating(model):
            model(input_ids=ids, cache=cache, use_cache=True)
    except Exception as err:  # noqa: BLE001
        own = own_cache(model, cache)  # a model whose forward demands its own cache class
        try:
            if own is None:
                raise err
            with torch.no_grad(), _allocating(model):
                model(input_ids=ids, cache=own, use_cache=True)
            cache = own
        except Exception:  # noqa: BLE001
            raise src.fail(f"--decode: transformers cannot fill a static cache: {_line(err)}") from None
    cache.reset()
    _own_allocated(cache)
    return cache


@contextmanager
def _allocating(model):
    """The cache-allocating forward of a model on the meta device (`--no-data`): its experts
    in the batched_mm form for that forward, since torch's grouped matmul on meta tensors
    wants bfloat16 (a float32 full-size DeepSeek-V3 was refused); nothing else changes."""
    form = getattr(model.config, "_experts_implementation", None)
    swap = next(iter(model.parameters())).device.type == "meta" and form in (None, "grouped_mm")
    if swap:
        try:
            model.set_experts_implementation("batched_mm")
        except (ValueError, RuntimeError):  # a model without experts: nothing to swap
            swap = False
    try:
        yield
    finally:
        if swap:
            model.set_experts_implementation(form or "grouped_mm")


def _known(layer) -> bool:
    from transformers.cache_utils import DummyLayer, LinearAttentionCacheLayerMixin, StaticLayer

    return isinstance(layer, (StaticLayer, LinearAttentionCacheLayerMixin, DummyLayer))


def state_kinds(cache) -> list[list[str]]:
    """Each layer's cache states, in the step's order of inputs and outputs: `key`, `value` (a
    static attention layer), `indexer_key` (an indexer's keys), `conv` and `recurrent` (a
    linear-attention layer's allocated states, `conv_1`.. for a second one); none for a
    layer without a cache (DummyLayer)."""
    from transformers.cache_utils import LinearAttentionCacheLayerMixin, StaticIndexedLayer, StaticLayer

    out: list[list[str]] = []
    for layer in cache.layers:
        kinds: list[str] = []
        if isinstance(layer, StaticLayer):
            kinds += list(KINDS)
        if isinstance(layer, StaticIndexedLayer) and layer.indexer_keys is not None:
            kinds.append("indexer_key")
        if isinstance(layer, LinearAttentionCacheLayerMixin):
            for k in range(layer.number_of_states):
                tail = f"_{k}" if k else ""
                if layer.is_conv_states_initialized[k]:
                    kinds.append("conv" + tail)
                if layer.is_recurrent_states_initialized[k]:
                    kinds.append("recurrent" + tail)
        kinds += [kind for kind in getattr(cache, "own_lists", {}) if (kind, len(out)) in cache.own_shapes]
        out.append(kinds)
    return out


def _slot(kind: str) -> tuple[str, int | None]:
    """The layer's attribute holding a state kind, and its index in a linear-attention layer's dict."""
    base, _, k = kind.partition("_")
    if base in ("conv", "recurrent"):
        return SLOTS[base], int(k or 0)
    return SLOTS[kind], None


def get_state(cache, i: int, kind: str):
    """Layer i's state `kind`: its cache layer's, or an own cache's list entry (OWN_LISTS)."""
    if kind in getattr(cache, "own_lists", {}):
        return getattr(cache, cache.own_lists[kind])[i]
    attr, k = _slot(kind)
    layer = cache.layers[i]
    return getattr(layer, attr) if k is None else getattr(layer, attr)[k]


def set_state(cache, i: int, kind: str, value) -> None:
    if kind in getattr(cache, "own_lists", {}):
        getattr(cache, cache.own_lists[kind])[i] = value
        return
    attr, k = _slot(kind)
    layer = cache.layers[i]
    if k is None:
        setattr(layer, attr, value)
    else:
        getattr(layer, attr)[k] = value


def _template(cache, i: int, kind: str):
    """A tensor of layer i's state's shape (an own list's entry is empty between steps)."""
    found = get_state(cache, i, kind)
    return cache.own_shapes[(kind, i)] if found is None else found


def own_cache(model, cache):
    """The model's own cache class (MiniMax's MiniMaxCache, which its forward demands), static:
    its layers StaticCache's, each list it keeps per layer (MiniMax's `linear_cache`, the
    lightning attention's state) one entry a layer, empty (None) until a step writes it. None
    where the model's module defines no one such class."""
    import sys

    from transformers.cache_utils import Cache, DynamicCache

    module = sys.modules.get(type(model).__module__)
    owns = [c for c in vars(module).values() if isinstance(c, type) and issubclass(c, DynamicCache)
            and c.__module__ == module.__name__] if module else []
    if len(owns) != 1:
        return None
    try:
        own = owns[0]()
    except TypeError:  # a constructor with arguments: not made here
        return None
    own.layers = cache.layers
    lists: dict[str, str] = {}
    for attr, value in list(vars(own).items()):
        if isinstance(value, list) and attr != "layers" and not value and attr.endswith("_cache"):
            setattr(own, attr, [None] * len(cache.layers))
            lists[attr[: -len("_cache")]] = attr
    own.own_lists = lists  # type: ignore[attr-defined]
    assert isinstance(own, Cache)
    return own


def _own_allocated(cache) -> None:
    """After the allocating forward: each own list's written entries recorded (their shapes,
    the step's inputs) and emptied, as a fresh cache's."""
    cache.own_shapes = {}
    for kind, attr in getattr(cache, "own_lists", {}).items():
        entries = getattr(cache, attr)
        for i, value in enumerate(entries):
            if value is not None:
                cache.own_shapes[(kind, i)] = value.detach().clone().zero_()
            entries[i] = None


_STEP_LAYER: list = []


def step_layer():
    """transformers' StaticLayer whose update writes as its own does (index_copy_ at
    `cumulative_length`) without counting the tokens it has seen: in a step that count is the
    input `cache_position`, and its in-place add, dropped from the trace, would leave a gap in
    fx's numbering of the nodes, which stamp.py follows."""
    if not _STEP_LAYER:
        import torch
        from transformers.cache_utils import StaticLayer

        class StepLayer(StaticLayer):
            def update(self, key_states, value_states, *args, **kwargs):
                if not self.is_initialized:
                    self.lazy_initialization(key_states, value_states)
                at = torch.arange(key_states.shape[-2], device=self.device) + self.cumulative_length
                keys, values = self.keys, self.values
                assert keys is not None and values is not None  # allocated above
                keys.index_copy_(2, at, key_states)
                values.index_copy_(2, at, value_states)
                return keys, values

        _STEP_LAYER.append(StepLayer)
    return _STEP_LAYER[0]


def _line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return (text[0] if text else type(err).__name__)[:300]


@contextmanager
def stepping(model, cache, fresh: bool = False):
    """The model's forward as one decode step: (input_ids, cache_position, layer 0's states,
    layer 1's, ...) → (logits, layer 0's updated states, ...), each layer's states those of
    `state_kinds`. A linear-attention layer reads its states as after a prompt (its
    `has_previous_state`) where the step is one token and not `fresh` (a prefill: as a new
    cache's, whatever the prompt's length, as transformers' generate starts). The model
    keeps its own module paths (the plan's patterns name them)."""
    from transformers.cache_utils import LinearAttentionCacheLayerMixin, StaticIndexedLayer, StaticLayer

    kinds = state_kinds(cache)
    placed = positioned(model)

    def step(input_ids, cache_position, *caches):
        given = iter(caches)
        for i, (layer, names) in enumerate(zip(cache.layers, kinds)):
            for kind in names:
                set_state(cache, i, kind, next(given).clone())
            if isinstance(layer, StaticLayer):
                layer.cumulative_length = cache_position[0].clone()
            if isinstance(layer, StaticIndexedLayer) and "indexer_key" in names:
                layer.indexer_cumulative_length = cache_position[0].clone()
            if isinstance(layer, LinearAttentionCacheLayerMixin):
                for k in range(layer.number_of_states):
                    layer.has_previous_state[k] = input_ids.shape[1] == 1 and not fresh
                if hasattr(layer, "cumulative_length_linear"):  # transformers 5.25: the tokens seen, counted
                    layer.cumulative_length_linear = cache_position[0].clone()  # in place (a constant torch.export refuses)
        out = type(model).forward(model, input_ids=input_ids, cache=cache, use_cache=True,
                                  **placed(input_ids, cache_position[0]))
        news = [get_state(cache, i, kind) for i, names in enumerate(kinds) for kind in names]
        return (out.logits, *news)

    model.forward = step
    try:
        yield model
    finally:
        del model.forward


def positioned(model):
    """`placed(input_ids, start)`: the forward's `position_ids` of tokens from position `start`,
    [B, S], as transformers' generate passes them to a forward that takes them (a model such
    as Bamba counts them from 0 without them, whatever its cache holds); none otherwise."""
    import inspect

    import torch

    if "position_ids" not in inspect.signature(type(model).forward).parameters:
        return lambda ids, start: {}

    def placed(ids, start) -> dict:  # (on the model's device, as its embedding of the ids: meta without data)
        batch, count = ids.shape[:2]
        return {"position_ids": (torch.arange(count, device=model.device) + start).unsqueeze(0).expand(batch, -1)}

    return placed


def example(tokens: tuple[int, int], cache) -> tuple:
    """The traced step's arguments: its tokens [B, S], the first one's position, the caches (zeros)."""
    import torch

    ids = torch.zeros(tokens, dtype=torch.int64)
    tensors = [_template(cache, i, kind) for i, names in enumerate(state_kinds(cache)) for kind in names]
    return (ids, torch.tensor([0], dtype=torch.int64), *[torch.zeros_like(t) for t in tensors])


def input_names(path: str, kinds: list[list[str]]) -> list[str]:
    from ..graph import INPUT

    return [INPUT, POSITION] + [cache_input(path, k, i) for i, names in enumerate(kinds) for k in names]


def output_names(path: str, kinds: list[list[str]]) -> tuple[str, ...]:
    return tuple(cache_output(path, k, i) for i, names in enumerate(kinds) for k in names)


def after_prompt(src, model, prompt: np.ndarray, token: np.ndarray, length: int) -> tuple[dict, dict]:
    """torch's own prefill of `prompt` [B, P] into a StaticCache of `length`, then its decode
    step of `token` [B, 1]: (the step's inputs, whole, by program name; its outputs)."""
    import torch

    from ..graph import INPUT, OUTPUT

    batch, past = prompt.shape
    path = layers_path(model)
    cache = static_cache(src, model, batch, length)
    kinds = state_kinds(cache)
    try:
        with torch.no_grad():
            placed = positioned(model)
            if past:
                ids = torch.from_numpy(prompt)
                model(input_ids=ids, cache=cache, use_cache=True, **placed(ids, 0))
            inputs = {INPUT: token, POSITION: np.array([past], np.int64)}
            for i, names in enumerate(kinds):
                for kind in names:  # (an own list's state is empty before a first step: zeros; a copy: the
                    # step below writes the cache in place)
                    inputs[cache_input(path, kind, i)] = as_numpy(_template(cache, i, kind)).copy()
            ids = torch.from_numpy(token)
            logits = model(input_ids=ids, cache=cache, use_cache=True, **placed(ids, past)).logits
    except Exception as err:  # noqa: BLE001 - the model's own forward raises anything
        raise src.fail(f"--decode: transformers' own forward with a static cache fails: {_line(err)}") from None
    outputs = {OUTPUT: as_numpy(logits).copy()}
    for i, names in enumerate(kinds):
        for kind in names:
            outputs[cache_output(path, kind, i)] = as_numpy(get_state(cache, i, kind)).copy()
    return inputs, outputs


def check_lengths(src, past: int, length: int, batch: int, step: int = 1) -> None:
    """--past P and --cache-len L: 0 ≤ P < P + S ≤ L ≤ the model's max_position_embeddings."""
    if past < 0:
        raise ImportFailed(f"--past takes a count of at least 0; got {past}")
    if length < 1 or batch < 1 or step < 1:
        raise ImportFailed(f"--cache-len, --batch and a step's tokens take a count of at least 1; got {length}, "
                           f"{batch} and {step}")
    if step > 1 and past + step > length:
        raise ImportFailed(f"a step of {step} tokens after {past} does not fit in a cache of {length}")
    if past >= length:
        raise ImportFailed(f"--past {past} leaves no room in --cache-len {length}: the new token is written at "
                           f"position {past} (--cache-len must be at least --past + 1)")
    most = getattr(src.config.get_text_config(), "max_position_embeddings", None)
    if isinstance(most, int) and length > most:
        raise src.fail(f"--cache-len {length} is beyond the model's max_position_embeddings {most}")
