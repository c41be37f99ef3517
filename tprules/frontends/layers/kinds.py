"""Layer kinds: a model's decoder layers, grouped by what they compute.

Decoder layers are usually copies of one layer, or of a few kinds (dense and MoE, sliding
window and full attention, attention and Mamba). Two layers are of one kind when their
module trees are equal: the same classes, parameters and buffers of the same shapes, the
same plain attributes (`sliding_window`, `attention_type`, `is_sliding`, ...) except the
layer's index, and the same values in the config's per-layer lists (`layer_types`, ...).
That is checked for every layer, never assumed.

`reduced(model, kinds)` lends the model a ModuleList of the layers to trace: the first
layer of each kind, in order, then the second layer of each kind that has one; stamp.py
writes every other layer from those.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

_SCALARS = (bool, int, float, str, type(None))
_SKIP = {"layer_idx", "layer_id", "layer_index", "layer_number", "training"}


@dataclass(frozen=True)
class LayerKinds:
    path: str  # module path of the ModuleList, e.g. model.layers
    kind: tuple[int, ...]  # layer → kind number (kinds numbered by first layer)
    order: tuple[int, ...]  # the layers traced: each kind's first layer, then each kind's second

    @property
    def count(self) -> int:
        return len(self.kind)

    @property
    def kinds(self) -> int:
        return len(set(self.kind))

    def first(self, kind: int) -> int:
        return self.kind.index(kind)


def find_layers(model):
    """(path, ModuleList) of the decoder layers, or None when the model has no such list."""
    import torch

    total = getattr(model.config, "num_hidden_layers", None)
    if not isinstance(total, int) or total < 2:
        return None
    for path, module in model.named_modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) == total and path.rsplit(".", 1)[-1] == "layers":
            return path, module
    return None


def layer_kinds(model) -> LayerKinds | None:
    """The kinds of the model's decoder layers, or None when it has no layer list to stamp."""
    found = find_layers(model)
    if found is None:
        return None
    path, layers = found
    per_layer = _per_layer_lists(model.config, len(layers))
    signatures: dict[tuple, int] = {}
    kind = []
    for i, layer in enumerate(layers):
        sig = (_signature(layer), tuple(values[i] for values in per_layer.values()))
        kind.append(signatures.setdefault(sig, len(signatures)))
    firsts = [kind.index(k) for k in range(len(signatures))]
    seconds = [next(i for i in range(f + 1, len(kind)) if kind[i] == k) for k, f in enumerate(firsts)
               if kind.count(k) > 1]
    return LayerKinds(path, tuple(kind), tuple(firsts + sorted(seconds)))


def _per_layer_lists(config, count: int) -> dict[str, list]:
    out = {}
    for key, value in config.to_dict().items():
        if isinstance(value, list) and len(value) == count:
            out[key] = [repr(v) for v in value]
    return out


def _signature(layer) -> tuple:
    parts = []
    for name, module in layer.named_modules():
        params = tuple((n, tuple(p.shape), str(p.dtype)) for n, p in module.named_parameters(recurse=False))
        buffers = tuple((n, tuple(b.shape), str(b.dtype)) for n, b in module.named_buffers(recurse=False))
        plain = tuple(sorted((k, repr(v)) for k, v in vars(module).items()
                             if not k.startswith("_") and k not in _SKIP and _plain(v)))
        parts.append((name, type(module).__qualname__, params, buffers, plain))
    return tuple(parts)


def _plain(v) -> bool:
    if isinstance(v, _SCALARS):
        return True
    return isinstance(v, (tuple, list)) and all(isinstance(x, _SCALARS) for x in v)


@contextmanager
def reduced(model, kinds: LayerKinds, renumber: bool = False):
    """The model with only the layers of `kinds.order` (config lists cut to match).
    `renumber`: each kept layer's modules' `layer_idx` its place among them (a decode step's
    cache has a layer per kept layer, indexed so; DeepSeek-V3's layers 0 and 3 are the 0th
    and 2nd), restored after."""
    import torch

    parent_path, _, attr = kinds.path.rpartition(".")
    parent = model.get_submodule(parent_path) if parent_path else model
    full = getattr(parent, attr)
    configs = {id(c): c for c in (getattr(m, "config", None) for m in (model, parent)) if c is not None}
    saved = []
    for config in configs.values():
        lists = {k: v for k, v in vars(config).items() if isinstance(v, list) and len(v) == len(full)}
        saved.append((config, config.num_hidden_layers, lists))
        config.num_hidden_layers = len(kinds.order)
        for k, v in lists.items():
            setattr(config, k, [v[i] for i in kinds.order])
    setattr(parent, attr, torch.nn.ModuleList([full[i] for i in kinds.order]))
    numbers = [(m, m.layer_idx, at) for at, i in enumerate(kinds.order) for m in full[i].modules()
               if renumber and isinstance(getattr(m, "layer_idx", None), int)]
    for m, _, at in numbers:
        m.layer_idx = at
    try:
        yield model
    finally:
        setattr(parent, attr, full)
        for m, idx, _ in numbers:
            m.layer_idx = idx
        for config, count, lists in saved:
            config.num_hidden_layers = count
            for k, v in lists.items():
                setattr(config, k, v)
