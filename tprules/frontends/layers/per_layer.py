"""A decode step's position values computed in each decoder layer that reads them.

transformers computes the causal mask and the rotary rows from the position once, before
the layers, and hands them to every layer. Imported so, those few spine statements are read
by every layer's attention on every chip, and everything about them spans the layers:

- a candidate of one of them with its reader in layer k holds every layer before k between
  its two members (refused as a `cycle`; the 405B at TP 16: 2,502 such candidates, whose
  `escapes` walked up to 130,000 statements each: `check` 326 s);
- the planner grows one group of the rotary rows and every layer's views of them, a layer a
  round, each round asked again over a group spanning more layers (`plan` 234 s).

Here each layer that reads them gets its own copy of the statements it needs (the position
cone: statements before the layers computed from the position and folded constants only),
named under the layer (`model.layers.3.where`, its module the layer's) and placed before the
layer's first statement, as a serving engine computes them in each layer's attention
kernels; an original goes when nothing but the layers read it. A program whose layers share
no such value (one layer) is left as it is.
"""

from __future__ import annotations

import numpy as np

from ...program.candidates import candidates
from ...program.facts import Facts, strings

LAYER = r"^(?P<path>(?:.*\.)?layers\.\d+)(?:\.|$)"
STATEMENT_RELS = ("op", "reads", "writes", "attr")  # column 0 a statement, in program order
TENSOR_RELS = ("tensor", "shape", "spine", "placed")  # column 0 a tensor


def per_layer_positions(built, leaves: set[str]) -> bool:
    """Copy the statements computed from `leaves` alone (the position input and folded
    constants), outside the layers and read by two layers or more, into each layer that
    reads them; the candidates are made again. Returns whether anything was copied."""
    facts = built.facts
    layer_of = _layers(facts)
    found = _cone(facts, leaves, layer_of)
    if found is None:
        return False
    copies, need, path, keep = found
    renamed = {}
    for layer, xs in need.items():
        for x in xs:
            renamed[x, layer] = f"{path[layer]}.{x}"
    tensors = _writes_of(facts, set(copies))
    new_names = set(renamed.values()) | {f"{path[layer]}.{tensors[x]}" for x, layer in renamed}
    if _taken(facts, new_names):
        return False
    gone = set(copies) - keep
    out = Facts()
    for rel in facts:
        cols = facts.columns(rel)
        if not cols or not len(cols[0]):
            continue
        if rel in STATEMENT_RELS:
            cols = _statements(rel, cols, copies, need, path, tensors, gone, layer_of)
        elif rel in TENSOR_RELS:
            cols = _tensors(cols, copies, need, path, tensors, {tensors[x] for x in gone})
        out.set(rel, cols)
    built.facts = out
    built.statements, built.tensors = out.count("op"), out.count("tensor")
    built.candidates = candidates(out)
    return True


def _layers(facts: Facts) -> dict[str, tuple[int, str]]:
    """statement → (its layer's number, the layer's module path), for statements in a layer.
    The number is the path's, in order of first appearance: two stacks of layers
    (HRM's `L_module.layers.0` and `H_module.layers.0`) are different layers."""
    import pyarrow.compute as pc

    modules = pc.equal(facts.column("attr", 1), "module")
    names = pc.filter(facts.column("attr", 0), modules)
    found = pc.extract_regex(pc.filter(facts.column("attr", 2), modules), LAYER)
    inside = pc.is_valid(found)
    names = pc.filter(names, inside).to_pylist()
    paths = pc.struct_field(pc.filter(found, inside), [0]).to_pylist()
    number: dict[str, int] = {}
    return {o: (number.setdefault(p, len(number)), p) for o, p in zip(names, paths)}


def _cone(facts: Facts, leaves: set[str], layer_of: dict[str, tuple[int, str]]):
    """(the cone's statements in program order, layer → the ones it needs, layer → its
    path, the ones kept as they are) or None when no two layers read the cone."""
    import pyarrow.compute as pc

    ops = facts.column("op", 0).to_pylist()
    outside = [o for o in ops if o not in layer_of]
    if not outside:
        return None
    at = pc.is_in(facts.column("reads", 0), value_set=strings(outside))
    reads: dict[str, list[str]] = {}
    for o, t in zip(pc.filter(facts.column("reads", 0), at).to_pylist(),
                    pc.filter(facts.column("reads", 2), at).to_pylist()):
        reads.setdefault(o, []).append(t)
    writes = _writes_of(facts, set(outside))
    cone: list[str] = []
    allowed = set(leaves)
    for o in outside:
        if all(t in allowed for t in reads.get(o, ())):
            cone.append(o)
            allowed.add(writes[o])
    if not cone:
        return None
    writer = {writes[o]: o for o in cone}
    at = pc.is_in(facts.column("reads", 2), value_set=strings(list(writer)))
    direct: dict[int, set[str]] = {}
    path: dict[int, str] = {}
    kept: set[str] = set()
    cone_set = set(cone)
    for o, t in zip(pc.filter(facts.column("reads", 0), at).to_pylist(),
                    pc.filter(facts.column("reads", 2), at).to_pylist()):
        if o in layer_of:
            n, p = layer_of[o]
            direct.setdefault(n, set()).add(writer[t])
            path[n] = p
        elif o not in cone_set:
            kept.add(writer[t])
    if len(direct) < 2:
        return None

    def closure(xs: set[str]) -> set[str]:
        stack, seen = list(xs), set()
        while stack:
            x = stack.pop()
            if x not in seen:
                seen.add(x)
                stack.extend(writer[t] for t in reads.get(x, ()) if t in writer)
        return seen

    need = {n: closure(xs) for n, xs in sorted(direct.items())}
    copies = [o for o in cone if any(o in xs for xs in need.values())]
    return copies, need, path, closure(kept)


def _writes_of(facts: Facts, statements: set[str]) -> dict[str, str]:
    import pyarrow.compute as pc

    at = pc.is_in(facts.column("writes", 0), value_set=strings(sorted(statements)))
    return dict(zip(pc.filter(facts.column("writes", 0), at).to_pylist(),
                    pc.filter(facts.column("writes", 1), at).to_pylist()))


def _taken(facts: Facts, names: set[str]) -> bool:
    """Whether a copy's name is a statement's or a tensor's already."""
    import pyarrow.compute as pc

    given = strings(sorted(names))
    return any(pc.any(pc.is_in(facts.column(rel, c), value_set=given)).as_py()
               for rel, c in (("op", 0), ("tensor", 0)) if facts.count(rel))


def _row_layers(col, layer_of: dict[str, tuple[int, str]]) -> np.ndarray:
    """Each row's statement's layer number, -1 outside the layers."""
    import pyarrow.compute as pc

    numbers = np.array([n for n, _ in layer_of.values()] + [-1], dtype=np.int64)
    at = pc.fill_null(pc.index_in(col, value_set=strings(list(layer_of))), len(layer_of))
    return numbers[at.to_numpy(zero_copy_only=False)]


def _rows_of(cols, names: set[str]) -> list[tuple]:
    """The rows whose column 0 is one of `names`, in order, as tuples of str."""
    import pyarrow.compute as pc

    at = pc.is_in(cols[0], value_set=strings(sorted(names)))
    return list(zip(*(pc.filter(c, at).to_pylist() for c in cols)))


def _spliced(cols, keep: np.ndarray, inserts: list[tuple[int, list[tuple]]]) -> list:
    """`cols`' rows where `keep`, with each insert's rows before the row at its position."""
    import pyarrow as pa

    pieces: list[list] = [[] for _ in cols]
    start = 0
    for at, made in sorted(inserts, key=lambda insert: insert[0]) + [(len(keep), [])]:
        part = pa.array(np.flatnonzero(keep[start:at]) + start, pa.int64())
        for c, col in enumerate(cols):
            pieces[c].append(col.take(part))
            if made:
                pieces[c].append(strings([str(r[c]) for r in made]))
        start = at
    return [pa.chunked_array(p, pa.string()).combine_chunks() for p in pieces]


def _statements(rel, cols, copies, need, path, tensors, gone, layer_of):
    """A statement relation: the originals that go left out, each layer's copies before its
    first row, the layers' reads of the cone renamed to their own copies."""
    import pyarrow.compute as pc

    layers = _row_layers(cols[0], layer_of)
    keep = ~pc.is_in(cols[0], value_set=strings(sorted(gone))).to_numpy(zero_copy_only=False)
    cone_tensors = {tensors[x]: x for x in copies}
    if rel == "reads":  # a layer's read of the cone: its own copy
        hit = pc.is_in(cols[2], value_set=strings(list(cone_tensors))).to_numpy(zero_copy_only=False) & (layers >= 0)
        at = np.flatnonzero(hit)
        readers, ts = cols[0].take(at).to_pylist(), cols[2].take(at).to_pylist()
        renamed = strings([f"{layer_of[o][1]}.{t}" for o, t in zip(readers, ts)])
        cols = [cols[0], cols[1], pc.replace_with_mask(cols[2], hit, renamed)]
    original = _rows_of(cols, set(copies))
    seen, first = np.unique(layers, return_index=True)
    inserts = []
    for n, at in zip(seen.tolist(), first.tolist()):
        if n in need:
            inserts.append((at, [_copied(rel, row, path[n], cone_tensors) for x in copies if x in need[n]
                                 for row in original if row[0] == x]))
    return _spliced(cols, keep, inserts)


def _copied(rel: str, row: tuple, path: str, cone_tensors: dict) -> tuple:
    """One row of a statement's copy in a layer: its name, what it reads of the cone and
    writes, and its module renamed under the layer."""
    row = (f"{path}.{row[0]}",) + row[1:]
    if rel == "reads" and row[2] in cone_tensors:
        row = (row[0], row[1], f"{path}.{row[2]}")
    elif rel == "writes":
        row = (row[0], f"{path}.{row[1]}")
    elif rel == "attr" and row[1] == "module":
        row = (row[0], row[1], path)
    return row


def _tensors(cols, copies, need, path, tensors, gone):
    """A tensor relation: the copied tensors' rows, once for each layer's copy, where the
    first of them was; the originals that go left out."""
    import pyarrow.compute as pc

    copied = [tensors[x] for x in copies]
    original = _rows_of(cols, set(copied))
    if not original:
        return cols
    at = int(np.argmax(pc.is_in(cols[0], value_set=strings(copied)).to_numpy(zero_copy_only=False)))
    keep = ~pc.is_in(cols[0], value_set=strings(sorted(gone))).to_numpy(zero_copy_only=False)
    made = [(f"{path[n]}.{r[0]}",) + tuple(r[1:]) for n in sorted(need) for x in copies if x in need[n]
            for r in original if r[0] == tensors[x]]
    return _spliced(cols, keep, [(at, made)])


__all__ = ["per_layer_positions"]
