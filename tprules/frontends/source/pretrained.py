"""A Hugging Face model folder in `save_pretrained` layout: config.json, the tensor-parallel
plan of its config class (or, with `--ep`, its expert-parallel plan), optional *.safetensors
weights; and the model built from them.

Nothing is downloaded: the folder is all there is. Without weights the model gets the
seeded random initialisation of its class; with `--no-data` it lives on meta tensors.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...paths import display_path
from ...pos import Pos
from ..errors import ImportFailed
from ..sharding.styles import NOT_IN_EP_PLAN, style


@dataclass
class Source:
    directory: Path
    display: str
    config: Any  # a transformers PretrainedConfig (its fields depend on the model type)
    architecture: str
    plan: dict[str, str]  # module (or parameter) pattern → a style transformers registers (styles.py)
    weights: list[Path]
    plan_file: str | None = None  # --plan, as shown (None: the config class's own plan)
    base_prefix: str = ""  # the path a --plan's patterns are relative to ("": the model's own plan, from the top)
    buffers: frozenset[str] = frozenset()  # the model's buffers, layer numbers as `*` (a style splits parameters only)
    ep: bool = False  # the EP plan in place of the TP plan (DistributedConfig(enable_expert_parallel=True))
    replicated: tuple[str, ...] = ()  # experts modules the applied plan leaves whole (replicated_experts)

    @property
    def kind(self) -> str:
        """Which plan of the config the import applies: `tp` or `ep`."""
        return "ep" if self.ep else "tp"

    def where(self, name: str = "config.json") -> Pos:
        return Pos(f"{self.display}/{name}", 0)

    def fail(self, message: str, name: str = "config.json") -> ImportFailed:
        return ImportFailed(f"{self.architecture}: {message}", self.where(name))


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return (text[0] if text else type(err).__name__)[:300]


def read_source(directory: Path | str, layers: int | None = None, plan_file: Path | str | None = None,
                ep: bool = False) -> Source:
    """Check the folder and read its config and plan (nothing heavy: no model yet); `ep`: its
    expert-parallel plan in place of the tensor-parallel one, as transformers'
    `enable_expert_parallel` applies it (`tp_plan={}`: what the EP plan does not name stays
    replicated)."""
    from transformers import AutoConfig

    directory = Path(directory)
    display = display_path(directory)
    if not directory.is_dir():
        raise ImportFailed(f"{display}: no such folder (SOURCE is a save_pretrained folder)")
    if not (directory / "config.json").is_file():
        raise ImportFailed(f"no config.json: {display} is not a save_pretrained folder", Pos(f"{display}/config.json", 0))
    try:
        config = AutoConfig.from_pretrained(directory)
    except Exception as err:  # noqa: BLE001 - transformers raises many kinds
        raise ImportFailed(f"cannot read the config: {_first_line(err)}", Pos(f"{display}/config.json", 0)) from None
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES as causal_lm

    arch = (getattr(config, "architectures", None) or [causal_lm.get(config.model_type, config.model_type)])[0]
    source = Source(directory, display, config, arch, {}, sorted(directory.glob("*.safetensors")), ep=ep)
    if config.model_type not in causal_lm:
        raise source.fail(f"model type {config.model_type} has no causal-LM class in transformers")
    if layers is not None:
        _keep_layers(source, layers)
    source.plan = _plan(source, plan_file)
    source.plan_file = None if plan_file is None else display_path(Path(plan_file))
    return source


def _keep_layers(source: Source, layers: int) -> None:
    config = source.config
    total = getattr(config, "num_hidden_layers", None)
    if total is None:
        raise source.fail("the config has no num_hidden_layers, so --layers cannot cut it")
    if not 1 <= layers <= total:
        raise source.fail(f"--layers {layers}: the model has {total} decoder layers")
    config.num_hidden_layers = layers
    for key in ("layer_types", "block_types"):  # per-layer lists follow the layer count
        if isinstance(getattr(config, key, None), list):
            setattr(config, key, getattr(config, key)[:layers])


def _plan(source: Source, plan_file) -> dict[str, str]:
    if plan_file is not None:
        path = Path(plan_file)
        try:
            raw = json.loads(path.read_text())
        except (OSError, ValueError) as err:
            raise ImportFailed(f"--plan: cannot read {path}: {_first_line(err)}", Pos(display_path(path), 0)) from None
        if not isinstance(raw, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in raw.items()):
            raise ImportFailed("--plan: expected a JSON object of module pattern → style, as base_model_tp_plan",
                               Pos(display_path(path), 0))
    else:
        field = f"base_model_{source.kind}_plan"
        raw = getattr(source.config, field, None) or getattr(type(source.config), field, None)
        if not raw and source.ep:
            raise source.fail(f"{type(source.config).__name__} has no base_model_ep_plan (--ep): nothing of it is "
                              "split by expert; import its TP plan without --ep, or give one with --plan PLAN.json")
        if not raw:
            raise source.fail(f"{type(source.config).__name__} has no base_model_tp_plan; give one with --plan PLAN.json")
    where = Pos(display_path(Path(plan_file)), 0) if plan_file is not None else source.where()
    _check_styles(source, raw, where)
    return dict(raw)


def _check_styles(source: Source, plan: dict[str, str], where: Pos) -> None:
    problems = []
    for pattern, name in plan.items():
        found = style(name)
        why = "not a style transformers registers" if found is None else found.missing
        if source.ep and name in NOT_IN_EP_PLAN:
            why = "transformers refuses it in an EP plan (deprecated): ep_dispatch_experts with grouped_gemm replaces it"
        if why is not None:
            problems.append(f"{pattern} {name} ({why})")
    if problems:
        raise ImportFailed(f"{source.architecture}: the plan has {len(problems)} entr{'y' if len(problems) == 1 else 'ies'} "
                           f"tprules cannot import: {'; '.join(problems)}", where)


def plan_style(plan: dict[str, str], module: str, base_prefix: str) -> str | None:
    """The plan's style for a module (or parameter) path (`*` a layer index). A --plan's
    patterns are relative to the base model (`base_prefix`), and may also name a path from
    the top, such as lm_head; the model's own plan (`base_prefix` "") names paths from the top."""
    relative = module[len(base_prefix) + 1:] if base_prefix and module.startswith(base_prefix + ".") else module
    for pattern, name in plan.items():
        rx = "^" + re.escape(pattern).replace(r"\*", r"[^.]+") + "$"
        if re.match(rx, relative) or re.match(rx, module):
            return name
    return None


def apply_plan(source: Source, model) -> None:
    """The plan the import applies, with the path its patterns are relative to.

    Without --plan it is the one transformers applies (the model's `tp_plan`: the class's own
    entries such as `lm_head: colwise_gather_output`, each config's `base_model_tp_plan` under
    its base model's path, the input embedding's `embedding_rowwise`; with --ep the model's
    `ep_plan` alone, as `enable_expert_parallel` applies it), its patterns from the top. An
    entry that matches nothing is skipped, as transformers skips it (a module this
    configuration does not build: the dense MLP of an all-MoE cut), unless it names, under
    another path, a module that no entry shapes: that module would be replicated where the
    plan meant to split it (a base model's plan read at the wrong prefix), and it is refused.
    A --plan's every entry must name a module or parameter (check_plan_paths)."""
    source.buffers = frozenset(generic_path(n) for n, _ in model.named_buffers())
    if source.plan_file is not None:
        source.base_prefix = _base_path(source.plan, model)
        return check_plan_paths(source, model)
    plan = dict(getattr(model, f"{source.kind}_plan", None) or getattr(model, f"_{source.kind}_plan", None) or {})
    if not plan:
        what = "expert-parallel" if source.ep else "tensor-parallel"
        raise source.fail(f"{type(model).__name__} has no {what} plan; give one with --plan PLAN.json")
    _check_styles(source, plan, source.where())
    paths = _paths(model)
    for entry, name in plan.items():
        if any(plan_style({entry: name}, path, "") for path in paths):
            continue
        meant = [path for path in paths if path.endswith("." + entry) or entry.endswith("." + path)]
        unshaped = [path for path in meant if not _shaped(plan, path)]
        if unshaped:
            raise source.fail(f"the plan entry {entry} ({name}) matches no module of {type(model).__name__}; "
                              f"{unshaped[0]}, which it names under another path, would be replicated")
    source.plan, source.base_prefix = plan, ""


def replicated_experts(source: Source, model) -> list[str]:
    """The experts modules (a module named `experts` with stacked [E, ...] parameters) whose
    parameters the applied plan leaves whole, layer numbers as `*`: under TP every chip runs
    every expert, as transformers does where its plan names no experts (5.25 dropped
    `moe_tp_experts` from most MoE TP plans; 5.24's split them)."""
    def splits(path: str) -> bool:
        for name in (plan_style(source.plan, path, source.base_prefix),
                     plan_style(source.plan, path.rsplit(".", 1)[0], source.base_prefix)):
            found = style(name) if name is not None else None
            if found is not None:
                return found.weight not in (None, "replicate")
        return False

    out = set()
    for name, module in model.named_modules():
        if name.rsplit(".", 1)[-1] != "experts":
            continue
        stacked = [n for n, p in module.named_parameters(recurse=False) if p.dim() == 3]
        if stacked and not any(splits(f"{name}.{n}") for n in stacked):
            out.add(generic_path(name))
    return sorted(out)


def plan_from(source: Source) -> str:
    """Where the applied plan came from: a --plan file, or the installed transformers'
    model (the release named: plans change between releases)."""
    if source.plan_file is not None:
        return source.plan_file
    import transformers

    return f"transformers {transformers.__version__} ({source.kind.upper()} plan of {source.architecture})"


def _base_path(plan: dict[str, str], model) -> str:
    """The path of the base model a --plan's patterns are relative to: of the model and its
    transformers submodules, the one under which most entries name a module or parameter
    (the outermost on a tie). Not `base_model_prefix`, which may name no module (llama4_text's
    language_model: its base model is `model`)."""
    from transformers import PreTrainedModel

    paths = _paths(model)
    bases = [name for name, m in model.named_modules() if isinstance(m, PreTrainedModel)]

    def named(base: str) -> int:
        return sum(any(plan_style({p: s}, path, base) for path in paths) for p, s in plan.items())

    return max(bases, key=named)  # max keeps the first (the outermost) of equals


def _shaped(plan: dict[str, str], path: str) -> bool:
    """Whether an entry gives the path a style (a parameter's: its own, or its module's)."""
    return plan_style(plan, path, "") is not None or ("." in path and plan_style(plan, path.rsplit(".", 1)[0], "")
                                                       is not None)


def _paths(model) -> list[str]:
    """Every module and parameter path of the model, layer numbers as `*` (transformers' own
    `replace_layer_number_by_wildcard`)."""
    return sorted({generic_path(n) for n, _ in [*model.named_modules(), *model.named_parameters()] if n})


def generic_path(path: str) -> str:
    """A path with its layer numbers as `*` (transformers' replace_layer_number_by_wildcard)."""
    return re.sub(r"\.\d+(\.|$)", lambda m: ".*" + m.group(1), path)


def check_plan_paths(source: Source, model) -> None:
    """Every entry of a --plan must name a module or parameter of the model."""
    prefix = source.base_prefix
    paths = [n for n, _ in model.named_modules()] + [n for n, _ in model.named_parameters()]
    missing = [f"{p} ({s})" for p, s in source.plan.items()
               if not any(plan_style({p: "x"}, path, prefix) for path in paths if path)]
    if missing:
        raise ImportFailed(f"{source.architecture}: the plan names {len(missing)} module path"
                           f"{'' if len(missing) == 1 else 's'} the model does not have: {', '.join(missing)}",
                           Pos(source.plan_file or source.display, 0))


# -- the model ---------------------------------------------------------------------------


EXPERTS = ("grouped_mm", "batched_mm")  # transformers' static-shape experts forms, the default first


def build_model(source: Source, seed: int, no_data: bool, experts: str = EXPERTS[0]):
    """The causal LM in float32, eager attention (the plain math: matmuls and a softmax), its
    experts in a static-shape form: `grouped_mm` (the pairs of token and chosen expert sorted
    by expert, one grouped matmul per projection reading each expert's weights once) or
    `batched_mm` (tokens repeated per chosen expert, each pair's weights gathered by id, a bmm)."""
    import torch
    from transformers import AutoModelForCausalLM

    # transformers' own default is grouped_mm where the model's experts have that form (it
    # refuses the name for a model without experts): asked for by name only for batched_mm
    options = {"attn_implementation": "eager", "dtype": torch.float32,
               "experts_implementation": None if experts == EXPERTS[0] else experts}
    torch.manual_seed(seed)
    try:
        if no_data:
            with torch.device("meta"):
                model = AutoModelForCausalLM.from_config(source.config, **options)
        elif source.weights:
            _check_weight_files(source)
            model = AutoModelForCausalLM.from_pretrained(source.directory, config=source.config, **options)
        else:
            model = AutoModelForCausalLM.from_config(source.config, **options)
    except ImportFailed:
        raise
    except Exception as err:  # noqa: BLE001
        bad = _unreadable_weight_file(source)
        if bad is not None:
            raise bad from None
        raise source.fail(f"transformers cannot build the model: {_first_line(err)}") from None
    return model.eval()


def _check_weight_files(source: Source) -> None:
    from safetensors import safe_open

    for path in source.weights:
        try:
            with safe_open(str(path), "pt") as f:
                for key in f.keys():
                    f.get_slice(key)
        except Exception as err:  # noqa: BLE001
            raise ImportFailed(f"not a readable safetensors file: {_first_line(err)}",
                               Pos(f"{source.display}/{path.name}", 0)) from None


def _unreadable_weight_file(source: Source) -> ImportFailed | None:
    from safetensors.torch import load_file

    for path in source.weights:
        try:
            load_file(str(path))
        except Exception as err:  # noqa: BLE001
            return ImportFailed(f"not a readable safetensors file: {_first_line(err)}",
                                Pos(f"{source.display}/{path.name}", 0))
    return None


def head_counts(config) -> tuple[int | None, int | None]:
    """(attention heads, key/value heads) of a config, where it has them."""
    heads = getattr(config, "num_attention_heads", None)
    kv = getattr(config, "num_key_value_heads", None) or heads
    return heads, kv
