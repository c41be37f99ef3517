"""The fact relations of SPEC §2, and the inputs tprules computes for the rules.

Rule files declare these relations too (`rules/schema.dl`); `lint` checks that every such
declaration agrees with this table, so facts load with the same types everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ops import Ops


@dataclass(frozen=True)
class Relation:
    name: str
    columns: tuple[tuple[str, str], ...]  # (column name, number|symbol)
    meaning: str

    @property
    def arity(self) -> int:
        return len(self.columns)

    @property
    def types(self) -> tuple[str, ...]:
        return tuple(t for _, t in self.columns)


def _rel(name: str, spec: str, meaning: str) -> Relation:
    cols = tuple(tuple(c.strip().split(":")) for c in spec.split(",")) if spec else ()
    return Relation(name, cols, meaning)  # type: ignore[arg-type]


PROGRAM = {r.name: r for r in [
    _rel("op", "o:symbol,class:symbol", "statement o is of class class"),
    _rel("reads", "o:symbol,i:number,t:symbol", "operand i of o is tensor t"),
    _rel("writes", "o:symbol,t:symbol", "o writes tensor t"),
    _rel("tensor", "t:symbol,dtype:symbol", "t has dtype dtype"),
    _rel("shape", "t:symbol,axis:number,size:number", "size of axis axis of t"),
    _rel("attr", "o:symbol,key:symbol,value:symbol", "a statement parameter"),
    _rel("chips", "n:number", "the program runs on chips 0..n-1"),
    _rel("placed", "t:symbol,chip:number", "t is chip chip's own tensor"),
    _rel("spine", "t:symbol", "t is replicated on every chip"),
    _rel("fold", "o:symbol,collective:symbol", "o is the fold of that collective"),
    _rel("collective", "c:symbol,kind:symbol",
         "all_reduce (its fold is a sum), all_gather (a cat) or reduce_scatter (a sum read by one slice per chip); "
         "absent: all_reduce"),
    _rel("section", "s:symbol,o:symbol", "statement o belongs to section s"),
    _rel("relocated", "s:symbol,chip:number", "section s runs whole on chip chip"),
    _rel("member", "f:symbol,o:symbol", "candidate fusion f holds statement o"),
]}

SHIM = {r.name: r for r in [
    _rel("shim", "s:symbol", "a base chip and its configuration"),
    _rel("supports", "s:symbol,class:symbol,level:symbol", "fused, alone or none"),
    _rel("limit", "s:symbol,key:symbol,value:number", "max_members, max_inputs, max_matmuls, min_collective_block"),
    _rel("quantized", "s:symbol,class:symbol,i:number,format:symbol", "operand i of class is read quantized"),
    _rel("collective_kernel", "s:symbol,pattern:symbol",
         "the shim builds this collective kernel: all_gather_matmul, matmul_reduce_scatter or all_reduce_norm"),
    # the project's extension of SPEC §2 (docs/reasons.md#too_many_members): members that
    # lower to views are index arithmetic in their reader, and a member budget counts code
    _rel("views", "s:symbol,class:symbol", "base chip s lowers a member of class as a view of its operand"),
    _rel("registry", "class:symbol,kind:symbol,operands:number", "the class registry (SPEC §4); operands 0 = any"),
]}

# Inputs that tprules computes before evaluating; `tprules export` writes them for Soufflé.
COMPUTED = {r.name: r for r in [
    _rel("target", "s:symbol", "the shim being asked (from --shim or the default)"),
    _rel("topo", "o:symbol,n:number", "a topological order of the data flow, program order first"),
    # A base chip written in Python (tprules.shim) answers for itself; its answers become facts.
    _rel("base_answers", "s:symbol", "base chip s answers fusions itself, not by the base rules"),
    _rel("base_refusal", "f:symbol,reason:symbol", "the Python base chip refuses fusion f for reason"),
]}

SPEC = {**PROGRAM, **SHIM, **COMPUTED}

DTYPES = ("f32", "f16", "bf16", "i8", "i32", "i64")  # SPEC §2
LEVELS = ("fused", "alone", "none")
COLLECTIVES = {"all_reduce": Ops.SUM, "all_gather": Ops.CAT, "reduce_scatter": Ops.SUM}  # kind → the class of its fold (SPEC §1)
LIMIT_KEYS = ("max_members", "max_inputs", "max_matmuls", "min_collective_block")
# The collective kernels a shim may declare (SPEC §3 "Collective kernels"), each with the
# collective kind whose fold it holds.
PATTERNS = {"all_gather_matmul": "all_gather", "matmul_reduce_scatter": "reduce_scatter", "all_reduce_norm": "all_reduce"}
