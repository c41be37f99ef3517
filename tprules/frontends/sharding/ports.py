"""The plan's module boundaries in the Sharder (sharder.py): each change of layout at a
style's port (styles.py) becomes the collective DTensor inserts.

tprules knows every value's real placement, so:

- a port `taken` (torch's: DTensor.from_local) refuses a plain tensor whose real placement
  is not `given`, in one line: torch would reinterpret it (a whole tensor read as one chip's
  block, a block as the whole), running a program other than the model's; a DTensor (a
  style's `use_local_output=False`) is redistributed from its real placement, as DTensor does;
- a port not taken (a transformers hook, written for `given`) acts on each value crossing
  the boundary in that layout, and leaves any other as it is; a partial entering where a
  replicated value is given is folded first;
- Shard → Replicate is an all-gather, Partial → Replicate a fold (all-reduce), Partial →
  Shard(d) a reduce-scatter, Replicate → Shard(d) each chip's slice, Replicate → Partial
  each chip's 1 / N share; Shard(d) → Shard(d') (an all-to-all) is refused.

Which values cross a taken port: a module's positional input i is a value read inside the
module and written outside it whose whole shape is that of argument i in the model's own
forward (`args`, recorded by the driver; two arguments with ports and the same shape are
refused as ambiguous); its output is the value its last statement writes. A hook's port
sees every value crossing the boundary (transformers' hooks wrap the forward, and the
importer may share a statement between two modules).

Besides the ports: the routing of an expert-parallel module (`dispatch`, dispatch.py), a
partial kept through a module's linear statements (`linear`), a rowwise linear's bias added
to its partial sum (`partial_bias`), and the whole twin of a value a split-input module
computed, for a reader outside it.
"""

from __future__ import annotations

from typing import Callable

from ...ops import ELEMENTWISE, LAYOUT
from ..errors import ImportFailed
from ..graph import Graph, Statement, under
from .dispatch import Dispatch
from .emit import Emitter
from .placement import REPLICATE, Partial, Placement, Replicate, Shard, plain
from .styles import Layout, Port, Style
from .table import entry, partial_through


def describe(p: Placement) -> str:
    if isinstance(p, Replicate):
        return "replicated (Replicate())"
    if isinstance(p, Partial):
        return "a partial sum (Partial())"
    return f"split ({p})"


def _of(layout: Layout, p: Placement) -> bool:
    """Whether placement `p` is of the layout's kind (a hook's Shard(d) takes any split)."""
    if layout.partial:
        return isinstance(p, Partial)
    return isinstance(p, Replicate) if layout.dim is None else isinstance(p, Shard)


class Ports:
    """The Sharder's boundaries: each value entering or leaving a styled module taken through
    the style's ports (`entering`, `leaving`), the experts' routing (`dispatch`), and the
    statements a style keeps partial (`kept`)."""

    def __init__(self, emit: Emitter, graph: Graph, styled: Callable[[str], list[tuple[str, Style]]],
                 dispatch: Dispatch, writers: dict[str, Statement], args: dict[str, list[list]] | None):
        self.e = emit
        self.styled = styled
        self.dispatch = dispatch
        self.writers = writers  # value → the statement that writes it
        self.args = args or {}  # module path → each call's whole shape of each positional argument (None: not a tensor)
        self.dtensor: set[str] = set()  # values torch holds as DTensors (redistributed from their real placement)
        self.left: dict[tuple[str, str], str] = {}  # (value, module it leaves) → what readers outside read
        self.entered: dict[tuple[str, str], str] = {}  # (value, module it enters) → what readers inside read
        self.outputs_of: dict[str, str] = {}  # styled module → its output (the value its last statement writes)
        for st in graph.stmts:
            for prefix, s in styled(st.module or ""):
                if s.outputs:
                    self.outputs_of[prefix] = st.writes

    def after(self, writes: str, reads: list[str]) -> None:
        """A statement over a DTensor computes a DTensor (its sharding propagation)."""
        if any(r in self.dtensor for r in reads):
            self.dtensor.add(writes)

    def kept(self, st: Statement, reads: list[str]) -> tuple[list[str], bool]:
        """A statement's reads, and whether its result stays partial: linear in a partial
        inside a `linear` style (moe_tp_experts), run on each chip's own experts (dispatch),
        or a rowwise linear's bias added to its partial sum (`partial_bias`)."""
        module = st.module or ""
        if any(s.linear for _, s in self.styled(module)) and partial_through(st.cls, [self.e.place[r] for r in reads]):
            return reads, True
        if (own := self.dispatch.local_reads(st, reads)) is not None:
            return own, True
        return self.partial_bias(reads, module) if entry(st.cls).bias else (reads, False)

    @staticmethod
    def unsplit(output: str, placement: Placement) -> str:
        """Why the forward's output may not stay split."""
        return (f"the {output} would stay split over the chips ({placement}): no style of the plan gathers it "
                "(transformers' colwise_gather_output or torch's ColwiseParallel(output_layouts=Replicate()) on "
                "lm_head would); gather it, or leave lm_head out of the plan")

    def leaving(self, value: str, reader: str) -> str:
        """What `reader`'s module reads of a value leaving styled modules: taken through each
        one's output port, innermost first."""
        if self.e.tp == 1:
            return value  # on one chip every layout is the whole value
        name = value
        for prefix, s in self.styled(self.e.values[value].module or ""):  # innermost first
            if under(reader, prefix):
                break
            port = s.outputs[0] if s.outputs else None
            if port is None or (port.taken and self.outputs_of.get(prefix) != value):
                continue
            key = (name, prefix)
            if key not in self.left:
                self.left[key] = self._through(name, port, prefix, s, "output", in_place=True)
            name = self.left[key]
        if isinstance(self.e.place[name], Shard) and self._left_split_input(self.e.values[value].module, reader):
            return self._whole(name, set())
        return name

    def entering(self, value: str, reader: str) -> str:
        """What `reader`'s module reads of a value entering styled modules: the routing slots
        of each chip (`dispatch`), or the value taken through each one's input port, outermost
        first."""
        role = self.e.values[value].role
        if self.e.tp == 1 or role == "weight":
            return value
        hooked = role in ("activation", "input")  # a hook sees the model's tensors (a folded constant: torch's only)
        name = value
        for prefix, s in reversed(self.styled(reader)):  # outermost first
            if under(self.e.values[name].module or "", prefix):
                continue
            if s.dispatch and hooked and isinstance(self.e.place[name], Replicate):
                return self.dispatch.enter(name, prefix, s)
            index = self._input_index(prefix, s, name)
            port = None if index is None else s.inputs[index]
            if port is None or not (port.taken or hooked):
                continue
            key = (name, prefix)
            if key not in self.entered:
                what = f"input {index}" if port.taken else "input"
                self.entered[key] = self._through(name, port, prefix, s, what, in_place=False)
            name = self.entered[key]
        return name

    def _input_index(self, prefix: str, s: Style, value: str) -> int | None:
        """Which positional argument of the module `value` is (None: one the style leaves
        alone; a hook's one input port takes every value entering)."""
        if len(s.inputs) == 1 and s.inputs[0] is not None and not s.inputs[0].taken:
            return 0
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
        DTensor, a hook's value), then redistributed to the desired layout."""
        p = self.e.place[name]
        if port.given is not None and not port.taken:
            if not port.given.partial and port.given.dim is None and isinstance(p, Partial):
                self.e.fold(name)  # a partial where the hook is given the replicated value: its sum first
            elif not _of(port.given, p):
                return name  # a layout the hook was not written for crosses as it is
        elif port.given is not None and name not in self.dtensor:
            taken = self._layout(port.given, name, prefix, s, what)
            if taken != p:
                raise ImportFailed(f"{self.e.arch}: {s.name} at {prefix}: torch takes its {what} {name}, a plain "
                                   f"tensor, to be {port.given} on {self.e.tp} chips, but it is {describe(p)} here; "
                                   "torch would run a program other than the model's (a layout the importer cannot "
                                   "import faithfully)")
        out = name if port.desired is None else self._redistribute(name, port, prefix, s, what, in_place)
        if not in_place and out == name:
            return out  # the same value is read outside the module too, as it was (plain or not)
        if port.local:
            self.dtensor.discard(out)
        else:
            self.dtensor.add(out)
        return out

    def _layout(self, layout: Layout, name: str, prefix: str, s: Style, what: str) -> Placement:
        """A style's layout (not Partial()) as the placement of value `name`."""
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

    def _redistribute(self, name: str, port: Port, prefix: str, s: Style, what: str, in_place: bool) -> str:
        """The collective (or slices, or shares) taking `name` from its real placement to the
        port's desired layout."""
        p, layout = self.e.place[name], port.desired
        assert layout is not None
        if layout.partial:
            if isinstance(p, Replicate):
                return self.e.share(name, prefix, s)
            if isinstance(p, Partial):
                return name
            raise ImportFailed(f"{self.e.arch}: {s.name} at {prefix}: its {what} {name} is {describe(p)}; {layout} "
                               "of a split value is not imported")
        if isinstance(p, Replicate) and not port.taken and layout.dim == -1:
            return self.e.split(name, prefix, s)  # a hook's slice (Emitter.split says where the last axis does not divide)
        want = self._layout(layout, name, prefix, s, what)
        if isinstance(p, Replicate) and isinstance(want, Shard):
            return self.e.split(name, prefix, s, want.splits[0].axis)
        if p == want:
            return name
        if isinstance(want, Replicate) and isinstance(p, Partial):
            self.e.fold(name)  # in place: the spine's sum is the value itself
            return name
        if isinstance(want, Replicate) and isinstance(p, Shard):
            return self.e.gather(name, prefix, s, out=None if in_place else self.e.named("", name, "_gathered"), what=what)
        assert isinstance(want, Shard)
        if isinstance(p, Partial):
            return self.e.reduce_scatter(name, want.splits[0].axis, prefix)
        raise ImportFailed(f"{self.e.arch}: {s.name} at {prefix}: its {what} {name} is {describe(p)}; {layout} "
                           "needs an all-to-all, which tprules does not import")

    def partial_bias(self, reads: list[str], module: str) -> tuple[list[str], bool]:
        """A rowwise linear's bias added to its partial sum: DTensor keeps the sum partial
        through the add (the bias a partial too: each chip adds 1 / N of it), so that the
        output layout's collective comes after it (a reduce-scatter stays one). The reads,
        and whether the add keeps the partial."""
        places = [self.e.place[r] for r in reads]
        found = next(((prefix, s) for prefix, s in self.styled(module) if s.inputs or s.outputs), None)
        if found is None or not found[1].partial_bias or len(reads) != 2 or \
                sum(isinstance(p, Partial) for p in places) != 1:
            return reads, False
        bias = next(r for r, p in zip(reads, places) if not isinstance(p, Partial))
        if not isinstance(self.e.place[bias], Replicate) or self.e.values[bias].role != "weight":
            return reads, False
        shared = self.e.share(bias, *found)
        return [shared if r == bias else r for r in reads], True

    def _left_split_input(self, module: str, reader: str) -> bool:
        """Whether `module` is in a module whose hook splits its input that `reader` is outside of."""
        return any(s.inputs and s.inputs[0] is not None and not s.inputs[0].taken and s.inputs[0].desired is not None
                   and s.inputs[0].desired.dim is not None and not under(reader, prefix)
                   for prefix, s in self.styled(module))

    def _whole(self, value: str, seen: set) -> str:
        """The whole value of one that a split-input module computed from its slices, for a
        reader outside the module: the statements from the module's input to it again, on the
        spine, from the whole input. transformers slices the input inside the module, so
        nothing split ever leaves it; a reader outside reads such a value only where the
        importer shares one statement between two modules (the same view of one tensor,
        lowering/walk.py's `computed`), as Qwen4-Exp's block_inject_weight shares the flattened
        input of its sibling input_mix_weight_down."""
        source = next((v for v, name in self.e.splits.items() if name == value and name == f"{v}_split"), None)
        if source is not None or isinstance(self.e.place[value], Replicate):
            return source or value
        twin = self.e.named("", value, "_whole")
        if twin in self.e.place:
            return twin
        writer = self.writers.get(value)
        if writer is None or writer.cls not in (LAYOUT | ELEMENTWISE) or value in seen:
            raise ImportFailed(f"{self.e.arch}: {self.e.values[value].module}: {value} is split inside a "
                               "rowwise_split_input module and read outside it, where it is whole; it is computed by "
                               f"{writer.aten if writer else 'no statement'}, which the spine cannot compute again")
        reads = [self._whole(r, seen | {value}) for r in writer.reads]
        v = self.e.values[value]
        self.e.add(twin, v, v.module, REPLICATE)
        self.e.b.stmt(self.e.named("", writer.name, "_whole"), writer.cls, reads, twin, **dict(writer.attrs),
                      module=writer.module, aten=writer.aten)
        return twin


__all__ = ["Ports", "describe"]
