"""Hypothesis strategies for random, well-formed TP programs (planner, runtime and engine tests).

Every activation is [rows, cols] so any statement can read any earlier tensor of its
place; weights are [cols, cols]. Statements on a chip read that chip's tensors and the
spine's; spine statements read the spine's only; folds sum one partial per chip.
"""

from __future__ import annotations

from hypothesis import strategies as st

from tprules.program.builder import ProgramBuilder

UNARY = ("neg", "exp", "relu", "silu", "gelu", "scale")
BINARY = ("add", "sub", "mul")


@st.composite
def tp_programs(draw, max_statements: int = 14, max_chips: int = 3, rows: int = 2, cols: int = 4,
                candidates: bool = True, relocations: bool = True) -> ProgramBuilder:
    chips = draw(st.integers(1, max_chips))
    b = ProgramBuilder(chips=chips)
    shape = [rows, cols]
    home_tensors: dict[object, list[str]] = {"spine": [b.tensor("x", shape, spine=True)]}
    for c in range(chips):
        home_tensors[c] = [b.tensor(f"in{c}", shape, chip=c)]
    count = draw(st.integers(2, max_statements))
    for i in range(count):
        name = f"s{i}"
        kind = draw(st.sampled_from(["unary", "binary", "matmul", "fold"] if chips > 1 else ["unary", "binary", "matmul"]))
        if kind == "fold":
            partials = [draw(st.sampled_from(home_tensors[c])) for c in range(chips)]
            if len(set(partials)) == chips:
                out = b.tensor(f"t{i}", shape, spine=True)
                b.fold(name, partials, out, f"ar{i}")
                home_tensors["spine"].append(out)
                continue
            kind = "unary"
        home = draw(st.sampled_from(["spine"] + list(range(chips))))
        pool = home_tensors[home] + (home_tensors["spine"] if home != "spine" else [])
        out = b.tensor(f"t{i}", shape, spine=True) if home == "spine" else b.tensor(f"t{i}", shape, chip=home)
        if kind == "unary":
            cls = draw(st.sampled_from(UNARY))
            attrs = {"factor": "0.5"} if cls == "scale" else {}
            b.stmt(name, cls, [draw(st.sampled_from(pool))], out, **attrs)
        elif kind == "binary":
            b.stmt(name, draw(st.sampled_from(BINARY)), [draw(st.sampled_from(pool)), draw(st.sampled_from(pool))], out)
        else:
            weight = b.tensor(f"w{i}", [cols, cols], spine=True) if home == "spine" else b.tensor(f"w{i}", [cols, cols], chip=home)
            b.stmt(name, "matmul", [draw(st.sampled_from(pool)), weight], out)
        home_tensors[home].append(out)
    statements = b.statements
    if relocations and chips > 1 and draw(st.booleans()):
        chosen = draw(st.lists(st.sampled_from(statements), min_size=1, max_size=3, unique=True))
        folds = {o for o, _ in b.facts["fold"]}
        chosen = [o for o in chosen if o not in folds]
        if chosen:
            b.section("moved", chosen, relocated_to=draw(st.integers(0, chips - 1)))
    if candidates:
        for j in range(draw(st.integers(0, 6))):
            members = draw(st.lists(st.sampled_from(statements), min_size=2, max_size=4, unique=True))
            b.candidate(f"f{j}", members)
    return b
