"""Stamp every decoder layer from the layers traced once per kind (layers/kinds.py).

The reduced trace holds each kind's first layer, then each kind's second layer. Its TP
program (sharding/sharder.py) is cut into segments: before the layers (PRE), each traced layer, after
them (POST); every fact row is tagged with the segment that added it. The full program is
then, relation by relation, the reduced one with each sweep over the traced layers
replaced by a sweep over all layers: layer i is its kind's first traced layer if it is
that kind's first layer, else its kind's second traced layer, with every name renamed:

- a name from an fx node (`mm_2`, `view_19@3`) gets the number fx gives that node in a
  full trace: fx numbers the nodes of one base name (`mm`) in program order, dead ones
  too (erased after they were named: trace.py records them), so the number shifts by the
  count of that base in the layers between;
- a name made from another, by a lowering (`sum_1_part0`, `mul_3__neg`: TaggedGraph) or
  by the sharding (`allreduce_view_19`, `share_x`, `x_split`: Sharder.derived), is its
  source's new name with the same prefix and suffix;
- a weight or module path (`model.layers.1.mlp.up_proj.weight`) gets the layer's index;
- the previous layer's output (the one value a layer passes on) is layer i-1's;
- a constant folded in a kind's first layer (the RoPE table, a sliding-window mask), or a
  statement a later layer shares with it (the same statement on the same constants),
  keeps that layer's name.

Whatever does not fit that picture (a node between two layers, a layer reading a layer
other than the one before it, two layers of one kind with different node counts) raises
`CannotStamp`, and the importer traces every layer instead.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import numpy as np

from ...program.facts import Facts, strings
from ..graph import INPUT, OUTPUT, Graph
from ..sharding.sharder import Sharder
from ..source.trace import erased_nodes
from .kinds import LayerKinds

PRE = -1
_NAME = re.compile(r"^(.*)_(\d+)$")
_NAME_COLUMNS = {"op": (0,), "reads": (0, 2), "writes": (0, 1), "tensor": (0,), "shape": (0,), "attr": (0,),
                 "placed": (0,), "spine": (0,), "fold": (0, 1), "collective": (0,)}
_NAMED_ATTRS = ("module", "folded")


class CannotStamp(Exception):
    pass


def split_name(name: str) -> tuple[str, int]:
    m = _NAME.match(name)
    return (m.group(1), int(m.group(2))) if m else (name, 0)


def join_name(base: str, n: int) -> str:
    return base if n == 0 else f"{base}_{n}"


class Segments:
    """The segment of every fx node of the reduced trace, and each segment's node names."""

    def __init__(self, program, kinds: LayerKinds):
        self.kinds = kinds
        self.post = len(kinds.order)
        rx = re.compile(rf"^{re.escape(kinds.path)}\.(\d+)(?:\.|$)")
        nodes = [n for n in program.graph_module.graph.nodes if n.op != "placeholder"]
        layer = [_layer_of(n, rx) for n in nodes]
        known = [(i, q) for i, q in enumerate(layer) if q is not None]
        if [q for j, (_, q) in enumerate(known) if j == 0 or known[j - 1][1] != q] != list(range(self.post)):
            raise CannotStamp("the traced layers' nodes are not one run per layer")
        first, last = known[0][0], known[-1][0]
        self.of: dict[str, int] = {}
        self.count: dict[int, Counter] = {}
        prev = None
        for i, n in enumerate(nodes):
            q = layer[i]
            if q is None:
                if i < first:
                    q = PRE
                elif i > last:
                    q = self.post
                else:
                    nxt = next(x for x in layer[i + 1:] if x is not None)
                    if nxt != prev:
                        raise CannotStamp(f"node {n.name} lies between two layers")
                    q = prev
            else:
                prev = q
            self.of[n.name] = q
        for name, q in self.of.items():
            self.count.setdefault(q, Counter())[split_name(name)[0]] += 1
        self._count_erased(erased_nodes(program), rx)
        k = kinds.kinds
        for q in range(k, self.post):  # each kind's second layer has the first one's nodes
            kind = kinds.kind[kinds.order[q]]
            if self.count.get(q) != self.count.get(kind):
                raise CannotStamp(f"layers {kinds.order[kind]} and {kinds.order[q]} are of one kind but trace "
                                  "to different nodes")

    def _count_erased(self, erased, rx) -> None:
        """Count each node the trace erased in its segment: fx numbered it among its base's
        nodes. One outside the layers counts before them or after them by its number."""
        numbers: dict[str, list[tuple[int, int]]] = {}
        for name, q in self.of.items():
            base, n = split_name(name)
            numbers.setdefault(base, []).append((n, q))
        for node in erased:
            base, n = split_name(node.name)
            layer = _layer_of(node, rx)
            if layer is None:
                inside = [m for m, s in numbers.get(base, []) if s not in (PRE, self.post)]
                if inside and min(inside) < n < max(inside):
                    raise CannotStamp(f"the trace erased {node.name}, which lies among the layers' nodes")
                layer = PRE if not inside or n < min(inside) else self.post
            elif layer >= self.post:
                raise CannotStamp(f"the trace erased {node.name} of layer {layer}")
            self.count.setdefault(layer, Counter())[base] += 1


def _layer_of(n, rx) -> int | None:
    stack = n.meta.get("nn_module_stack")
    if not stack:
        return None
    path = list(stack.values())[-1][0].replace("L['self'].", "").replace("L__self__.", "")
    m = rx.match(path)
    return int(m.group(1)) if m else None


class TaggedGraph(Graph):
    """A Graph that remembers the segment in which each value was first added, and the fx
    node each value a lowering names after its node (`mul_3__neg`, `sum_1_part0`) was made
    from: (prefix, node, suffix), as the Sharder keeps its own names' (`derived`)."""

    def __init__(self, segments: Segments):
        super().__init__()
        self.segments = segments
        self.now = PRE
        self.node = ""  # the fx node being lowered
        self.segment: dict[str, int] = {}
        self.derived: dict[str, tuple[str, str, str]] = {}
        self.shared: set[str] = set()  # a layer's values that a later layer's same statement reads

    def add_value(self, value) -> str:
        name = value.name
        if name not in self.values:
            self.segment[name] = self.now
            node = self.node
            base = name.split("__", 1)[0]  # a part another node's lowering writes (`sort_1__rank`)
            if base != name and base in self.segments.of and name not in self.segments.of:
                self.derived[name] = ("", base, name[len(base):])
            elif node and name != node and name.startswith(node + "_") and name not in self.segments.of:
                self.derived[name] = ("", node, name[len(node):])
        return super().add_value(value)

    def segment_of(self, st) -> int:
        """The segment of a statement: its fx node's, or (a lowering's part) its value's."""
        s = self.segments.of.get(st.name)
        return s if s is not None else self.segment.get(st.writes, PRE)


def tag_lowerer(lowerer, segments: Segments) -> TaggedGraph:
    graph = TaggedGraph(segments)
    lowerer.graph = graph

    def at_node(n):
        graph.now = segments.of.get(n.name, graph.now)
        graph.node = n.name

    def reused(value):
        if graph.segment.get(value, PRE) not in (PRE, graph.now):
            graph.shared.add(value)

    lowerer.at_node = at_node
    lowerer.reused = reused
    return graph


class TaggingSharder(Sharder):
    """The Sharder, tagging every fact row with the segment that added it."""

    g: TaggedGraph

    def __init__(self, graph: TaggedGraph, tp: int, arch: str, styles=None):
        super().__init__(graph, tp, arch, styles)
        self.tags: dict[str, list[int]] = {rel: [] for rel in self.b.facts}

    def _mark(self, segment: int) -> None:
        for rel in self.b.facts:
            rows, tags = self.b.facts[rel], self.tags.setdefault(rel, [])
            tags.extend([segment] * (len(rows) - len(tags)))

    def run(self, weights, kinds=None, caches=frozenset()):
        self._mark(PRE)
        out = super().run(weights, kinds, caches)
        self._mark(self.g.segments.post)
        return out

    def _input(self, v, placement) -> None:
        super()._input(v, placement)
        self._mark(self.g.segment.get(v.name, PRE))

    def _moved(self, rel: str, order: list[int]) -> None:
        tags = self.tags[rel]
        self.tags[rel] = [tags[i] for i in order]

    def _statement(self, st) -> None:
        super()._statement(st)
        self._mark(self.g.segment_of(st))


class Stamper:
    """The full program's facts from the reduced trace's tagged TP program."""

    def __init__(self, graph: TaggedGraph, sharder: TaggingSharder, kinds: LayerKinds):
        self.g = graph
        self.seg = graph.segments
        self.kinds = kinds
        self.sharder = sharder
        self.k = kinds.kinds
        self.post = self.seg.post
        self.layers = kinds.count
        self.path_rx = re.compile(rf"^{re.escape(kinds.path)}\.(\d+)(\.|$)")
        second = {kinds.kind[kinds.order[q]]: q for q in range(self.k, self.post)}
        # the traced layer each layer is stamped from
        self.template = [kind if i == kinds.first(kind) else second[kind] for i, kind in enumerate(kinds.kind)]
        self._offsets()
        self.export = self._exports()

    # -- fx numbering -----------------------------------------------------------------

    def _offsets(self) -> None:
        """reduced[q][b]: nodes of base b before traced layer q; full[i][b]: before layer i."""
        count = self.seg.count
        pre = count.get(PRE, Counter())

        def prefix(sequence):
            out, run = [], Counter(pre)
            for q in sequence:
                out.append(Counter(run))
                run.update(count.get(q, Counter()))
            out.append(run)
            return out

        self.reduced = prefix(range(self.post))
        self.full = prefix(self.template)

    def shifted(self, name: str, q: int, i: int) -> str:
        """The fx name in a full trace, as layer i (or POST) of a node of traced segment q."""
        base, n = split_name(name)
        return join_name(base, n - self.reduced[q][base] + self.full[i][base])

    def _exports(self) -> dict[int, str]:
        """Each traced layer's one output: the activation it writes that later segments read."""
        out: dict[int, set[str]] = {}
        for st in self.g.stmts:
            s = self.g.segment_of(st)
            for r in st.reads:
                v = self.g.values.get(r)
                if v is None or v.role != "activation":
                    continue
                src = self.g.segment.get(r, PRE)
                if src != s and src not in (PRE, self.post) and r not in self.g.shared:
                    if s != src + 1:
                        raise CannotStamp(f"{st.name} (traced layer {s}) reads {r} of traced layer {src}")
                    out.setdefault(src, set()).add(r)
        exports = {}
        for q in range(self.post):
            names = out.get(q, set())
            if len(names) != 1:
                raise CannotStamp(f"traced layer {q} passes on {len(names)} values")
            exports[q] = names.pop()
        return exports

    # -- renaming ----------------------------------------------------------------------

    def whole(self, name: str, q: int, i: int) -> str:
        """The full program's name for a whole value, statement or module path of template q
        stamped as layer i (q = PRE: itself; q = POST: after all layers)."""
        if q == PRE or name in (INPUT, OUTPUT):
            return name
        m = self.path_rx.match(name)
        if m:  # a weight or a module path
            p = int(m.group(1))
            if p != q:
                raise CannotStamp(f"traced layer {q} names {name}")
            return f"{self.kinds.path}.{i}{name[m.end(1):]}"
        s = self.seg.of.get(name)
        if s is None and name in self.g.derived:  # a lowering's part (`mul_3__neg`): its own value's segment
            s = self.g.segment.get(name)
        if s is None:
            made = self.sharder.derived.get(name)
            if made is not None:  # a name the sharding made from another (`allreduce_add_7`, `share_x`)
                prefix, source, suffix = made
                return prefix + self.whole(source, q, i) + suffix
            return name  # not a node's: `(top)`, a lowering's constant
        if s == PRE:
            return name
        if s == q:
            if name in self.g.derived:
                prefix, node, suffix = self.g.derived[name]
                return prefix + self.shifted(node, q, i) + suffix
            return self.shifted(name, q, i)
        v = self.g.values.get(name)
        if s == q - 1 and self.export.get(s) == name:  # the previous layer's output
            t = self.template[i - 1]
            return self.whole(self.export[t], t, i - 1)
        if s < self.k and v is not None and (v.role == "folded" or name in self.g.shared):
            return self.whole(name, s, self.kinds.first(s))  # folded or computed once, in a kind's first layer
        raise CannotStamp(f"traced layer {q} reads {name} of traced layer {s}")

    def token(self, tok: str, q: int, i: int, names: dict[str, str]) -> str:
        whole, at, chip = tok.partition("@")
        full = names.get(whole)
        if full is None:
            full = names[whole] = ",".join(self.whole(w, q, i) for w in whole.split(","))
        return full + at + chip

    # -- the full program --------------------------------------------------------------

    def facts(self, progress=None) -> Facts:
        """The full program's facts, as columns (its candidates are not among them)."""
        import pyarrow as pa

        reduced = self.sharder.b.facts
        out = Facts()
        relations = [(rel, reduced[rel]) for rel in reduced if rel != "member" and reduced[rel]]
        layout = {rel: self._parts(rows, self.sharder.tags[rel]) for rel, rows in relations}
        # every template's names, numbered once; each (template, layer) renames them once
        tokens: dict[int, dict[tuple[str, bool], int]] = {}
        columns = {}
        for rel, _ in relations:
            arity = reduced.arity(rel)
            named = _NAME_COLUMNS.get(rel, ())
            for t, rs in {id(rs): (t, rs) for t, _, rs in layout[rel]}.values():
                table = tokens.setdefault(t, {})
                for c in range(arity):
                    if t == PRE or not (c in named or (rel == "attr" and c == 2)):
                        col = np.empty(len(rs), dtype=object)
                        col[:] = [str(r[c]) for r in rs]
                        columns[rel, c, id(rs)] = ("raw", strings(col))
                    else:
                        flags = [True] * len(rs) if c in named else [r[1] in _NAMED_ATTRS for r in rs]
                        ids = [table.setdefault((str(r[c]), f), len(table)) for r, f in zip(rs, flags)]
                        columns[rel, c, id(rs)] = ("ids", pa.array(np.array(ids, dtype=np.int64)))
        if progress is not None:
            progress.phase("stamp layers", self.layers + 2)
        names: dict[tuple[int, int], Any] = {}  # pyarrow string arrays
        for t, i in sorted({(t, i) for parts in layout.values() for t, i, _ in parts if t != PRE}):
            table = tokens[t]
            memo: dict[str, str] = {}
            full = np.empty(len(table), dtype=object)
            full[:] = [self.token(tok, t, i, memo) if flag else tok for tok, flag in table]
            names[t, i] = strings(full)
            if progress is not None and i < self.layers and t == self.template[i]:
                progress.advance()
        for rel, _ in relations:
            arity = reduced.arity(rel)
            cols = []
            for c in range(arity):
                pieces = []
                for t, i, rs in layout[rel]:
                    how, col = columns[rel, c, id(rs)]
                    pieces.append(col if how == "raw" else names[t, i].take(col))
                cols.append(pa.concat_arrays(pieces))
            out.set(rel, cols)
        if progress is not None:
            progress.advance(2)
        return out

    def _parts(self, rows: list[tuple], tags: list[int]) -> list[tuple[int, int, list[tuple]]]:
        """(template, layer, rows) in the full program's order, for one relation."""
        seen: dict[tuple, int] = {}
        for row, tag in zip(rows, tags):
            seen.setdefault(row, tag)
        runs: list[tuple[int, list[tuple]]] = []
        for row, tag in seen.items():
            if runs and runs[-1][0] == tag:
                runs[-1][1].append(row)
            else:
                runs.append((tag, [row]))
        parts: list[tuple[int, int, list[tuple]]] = []
        j = 0
        while j < len(runs):
            tag, rs = runs[j]
            if tag == PRE:
                parts.append((PRE, PRE, rs))
                j += 1
            elif tag == self.post:
                parts.append((self.post, self.layers, rs))
                j += 1
            else:  # a sweep over the traced layers, in order
                sweep: dict[int, list[tuple]] = {}
                while j < len(runs) and runs[j][0] not in (PRE, self.post) and all(runs[j][0] > t for t in sweep):
                    sweep[runs[j][0]] = runs[j][1]
                    j += 1
                parts.extend((self.template[i], i, sweep[self.template[i]]) for i in range(self.layers)
                             if self.template[i] in sweep)
        return parts

    # -- what the importer reports and reads ---------------------------------------------

    def instances(self, name: str) -> list[tuple[str, int, int]]:
        """(full name, template, layer) of each copy of a reduced value in the full program."""
        s = self.g.segment.get(name, PRE)
        if s == PRE:
            return [(name, PRE, PRE)]
        if s == self.post:
            return [(self.whole(name, s, self.layers), s, self.layers)]
        return [(self.whole(name, s, i), s, i) for i in range(self.layers) if self.template[i] == s]
