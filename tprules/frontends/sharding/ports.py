"""torch's style boundaries in the Sharder (sharder.py): each change of layout at a module's
port becomes the collective DTensor inserts.

A port (styles.py) names the layout torch takes a plain tensor to have (`given`:
DTensor.from_local) and the layout it redistributes to (`desired`). tprules knows every
value's real placement, so:

- a plain tensor whose real placement is not `given` is refused in one line: torch would
  reinterpret it (a whole tensor read as one chip's block, a block as the whole), running a
  program other than the model's; a DTensor (a style's `use_local_output=False`) is
  redistributed from its real placement, as DTensor does;
- Shard → Replicate is an all-gather, Partial → Replicate a fold (all-reduce), Partial →
  Shard(d) a reduce-scatter, Replicate → Shard(d) each chip's slice; Shard(d) → Shard(d')
  (an all-to-all) is refused.

Which value is a module's positional input i: a value read inside the module and written
outside it, whose whole shape is that of argument i in the model's own forward (`args`,
recorded by the driver); two arguments with ports and the same shape are refused as
ambiguous. A module's output is the value its last statement writes.
"""

from __future__ import annotations

from typing import Callable

from ..errors import ImportFailed
from ..graph import Graph, Statement, under
from .emit import Emitter
from .placement import REPLICATE, Partial, Placement, Replicate, Shard, plain
from .styles import Layout, Port, Style
from .table import entry


def describe(p: Placement) -> str:
    if isinstance(p, Replicate):
        return "replicated (Replicate())"
    if isinstance(p, Partial):
        return "a partial sum (Partial())"
    return f"split ({p})"


class Ports:
    """The Sharder's ports: where the plan's styles are torch's, each value entering or leaving
    a styled module is taken through the style's port (`entering`, `leaving`)."""

    def __init__(self, emit: Emitter, graph: Graph, styled: Callable[[str], list[tuple[str, Style]]],
                 args: dict[str, list[list]] | None):
        self.e = emit
        self.styled = styled
        self.args = args or {}  # module path → each call's whole shape of each positional argument (None: not a tensor)
        self.dtensor: set[str] = set()  # values torch holds as DTensors (redistributed from their real placement)
        self.left: dict[tuple[str, str], str] = {}  # (value, module it leaves) → what readers outside read
        self.entered: dict[tuple[str, str], str] = {}  # (value, module it enters) → what readers inside read
        self.outputs_of: dict[str, str] = {}  # styled module → its output (the value its last statement writes)
        self.ported = False  # whether any style of the plan is torch's
        for st in graph.stmts:
            for prefix, s in styled(st.module or ""):
                if s.ported:
                    self.ported = True
                    self.outputs_of[prefix] = st.writes

    def after(self, writes: str, reads: list[str]) -> None:
        """A statement over a DTensor computes a DTensor (its sharding propagation)."""
        if any(r in self.dtensor for r in reads):
            self.dtensor.add(writes)

    def kept(self, st: Statement, reads: list[str]) -> tuple[list[str], bool]:
        """A statement's reads, and whether it keeps a partial: a rowwise linear's bias added to
        its partial sum (`partial_bias`, the table's `bias` column)."""
        return self.partial_bias(reads, st.module or "") if entry(st.cls).bias else (reads, False)

    def unsplit(self, output: str, placement: Placement) -> str:
        return (f"the forward's output {output} would stay split over the chips ({placement}): torch would return "
                "each chip's block; no style of the plan gathers it")

    def leaving(self, value: str, reader: str) -> str:
        if self.e.tp == 1:
            return value  # on one chip every layout is the whole value
        name = value
        for prefix, s in self.styled(self.e.values[value].module or ""):  # innermost first
            if under(reader, prefix):
                break
            if not s.outputs or self.outputs_of.get(prefix) != value or s.outputs[0] is None:
                continue
            key = (value, prefix)
            if key not in self.left:
                self.left[key] = self._through(name, s.outputs[0], prefix, s, "output", in_place=True)
            name = self.left[key]
        return name

    def entering(self, value: str, reader: str) -> str:
        if self.e.tp == 1 or self.e.values[value].role == "weight":  # a folded constant may be a module's input too
            return value
        name = value
        for prefix, s in reversed(self.styled(reader)):  # outermost first
            if not s.inputs or under(self.e.values[name].module or "", prefix):
                continue
            index = self._input_index(prefix, s, name)
            port = None if index is None else s.inputs[index]
            if port is None:
                continue
            key = (name, prefix)
            if key not in self.entered:
                self.entered[key] = self._through(name, port, prefix, s, f"input {index}", in_place=False)
            name = self.entered[key]
        return name

    def _input_index(self, prefix: str, s: Style, value: str) -> int | None:
        """Which positional argument of the module `value` is (None: one the style leaves alone)."""
        shape = tuple(self.e.values[value].shape)
        calls = self.args.get(prefix, [])
        found = [i for i, port in enumerate(s.inputs) if port is not None
                 and any(i < len(shapes) and shapes[i] == shape for shapes in calls)]
        if len(found) > 1:
            raise ImportFailed(f"{self.e.arch}: {s.name} at {prefix}: its inputs {found[0]} and {found[1]} both have "
                               f"shape {list(shape)}; which one {value} is cannot be told from the trace")
        return found[0] if found else None

    def _through(self, name: str, port: Port, prefix: str, s: Style, what: str, in_place: bool) -> str:
        """`name` through one port: taken as its given layout (a plain tensor) or as it is (a
        DTensor), then redistributed to the desired layout."""
        p = self.e.place[name]
        if port.given is not None and name not in self.dtensor:
            taken = self._layout(port.given, name, prefix, s, what)
            if taken != p:
                raise ImportFailed(f"{self.e.arch}: {s.name} at {prefix}: torch takes its {what} {name}, a plain "
                                   f"tensor, to be {port.given} on {self.e.tp} chips, but it is {describe(p)} here; "
                                   "torch would run a program other than the model's (a layout the importer cannot "
                                   "import faithfully)")
        out = name if port.desired is None else self._redistribute(name, port.desired, prefix, s, what, in_place)
        if not in_place and out == name:
            return out  # the same value is read outside the module too, as it was (plain or not)
        if port.local:
            self.dtensor.discard(out)
        else:
            self.dtensor.add(out)
        return out

    def _layout(self, layout: Layout, name: str, prefix: str, s: Style, what: str) -> Placement:
        """A style's layout as the placement of value `name`."""
        if layout.dim is None:
            return REPLICATE
        shape = self.e.values[name].shape
        rank = len(shape)
        if not -rank <= layout.dim < rank:
            raise ImportFailed(f"{self.e.arch}: {s.name} at {prefix}: {layout} of its {what} {name}, which has "
                               f"{rank} axes {list(shape)}")
        axis = layout.dim % rank
        if shape[axis] % self.e.tp:
            raise ImportFailed(f"{self.e.arch}: {s.name} at {prefix}: {layout} of its {what} {name}: axis {axis} has "
                               f"{shape[axis]}, which --tp {self.e.tp} does not divide")
        return Shard((plain(axis, self.e.tp, shape[axis]),))

    def _redistribute(self, name: str, layout: Layout, prefix: str, s: Style, what: str, in_place: bool) -> str:
        """The collective (or slices) taking `name` from its real placement to `layout`."""
        p = self.e.place[name]
        want = self._layout(layout, name, prefix, s, what)
        if p == want:
            return name
        if isinstance(want, Replicate) and isinstance(p, Partial):
            self.e.fold(name)  # in place: the spine's sum is the value itself
            return name
        if isinstance(want, Replicate) and isinstance(p, Shard):
            return self.e.gather(name, prefix, s, out=None if in_place else self.e.named("", name, "_gathered"), what=what)
        assert isinstance(want, Shard)
        axis = want.splits[0].axis
        if isinstance(p, Partial):
            return self.e.reduce_scatter(name, axis, prefix)
        if isinstance(p, Replicate):
            return self.e.split(name, prefix, s, axis)
        raise ImportFailed(f"{self.e.arch}: {s.name} at {prefix}: its {what} {name} is {describe(p)}; {layout} "
                           "needs an all-to-all, which tprules does not import")

    def partial_bias(self, reads: list[str], module: str) -> tuple[list[str], bool]:
        """A rowwise linear's bias added to its partial sum: DTensor keeps the sum partial
        through the add (the bias a partial too: each chip adds 1 / N of it), so that the
        output layout's collective comes after it (a reduce-scatter stays one). The reads,
        and whether the add keeps the partial."""
        places = [self.e.place[r] for r in reads]
        rowwise = next((s for _, s in self.styled(module) if s.ported), None)
        if rowwise is None or rowwise.weight != "rowwise" or len(reads) != 2 or \
                sum(isinstance(p, Partial) for p in places) != 1:
            return reads, False
        bias = next(r for r, p in zip(reads, places) if not isinstance(p, Partial))
        if not isinstance(self.e.place[bias], Replicate) or self.e.values[bias].role != "weight":
            return reads, False
        module_of = next(prefix for prefix, s in self.styled(module) if s is rowwise)
        shared = self.e.share(bias, module_of, rowwise)
        return [shared if r == bias else r for r in reads], True


__all__ = ["Ports", "describe"]
