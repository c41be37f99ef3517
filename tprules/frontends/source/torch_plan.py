"""A recipe for `tprules import torch`: a Python file defining `model()` (the nn.Module with
its weights), `inputs()` (the example positional arguments of its forward) and `PLAN` (the
dict a user passes to torch's `parallelize_module`: module path, `fnmatch` wildcards per
path atom, → a ParallelStyle of `torch.distributed.tensor.parallel`).

Each style torch ships is read as the Style (styles.py) of the module paths it matches:
how it places the module's parameters (the kinds sharding/weights.py's `weight_placement` knows) and its
ports (a layout change at the boundary, as DTensor makes it). Anything else is refused in
one line naming the module path, the style and what is missing.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
import traceback
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from ...paths import display_path
from ...pos import Pos
from ..errors import ImportFailed
from ..sharding.styles import REPLICATED, Layout, Port, Style


@dataclass
class Recipe:
    path: Path
    name: str  # the recipe's file stem, the program's "architecture" in messages
    module: Any  # the loaded recipe module

    @property
    def architecture(self) -> str:  # what the importer's shared checks name a model by
        return self.name

    def where(self, line: int = 0) -> Pos:
        return Pos(display_path(self.path), line)

    def fail(self, message: str) -> ImportFailed:
        return ImportFailed(f"{self.name}: {message}", self.where())


def load_recipe(path) -> Recipe:
    """The recipe module, loaded with its own folder first on sys.path; a recipe that fails
    to import is refused naming the file and line of the error."""
    path = Path(path)
    if not path.is_file():
        raise ImportFailed(f"recipe {display_path(path)} is not a file")
    name = path.stem
    spec = importlib.util.spec_from_file_location(f"tprules_recipe_{name}", path)
    if spec is None or spec.loader is None:
        raise ImportFailed(f"recipe {display_path(path)} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    folder = str(path.resolve().parent)
    sys.path.insert(0, folder)
    sys.modules[spec.name] = module  # as an import would: a dataclass of the recipe looks its module up there
    try:
        spec.loader.exec_module(module)
    except Exception as err:  # noqa: BLE001 - a user's file raises anything
        sys.modules.pop(spec.name, None)
        raise _failed(path, "the recipe fails to import", err) from None
    finally:
        if folder in sys.path:
            sys.path.remove(folder)
    recipe = Recipe(path, name, module)
    missing = [n for n in ("model", "inputs", "PLAN") if not hasattr(module, n)]
    if missing:
        raise recipe.fail(f"the recipe defines no {', '.join(missing)} (it defines model(), inputs() and PLAN)")
    if not callable(module.model) or not callable(module.inputs):
        raise recipe.fail("model and inputs must be functions: model() returns the nn.Module, inputs() its arguments")
    if not isinstance(module.PLAN, dict):
        raise recipe.fail(f"PLAN is a {type(module.PLAN).__name__}; it is the dict passed to parallelize_module")
    return recipe


def _failed(path: Path, what: str, err: BaseException) -> ImportFailed:
    """One line at the deepest frame of the recipe's folder (a SyntaxError: its own line)."""
    text = (str(err).strip().splitlines() or [""])[0][:300]
    if isinstance(err, SyntaxError) and err.filename:
        return ImportFailed(f"{what}: SyntaxError: {err.msg}", Pos(display_path(Path(err.filename)), err.lineno or 0))
    folder = path.resolve().parent
    file, line = path, 0
    for frame in traceback.extract_tb(err.__traceback__):
        if Path(frame.filename).resolve().parent == folder:
            file, line = Path(frame.filename), frame.lineno or 0
    return ImportFailed(f"{what}: {type(err).__name__}: {text}".rstrip(": "), Pos(display_path(file), line))


def call(recipe: Recipe, fn: str, **kwargs):
    """`model()` or `inputs(...)` of the recipe; its failure one line at its file and line."""
    try:
        return getattr(recipe.module, fn)(**kwargs)
    except Exception as err:  # noqa: BLE001 - a user's function raises anything
        raise _failed(recipe.path, f"{fn}() fails", err) from None


def accepts(recipe: Recipe, fn: str, name: str) -> bool:
    """Whether the recipe's function takes the keyword `name`."""
    try:
        params = inspect.signature(getattr(recipe.module, fn)).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind == p.VAR_KEYWORD for p in params.values())


# -- the plan -----------------------------------------------------------------------------


def matches(key: str, path: str) -> bool:
    """Whether a plan key names a module path as parallelize_module resolves it: one
    `fnmatch` pattern per atom."""
    atoms, parts = key.split("."), path.split(".")
    return len(atoms) == len(parts) and all(fnmatch(p, a) for a, p in zip(atoms, parts))


def read_plan(recipe: Recipe, model) -> dict[str, Style]:
    """Every module path the plan names → its Style; a key that matches no module, a style
    or layout tprules does not know, a module a style cannot shard: refused."""
    import torch.nn as nn

    modules = dict(model.named_modules())
    styles: dict[str, tuple[str, Style]] = {}
    for key, value in recipe.module.PLAN.items():
        if not isinstance(key, str) or key == "":
            raise recipe.fail(f"plan key {key!r}: a plan names submodules by path (the root's own style is not "
                              "imported)")
        paths = [p for p in modules if p and matches(key, p)]
        if not paths:
            raise recipe.fail(f"plan key {key!r} ({type(value).__name__}) matches no module of "
                              f"{type(model).__name__}")
        for path in paths:
            s = torch_style(recipe, path, value, modules[path], nn)
            if path in styles:
                raise recipe.fail(f"{path}: plan keys {styles[path][0]!r} and {key!r} both give it a style "
                                  f"({styles[path][1].name}, {s.name}); tprules imports one style per module")
            styles[path] = (key, s)
    return {path: s for path, (_, s) in styles.items()}


def torch_style(recipe: Recipe, path: str, style, module, nn) -> Style:
    """A ParallelStyle object as a Style (its ports and its parameters' kind)."""
    from torch.distributed.tensor.parallel import style as ts

    kind = type(style)
    name = kind.__name__

    def fail(what: str) -> ImportFailed:
        return recipe.fail(f"{path}: {name}: {what}")

    def layout(p, what: str) -> Layout | None:
        if p is None:
            return None
        from torch.distributed.tensor import Replicate, Shard

        if type(p) is Replicate:
            return REPLICATED
        if type(p) is Shard:
            return Layout(int(p.dim))
        raise fail(f"{what} {type(p).__name__}() is a layout tprules does not import (Shard(d) and Replicate() are)")

    def one(layouts, what: str) -> Layout | None:
        return layout(layouts[0], what)

    if kind in (ts.ColwiseParallel, ts.RowwiseParallel):
        linear, embedding = isinstance(module, nn.Linear), isinstance(module, nn.Embedding)
        if not (linear or embedding):
            raise fail(f"it shards nn.Linear and nn.Embedding; this module is a {type(module).__name__}")
        given, output = one(style.input_layouts, "input_layouts"), one(style.output_layouts, "output_layouts")
        local = bool(style.use_local_output)
        if kind is ts.ColwiseParallel:
            weight = "colwise" if linear else "embedding_colwise"
            desired = REPLICATED
        else:
            weight = "rowwise" if linear else "vocab"
            desired = Layout(-1) if linear else REPLICATED
        # DTensor adds a rowwise linear's bias to its partial sum (each chip 1 / N of it)
        return Style(name, weight, inputs=(Port(given, desired, local=False),),
                     outputs=(Port(None, output, local=local),), partial_bias=weight == "rowwise")
    if kind is ts.SequenceParallel:
        seq = one(style.sequence_sharding, "sequence_dim")
        return Style(name, "replicate", inputs=(Port(seq, seq, local=False),),
                     outputs=(Port(None, None, local=bool(style.use_local_output)),))
    if kind in (ts.PrepareModuleInput, ts.PrepareModuleInputOutput):
        prepare = style if kind is ts.PrepareModuleInput else style.prepare_module_input
        if prepare.input_kwarg_layouts or prepare.desired_input_kwarg_layouts:
            raise fail(f"input_kwarg_layouts {prepare.input_kwarg_layouts}: layouts of keyword inputs are not "
                       "imported (give the inputs positionally)")
        inputs = _inputs(prepare, layout)
        outputs: tuple[Port | None, ...] = ()
        if kind is ts.PrepareModuleInputOutput:
            outputs = _outputs(style.prepare_module_output, layout, fail)
        return Style(name, inputs=inputs, outputs=outputs)
    if kind is ts.PrepareModuleOutput:
        return Style(name, outputs=_outputs(style, layout, fail))
    raise fail("a ParallelStyle tprules does not import (it reads ColwiseParallel, RowwiseParallel, "
               "SequenceParallel, PrepareModuleInput, PrepareModuleOutput and PrepareModuleInputOutput)")


def _inputs(prepare, layout) -> tuple[Port | None, ...]:
    if prepare.input_layouts is None:
        return ()
    local = bool(prepare.use_local_output)
    ports: list[Port | None] = []
    for i, (given, desired) in enumerate(zip(prepare.input_layouts, prepare.desired_input_layouts)):
        g = layout(given, f"input_layouts[{i}]")
        ports.append(None if g is None else Port(g, layout(desired, f"desired_input_layouts[{i}]"), local=local))
    return tuple(ports)


def _outputs(prepare, layout, fail) -> tuple[Port | None, ...]:
    pairs = list(zip(prepare.output_layouts, prepare.desired_output_layouts))
    if len(pairs) != 1:
        raise fail(f"output_layouts for {len(pairs)} outputs; tprules imports the layout of a module's one output")
    given, desired = pairs[0]
    g = layout(given, "output_layouts[0]")
    if g is None:
        return (None,)
    return (Port(g, layout(desired, "desired_output_layouts[0]"), local=bool(prepare.use_local_output)),)


__all__ = ["Recipe", "accepts", "call", "load_recipe", "matches", "read_plan", "torch_style"]
