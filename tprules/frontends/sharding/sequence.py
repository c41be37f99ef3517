"""transformers' `sequence_parallel` style, as transformers 5 runs it
(`distributed/tensor_parallel.py` `SequenceParallel`): the module's parameters replicated,
its input taken as each chip's block of the sequence (`DTensor.from_local`, `Shard(1)`),
the module run on that, and its output handed on as the chip's local tensor.

A plain tensor from the module before is each chip's whole copy (every other style hands
on local tensors that are whole or a partial folded at its boundary), so each chip runs the
module on all the tokens and keeps what it computes: the program's statements are the
module's own, on the spine, with no collective. That is the whole sum only where the module
works token by token (a norm, a residual): then the block each chip would hold is its part
of the same answer. A module that mixes tokens (a sum or softmax over the sequence, an
attention) would compute, under DTensor, over a sequence N times as long as the model's;
such a module is refused, naming its statement, rather than imported as something torch does
not run. The check places each input the module reads from outside it on its sequence axis,
split over the chips, and takes the sharding table (table.py) through the module's
statements: a statement the table cannot place, or a value leaving the module not split on
that axis alone, is not token by token.
"""

from __future__ import annotations

from ..errors import ImportFailed
from ..graph import Graph, under
from .placement import REPLICATE, Placement, Shard, plain
from .table import NotShardable, rule

SEQUENCE_AXIS = 1  # SequenceParallel(sequence_dim=1), as transformers registers it
NAME = "sequence_parallel"



def check_token_wise(graph: Graph, style_of, tp: int, arch: str) -> None:
    """Refuse a `sequence_parallel` module whose statements mix tokens (see the module's doc)."""
    modules: dict[str, list] = {}
    for st in graph.stmts:
        parts = (st.module or "").split(".")
        prefix = next((p for p in (".".join(parts[:n]) for n in range(len(parts), 0, -1))
                       if (s := style_of(p)) is not None and s.name == NAME), None)
        if prefix is not None:
            modules.setdefault(prefix, []).append(st)
    if not modules:
        return
    readers: dict[str, list[str]] = {}  # value → the modules of the statements that read it
    for st in graph.stmts:
        for r in st.reads:
            readers.setdefault(r, []).append(st.module or "")
    for prefix, stmts in modules.items():
        _check_module(graph, prefix, stmts, readers, tp, arch)


def _check_module(graph: Graph, prefix: str, stmts: list, readers: dict[str, list[str]], tp: int, arch: str) -> None:
    place: dict[str, Placement] = {}

    def placed(value: str) -> Placement:
        if value not in place:
            v = graph.values[value]
            entering = v.role in ("activation", "input") and len(v.shape) > SEQUENCE_AXIS
            place[value] = Shard((plain(SEQUENCE_AXIS, tp, v.shape[SEQUENCE_AXIS]),)) if entering else REPLICATE
        return place[value]

    for st in stmts:
        ins = [placed(r) for r in st.reads]
        shapes = [graph.values[r].shape for r in st.reads]
        out = graph.values[st.writes].shape
        try:
            place[st.writes] = rule(st.cls)(dict(st.attrs), ins, shapes, out, tp,
                                            transpose_b=dict(st.attrs).get("transpose_b") == "1")
        except NotShardable as err:
            raise ImportFailed(_refusal(arch, prefix, st, str(err))) from None
    for st in stmts:
        read_by = readers.get(st.writes, [])
        if read_by and all(under(m, prefix) for m in read_by):
            continue  # stays inside the module (a value no statement reads is the program's output)
        p = place[st.writes]
        if not (isinstance(p, Shard) and set(p.axes()) == {SEQUENCE_AXIS}):
            raise ImportFailed(_refusal(arch, prefix, st, f"its output would be placed {p}, not split on the "
                                                          f"sequence axis ({SEQUENCE_AXIS}) alone"))


def _refusal(arch: str, prefix: str, st, why: str) -> str:
    return (f"{arch}: {NAME} at {prefix}: {st.aten} at {st.module} does not work token by token ({why}); "
            "transformers would run the module over each chip's tokens as one sequence")


__all__ = ["check_token_wise"]
