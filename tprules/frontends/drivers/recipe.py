"""The driver of `tprules import torch RECIPE.py --tp N --out DIR`: a module and the TP plan
written with torch's own API (source/torch_plan.py reads the recipe), through the passes that
`import hf` runs (frontends/__init__.py), as one import job (job.py) that ends as theirs do
(built.py, job.written).

- the module's own forward on `inputs()` is run once, eagerly: its output is
  expected/output.npy, and a forward pre-hook on each styled module records the whole shape
  of each of its positional arguments (sharding/ports.py tells a module's inputs apart by them);
- the forward is traced with torch.export (source/trace.export), every positional tensor argument a
  program input named after forward's parameter, never folded into a constant;
- the plan's styles place the weights and shape the boundaries (sharding/sharder.py);
- the program checks itself on a second input (`inputs(seed=1)` where inputs takes a seed,
  else one drawn here) before the folder is written (verify.check).
"""

from __future__ import annotations

import inspect
from contextlib import nullcontext
from functools import partial
from pathlib import Path

import numpy as np

from ..errors import ImportFailed, MissingExtra
from ..source.arrays import as_numpy
from .built import Built, Checked, built_whole, program_data, written
from .job import ImportJob, ImportReport, prepare
from .ties import refuse_ties

OUTPUT = "output"  # the forward's output, as expected/output.npy holds it


def import_torch(recipe_path, tp: int, out, seq: int | None = None, batch: int | None = None,
                 no_data: bool = False, verify: bool = True, progress=None) -> ImportReport:
    """Write the program folder `out` for the recipe at `recipe_path` on `tp` chips."""
    with prepare(out, tp, batch, seq, no_data=no_data, verify=verify, progress=progress) as job:
        try:
            import torch
        except ImportError:
            raise MissingExtra("torch") from None
        from ..source.torch_plan import load_recipe, read_plan

        job.clock.tick("load")
        job.src = recipe = load_recipe(recipe_path)
        sizes = {k: v for k, v in (("seq", seq), ("batch", batch)) if v is not None}
        device = torch.device("meta") if no_data else nullcontext()  # tensors a forward makes are meta too
        args = _model(job, sizes, device)
        styles = read_plan(recipe, job.model)
        job.clock.tick("model")
        with device:
            shapes, output = _run(recipe, job.model, args, styles)
            job.clock.tick("forward")
            try:
                built, names, sharded = _build(job, args, styles, shapes)
                refuse_ties(job, built)
            except ImportFailed as err:
                if err.pos is None:  # the trace's, the lowering's and the sharding's: at the recipe
                    err.pos = recipe.where()
                raise
        data, expected = {}, {}
        if not no_data:
            data = program_data(built, tp, {names[i]: as_numpy(a) for i, a in enumerate(args) if i in names})
            expected = {OUTPUT: as_numpy(output)}
        job.clock.tick("data")
        second, drawn = _second(recipe, sizes, args) if job.verify else (None, False)
        inputs = {names[i]: list(a.shape) for i, a in enumerate(args) if i in names}
        info = {"source": str(Path(recipe_path)), "recipe": recipe.name, "model": type(job.model).__name__, "tp": tp,
                "inputs": inputs, "output": OUTPUT, "no_data": no_data,
                "plan": {k: repr(v) for k, v in recipe.module.PLAN.items()}, "torch": torch.__version__,
                "statements": built.statements, "candidates": built.candidates, "folded": built.folded,
                "second_input": None if second is None else ("drawn by tprules" if drawn else "inputs(seed=1)")}
        checked = Checked(None if second is None else partial(_check, job, built, names, second, data))
        return written(job, built, info, data, expected, checked, collectives=sharded, inputs=inputs, drawn=drawn)


def _model(job: ImportJob, sizes: dict, device) -> tuple:
    """The recipe's model() into `job` and its inputs(**sizes), both made under `device`."""
    import torch

    from ..source.torch_plan import accepts, call

    recipe = job.src
    for k in sizes:
        if not accepts(recipe, "inputs", k):
            raise recipe.fail(f"--{k} given, but inputs() takes no {k}")
    with device:
        model = call(recipe, "model")
        args = _tuple(call(recipe, "inputs", **sizes))
    if not isinstance(model, torch.nn.Module):
        raise recipe.fail(f"model() returned a {type(model).__name__}; it returns the nn.Module")
    model.eval()
    job.model = model
    return args


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


def _build(job: ImportJob, args: tuple, styles: dict, shapes: dict) -> tuple[Built, dict[int, str], dict[str, int]]:
    """The traced, lowered and sharded program; forward's positional index → program input
    name; the count of each collective kind."""
    from ..lowering.walk import Lowerer
    from ..sharding.sharder import Sharder
    from ..sharding.weights import placements
    from ..source.constants import Constants
    from ..source.trace import export

    recipe, model = job.src, job.model
    job.progress.phase("trace the forward", 1)
    with _math_attention():
        program = export(model, args, {}, recipe.name)
    job.clock.tick("trace")
    constants = Constants(program, model)
    names = _input_names(model, program, args)
    placeholders = {spec: names[i] for i, spec in _user_specs(program, args) if i in names}
    lowerer = Lowerer(program, constants, recipe.name, inputs=placeholders, output=OUTPUT)
    graph = lowerer.run()
    job.clock.tick("lower")
    style_of = styles.get
    weights, kinds = placements(graph, job.tp, recipe.name, style_of, job.heads,
                                frozenset(n for n, _ in model.named_buffers()))
    sharder = Sharder(graph, job.tp, recipe.name, style_of, args=shapes)
    tpp = sharder.run(weights, kinds)
    built = built_whole(job, graph, constants, lowerer, tpp)
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


def _check(job: ImportJob, built: Built, names: dict[int, str], second: tuple, data: dict, folder: Path) -> None:
    """The program against the module's forward on the second input (verify.check)."""
    import torch

    from .verify import check

    with torch.no_grad():
        want = job.model(*second)
    inputs = {n: as_numpy(second[i]) for i, n in names.items()}
    check(folder, job.model, built, [("a second input", inputs, as_numpy(want))], job.src.name, job.src.where(),
          OUTPUT, data)


__all__ = ["OUTPUT", "import_torch"]
