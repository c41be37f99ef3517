"""`tprules import` checks itself before it writes: the program's reference (runtime/values/reference.py)
on a second input, drawn from another seed than the one written to data/, against torch's
forward on that input; where the program chooses by value (a top-k, an argmax, a sort), on a
tie-prone input too (`padded_ids`: a short prompt, then the padding token; issue 51). A
program specialised to the ids it was traced with, or a wrong lowering, is refused in one
line naming the first statement whose value differs, its module path and ATen op; nothing
is written. What does not depend on the inputs (a weight's permute) is computed once.

Where the first difference lies is found on the traced graph before tensor parallelism
(frontends/graph.py): each statement computed in numpy from the values before it and compared with
torch's value of the node it lowers (torch.fx's interpreter over the traced program). A
graph that agrees everywhere while the program does not points at the sharding: then the
first program statement whose whole value differs from the graph's is named.
"""

from __future__ import annotations

import operator
from contextlib import nullcontext

import numpy as np

from ...ops import Ops
from ..errors import ImportFailed
from ..graph import INPUT, OUTPUT
from ..source.arrays import as_numpy

STATEMENT_TOLERANCE = 1e-3  # a statement's relative error that names it (float32 reassociation stays far below)


def second_ids(seed: int, vocab: int, batch: int, seq: int) -> np.ndarray:
    """The check's input: drawn from a stream other than data/input_ids.npy's (seed `seed`)."""
    return np.random.default_rng([seed, 1]).integers(0, vocab, size=(batch, seq)).astype(np.int64)


SELECTIONS = frozenset({Ops.TOPK_INDICES, Ops.TOPK_VALUES, Ops.SORT_RANK})  # a choice the input makes
PROMPT = 2  # the tie-prone input's prompt, in tokens


def selects(graph) -> bool:
    """Whether the program chooses by value: a top-k (an argmax), a sort."""
    return any(s.cls in SELECTIONS for s in graph.stmts)


def padded_ids(ids: np.ndarray, pad: int | None) -> tuple[str, np.ndarray]:
    """The check's tie-prone input, where the program chooses by value (selects): the first
    PROMPT tokens of `ids`, then the padding token `pad` (the last of those where there is
    none) to the traced length: a short prompt in a padded batch. The same token over and
    over, and a padding token's embedding is often a row of zeros: the scores a top-k reads
    tie most there (ties.py judges those the graph makes; this is the input that makes them)."""
    out = ids.copy()
    token = int(ids[0, min(PROMPT, ids.shape[1]) - 1]) if pad is None else int(pad)
    out[:, PROMPT:] = token
    return f"a short prompt then token {token} repeated", out


def verify(folder, src, model, built, cases: list[tuple[str, np.ndarray]], input_names: list[str], data=None) -> None:
    """Raise ImportFailed unless the program in `folder` gives torch's logits for each input
    of `cases` (what it is, its ids)."""
    import torch

    checks = []
    for what, ids in cases:
        with torch.no_grad():
            want = as_numpy(model(input_ids=torch.from_numpy(ids), use_cache=False).logits, stored=True)
        checks.append((what, {name: ids for name in input_names}, want))
    check(folder, model, built, checks, src.architecture, src.where(), data=data)


def check(folder, model, built, cases: list[tuple[str, dict[str, np.ndarray], np.ndarray]], arch: str, where,
          output: str = OUTPUT, data: dict[str, np.ndarray] | None = None) -> None:
    """Raise ImportFailed unless the program in `folder`, on each of `cases` (what it is,
    program input → its whole value, torch's forward on them), gives torch's output. `data`:
    the arrays the import is writing to the folder's data/ (taken from memory, not read back:
    a large weight costs seconds to read again); the inputs it lacks are read from the folder."""
    from ...program.model import Program
    from ...runtime.values.compare import errors, tolerance
    from ...runtime.values.inputs import as_stored, program_inputs
    from ...runtime.values.reference import reference
    from ...workspace import Workspace

    prog = Program.from_workspace(Workspace(folder))
    data = data or {}
    given = program_inputs(prog, [n for n in prog.inputs if n not in data])
    given.update((n, as_stored(data[n], prog.tensors[n])) for n in prog.inputs if n in data)
    tol = tolerance(prog, output)
    reuse: dict[str, np.ndarray] = {}  # after the first input: what does not depend on the inputs, computed once
    for what, inputs, want in cases:
        values = reference(prog, {**given, **reuse, **{name: value for name, value in inputs.items() if name in given}})
        if not reuse:
            reuse = _independent(prog, values, set(inputs))
        _, rel = errors(values.get(output), want)
        if rel <= tol:
            continue
        try:
            found = _first_difference(model, built, inputs) or \
                _first_program_difference(prog, values, model, built, inputs)
        finally:
            _memo.clear()  # the graph's values, shared by the two searches only
        raise ImportFailed(f"{arch}: the imported program differs from torch on {what} "
                           f"({output} max rel err {rel:.1e} > {tol:g}); first at {found or f'the output {output}'}; "
                           "nothing written (--no-verify skips this check)", where)


def _independent(prog, values, varying: set[str]) -> dict[str, np.ndarray]:
    """The values of the statements that no input in `varying` reaches (a weight's permute)."""
    reached = set(varying)
    out = {}
    for s in prog.statements:
        if reached.intersection(s.reads):
            reached.add(s.writes)
        else:
            out[s.writes] = values.get(s.writes, prog.tensors[s.writes].home)
    return out


def _first_difference(model, built, inputs) -> str | None:
    """The first statement of the traced graph whose value differs from torch's node."""
    graph_values, torch_values, nodes_of = _graph_values(model, built, inputs)
    for s in built.graph.stmts:
        got = graph_values.get(s.writes)
        for node in nodes_of.get(s.writes, ()):
            want = torch_values.get(node)
            if got is None or want is None or tuple(want.shape) != tuple(got.shape):
                continue
            if _differs(got, want):
                return f"statement {s.name} ({s.cls}) of {s.module or '(top)'}: {_op(node)}{_ties(s, graph_values)}"
    return None


def _op(node) -> str:
    """The node's ATen op; an item of a multi-output op as that op and the item's number."""
    if node.target is operator.getitem:
        return f"{node.args[0].target} item {node.args[1]}"
    return str(node.target)


def _ties(s, graph_values) -> str:
    """For a top-k whose k-th and next largest values are equal: why torch's choice differs."""
    if s.cls not in (Ops.TOPK_INDICES, Ops.TOPK_VALUES) or s.reads[0] not in graph_values:
        return ""
    x = -np.sort(-np.asarray(graph_values[s.reads[0]], np.float64), axis=-1)
    k = int(s.attr("k", "1"))
    if k >= x.shape[-1] or not np.any(x[..., k - 1] == x[..., k]):
        return ""
    return f" (its operand ties at the top-{k}'s boundary; torch's top-k breaks ties in no documented order)"


def _first_program_difference(prog, values, model, built, inputs) -> str | None:
    """The first program statement writing a spine tensor (a whole value) that differs from the
    traced graph's value of the same name."""
    graph_values, _, _ = _graph_values(model, built, inputs)
    for s in prog.statements:
        want = graph_values.get(s.writes)
        tensor = prog.tensors[s.writes]
        if want is None or tensor.home is not None or tuple(tensor.shape) != tuple(want.shape):
            continue  # a chip's tensor may be a split or a share of a sum: only the spine's are whole
        got = values.get(s.writes)
        if _differs(got, want):
            return f"statement {s.name} ({s.cls}) of {s.attr('module') or '(top)'}: {s.attr('aten')}"
    return None


_memo: dict = {}


def _graph_values(model, built, inputs: dict[str, np.ndarray]):
    """(graph value → numpy value, fx node → torch's numpy value, graph value → its fx nodes)."""
    key = (id(built), tuple((name, value.tobytes()) for name, value in sorted(inputs.items())))
    if key in _memo:
        return _memo[key]
    import torch

    from ...runtime.values.semantics import apply

    c, graph = built.constants, built.graph
    with built.reduce() if built.reduce is not None else nullcontext():
        named = dict(model.named_parameters(remove_duplicate=False))
        named.update(model.named_buffers(remove_duplicate=False))
        named.update(c.program.constants)
        by_node = {node.name: inputs[value] for node, value in built.names.items()
                    if getattr(node, "op", None) == "placeholder" and value in inputs}
        torch_values = _node_values(c, named, {name: torch.from_numpy(value) for name, value in by_node.items()})
    out: dict[str, np.ndarray] = {}
    for v in graph.values.values():
        if v.role == "input":
            out[v.name] = inputs[v.name]
        elif v.role == "weight":
            out[v.name] = as_numpy(named[v.name], stored=True)
        elif v.role == "folded":
            node = graph.folded[v.name]
            value = torch_values.get(node)
            out[v.name] = value if value is not None else as_numpy(c.value(node), stored=True)
    for s in graph.stmts:
        shape, dtype = graph.values[s.writes].shape, graph.values[s.writes].dtype
        try:
            value = apply(s.cls, dict(s.attrs), [out[r] for r in s.reads], {}, dtype, shape)
        except Exception:  # noqa: BLE001 - a statement numpy cannot compute: the rest is unknown
            break
        out[s.writes] = np.asarray(value).reshape(shape)
    nodes_of: dict[str, list] = {}
    renamed = built.names.get(built.output)  # the value graph.py renamed to the output's name
    for node, value in built.names.items():
        nodes_of.setdefault(graph.output if value == renamed else value, []).append(node)
    _memo.clear()
    _memo[key] = out, torch_values, nodes_of
    return _memo[key]


def _node_values(c, named: dict, inputs: dict) -> dict:
    """Every tensor node's value in torch, the traced program run on `inputs` (by placeholder)."""
    import torch
    import torch.fx

    args = []
    for spec in c.program.graph_signature.input_specs:
        if spec.arg.name in c.user_inputs:
            args.append(inputs[spec.arg.name])
        elif spec.target is not None:
            args.append(named[spec.target])
        else:  # a constant argument (use_cache=False)
            args.append(getattr(spec.arg, "value", None))
    found: dict = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n):
            result = super().run_node(n)
            if isinstance(result, torch.Tensor) and not result.is_complex():
                found[n] = as_numpy(result, stored=True)
            return result

    with torch.no_grad():
        Recorder(c.program.graph_module).run(*args)
    return found


def _differs(got, want) -> bool:
    from ...runtime.values.compare import errors

    got, want = np.asarray(got), np.asarray(want)
    if got.dtype.kind in "iub" or want.dtype.kind in "iub":
        return bool(np.any(got.astype(np.int64) != want.astype(np.int64)))
    return errors(got, want)[1] > STATEMENT_TOLERANCE


__all__ = ["INPUT", "check", "padded_ids", "second_ids", "selects", "verify"]
