"""The driver of `tprules import torch RECIPE.py --tp N --out DIR`: a module and the TP plan
written with torch's own API (torch_plan.py reads the recipe), through the passes that
`import hf` runs (frontends/__init__.py), sharing its driver's helpers (importer.py).

- the module's own forward on `inputs()` is run once, eagerly: its output is
  expected/output.npy, and a forward pre-hook on each styled module records the whole shape
  of each of its positional arguments (ports.py tells a module's inputs apart by them);
- the forward is traced with torch.export (trace.export), every positional tensor argument a
  program input named after forward's parameter, never folded into a constant;
- the plan's styles place the weights and shape the boundaries (tp.py's Sharder, ports.py);
- the program checks itself on a second input (`inputs(seed=1)` where inputs takes a seed,
  else one drawn here) before the folder is written (verify.check).
"""

from __future__ import annotations

import inspect
import time
from contextlib import nullcontext
from pathlib import Path

import numpy as np

from ...errors import UsageError
from ..errors import ImportFailed, MissingExtra
from .hf import ImportReport, _Built, _Clock, _numpy, _wellformed, built_whole, program_data

OUTPUT = "output"  # the forward's output, as expected/output.npy holds it


def import_torch(recipe_path, tp: int, out, seq: int | None = None, batch: int | None = None,
                 no_data: bool = False, verify: bool = True, progress=None) -> ImportReport:
    """Write the program folder `out` for the recipe at `recipe_path` on `tp` chips."""
    clock = _Clock()
    for flag, value in (("--tp", tp), ("--seq", seq), ("--batch", batch)):
        if value is not None and value < 1:
            raise UsageError(f"{flag} takes a count of at least 1; got {value}")
    try:
        import torch
    except ImportError:
        raise MissingExtra("torch") from None
    from ...progress import Progress
    from ..source.torch_plan import accepts, call, load_recipe, read_plan
    from .write import check_out, write_folder

    check_out(Path(out))
    progress = progress or Progress(False)
    try:
        clock.tick("load")
        recipe = load_recipe(recipe_path)
        sizes = {k: v for k, v in (("seq", seq), ("batch", batch)) if v is not None}
        for k in sizes:
            if not accepts(recipe, "inputs", k):
                raise recipe.fail(f"--{k} given, but inputs() takes no {k}")
        device = torch.device("meta") if no_data else nullcontext()  # tensors a forward makes are meta too
        with device:
            model = call(recipe, "model")
            args = _tuple(call(recipe, "inputs", **sizes))
        if not isinstance(model, torch.nn.Module):
            raise recipe.fail(f"model() returned a {type(model).__name__}; it returns the nn.Module")
        model.eval()
        styles = read_plan(recipe, model)
        clock.tick("model")
        with device:
            shapes, output = _run(recipe, model, args, styles)
            clock.tick("forward")
            try:
                built, names, sharded = _build(recipe, model, args, tp, styles, shapes, clock, progress)
            except ImportFailed as err:
                if err.pos is None:  # the trace's, the lowering's and the sharding's: at the recipe
                    err.pos = recipe.where()
                raise
        data, expected = {}, {}
        if not no_data:
            data = program_data(built, tp, {names[i]: _numpy(a) for i, a in enumerate(args) if i in names})
            expected = {OUTPUT: _numpy(output)}
        clock.tick("data")
        second, drawn = (None, False) if no_data or not verify else _second(recipe, sizes, args)
        info = {"source": str(Path(recipe_path)), "recipe": recipe.name, "model": type(model).__name__, "tp": tp,
                "inputs": {names[i]: list(a.shape) for i, a in enumerate(args) if i in names}, "output": OUTPUT,
                "no_data": no_data, "plan": {k: repr(v) for k, v in recipe.module.PLAN.items()},
                "torch": torch.__version__, "statements": built.statements, "candidates": built.candidates,
                "folded": built.folded, "second_input": None if second is None else
                ("drawn by tprules" if drawn else "inputs(seed=1)")}
        checked = _Checked(model, built, names, second, recipe, data)
        write_folder(Path(out), built.facts, data, expected, info, validate=checked, progress=progress)
        clock.tick("write")
        clock.move("write", "verify", checked.seconds)
    finally:
        progress.close()
    return ImportReport(Path(out), recipe.name, tp, built.statements, built.candidates, built.tensors, built.folds,
                        built.folded, clock.seconds, collectives=sharded, inputs=info["inputs"], drawn=drawn)


def _tuple(args) -> tuple:
    return args if isinstance(args, tuple) else tuple(args) if isinstance(args, list) else (args,)


def _run(recipe, model, args: tuple, styles: dict) -> tuple[dict[str, list[list]], object]:
    """The module's own forward on `args`, and the whole shape of each positional argument of
    every styled module in each of its calls (None: not a tensor)."""
    import torch

    shapes: dict[str, list[list]] = {}
    hooks = []
    modules = dict(model.named_modules())
    for path in styles:
        def record(_, inputs, path=path):  # each call's (a module called twice: both)
            shapes.setdefault(path, []).append([tuple(a.shape) if isinstance(a, torch.Tensor) else None
                                                for a in inputs])
        hooks.append(modules[path].register_forward_pre_hook(record))
    try:
        with torch.no_grad():
            try:
                output = model(*args)
            except Exception as err:  # noqa: BLE001 - a user's forward raises anything
                from ..source.torch_plan import _failed

                raise _failed(recipe.path, "the module's forward on inputs() fails", err) from None
    finally:
        for h in hooks:
            h.remove()
    if not isinstance(output, torch.Tensor):
        raise recipe.fail(f"forward returned a {type(output).__name__}; tprules imports a forward returning one "
                          "tensor")
    return shapes, output


def _build(recipe, model, args, tp, styles, shapes, clock, progress):
    """The traced, lowered and sharded program; forward's positional index → program input
    name; the count of each collective kind."""
    from ..lowering.walk import Lowerer
    from ..sharding.sharder import Sharder
    from ..sharding.weights import Heads, placements
    from ..source.constants import Constants
    from ..source.trace import export

    progress.phase("trace the forward", 1)
    with _math_attention():
        program = export(model, args, {}, recipe.name)
    clock.tick("trace")
    constants = Constants(program, model)
    names = _input_names(model, program, args)
    placeholders = {spec: names[i] for i, spec in _user_specs(program, args) if i in names}
    lowerer = Lowerer(program, constants, recipe.name, inputs=placeholders, output=OUTPUT)
    graph = lowerer.run()
    clock.tick("lower")
    style_of = styles.get
    weights, kinds = placements(graph, tp, recipe.name, style_of, Heads(None, None),
                                frozenset(n for n, _ in model.named_buffers()))
    sharder = Sharder(graph, tp, recipe.name, style_of, args=shapes)
    tpp = sharder.run(weights, kinds)
    built = built_whole(recipe, graph, constants, lowerer, tpp, clock, progress)
    b = tpp.builder
    kinds_of = dict(b.facts["collective"])
    collectives: dict[str, int] = {}
    for _, c in b.facts["fold"]:
        kind = kinds_of.get(c, "all_reduce")
        collectives[kind] = collectives.get(kind, 0) + 1
    present = {v.name for v in graph.inputs if v.role == "input"}
    return built, {i: n for i, n in names.items() if n in present}, collectives


def _math_attention():
    """scaled_dot_product_attention traced as its math form on every device: torch picks the
    kernel by the tensors' device, and on cpu its flash kernel's decomposition lays the output
    out as [L, N, H, E] (two more permutes) while on meta (--no-data) it takes the math form,
    so the same forward would otherwise be two programs. The eager forward (expected/) keeps
    torch's own choice; both compute the same values."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([SDPBackend.MATH])


def _user_specs(program, args):
    """(positional index, placeholder name) of each tensor argument of the traced forward."""
    specs = [s for s in program.graph_signature.input_specs if s.kind.name == "USER_INPUT"]
    return [(i, s.arg.name) for i, s in enumerate(specs) if type(s.arg).__name__ == "TensorArgument"
            and i < len(args)]


def _input_names(model, program, args) -> dict[int, str]:
    """Each positional tensor argument's program input name: forward's parameter name."""
    import torch

    try:
        params = [p.name for p in inspect.signature(model.forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    user = dict(_user_specs(program, args))
    out = {}
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor):
            out[i] = params[i] if i < len(params) else user.get(i, f"input{i}")
    if OUTPUT in out.values():
        raise ImportFailed(f"forward's parameter {OUTPUT!r} would share its name with the program's output")
    return out


def _second(recipe, sizes: dict, args: tuple) -> tuple[tuple, bool]:
    """The check's input: `inputs(..., seed=1)` where inputs takes a seed; else drawn here from
    seed 1 (floats ~N(0, 1), integers uniform within the example's own range)."""
    import torch

    from ..source.torch_plan import accepts, call

    if accepts(recipe, "inputs", "seed"):
        return _tuple(call(recipe, "inputs", **sizes, seed=1)), False
    rng = np.random.default_rng(1)
    drawn = []
    for a in args:
        if not isinstance(a, torch.Tensor):
            drawn.append(a)
        elif a.is_floating_point():
            drawn.append(torch.from_numpy(rng.standard_normal(tuple(a.shape))).to(a.dtype))
        else:
            lo, hi = (int(a.min()), int(a.max())) if a.numel() else (0, 0)
            drawn.append(torch.from_numpy(rng.integers(lo, hi + 1, size=tuple(a.shape))).to(a.dtype))
    return tuple(drawn), True


class _Checked:
    """write_folder's check: well-formed, then the reference on the second input against the
    module's forward on it (verify.check)."""

    def __init__(self, model, built: _Built, names: dict[int, str], second: tuple | None, recipe, data: dict):
        self.model, self.built, self.names, self.second, self.recipe = model, built, names, second, recipe
        self.data = data
        self.seconds = 0.0

    def __call__(self, folder: Path) -> None:
        _wellformed(folder)
        if self.second is None:
            return
        import torch

        from .verify import check

        started = time.perf_counter()
        try:
            with torch.no_grad():
                want = self.model(*self.second)
            inputs = {n: _numpy(self.second[i]) for i, n in self.names.items()}
            check(folder, self.model, self.built, inputs, _numpy(want), self.recipe.name, self.recipe.where(), OUTPUT,
                  self.data)
        finally:
            self.seconds = time.perf_counter() - started


__all__ = ["OUTPUT", "import_torch"]
