"""Walk the traced program in order: every node that depends on `input_ids` goes through
the op table (lowering/aten.py) and becomes a statement of the `Graph`; the constants it reads
become inputs (source/constants.py); the forward's output is the tensor `logits`. A value that
depends on `input_ids` is never folded into a constant: one the table writes no statement
for is refused in one line naming its module path and ATen op.
"""

from __future__ import annotations

import re
from typing import NoReturn

from ... import ops
from ..errors import ImportFailed
from ..graph import INPUT, OUTPUT, Graph, Statement, Tensor
from ..source.constants import Constants, Transposed, Weight
from .aten import op_table
from .positions import tabulate_failed
from .table import DTYPES, MISSING, Lowerings, OpTable


class Lowerer:
    """The traced program as statements of registry classes (a `Graph`)."""

    def __init__(self, program, constants: Constants, arch: str, table: Lowerings | OpTable | None = None,
                 inputs: dict[str, str] | None = None, output: str = OUTPUT, more: tuple[str, ...] = (),
                 positions: int | None = None):
        self.table: Lowerings | OpTable = op_table() if table is None else table
        self.program = program
        self.c = constants
        self.arch = arch
        self.graph = Graph()
        self.names: dict = {}  # fx node → the value holding it
        self.folded_keys: dict[int | tuple, str] = {}  # a constant's key (Constants.key, or a lowering's) → its value
        self.computed: dict[tuple, str] = {}  # a statement's (class, operands, attrs, shape) → its value
        self.module = ""
        self.current = None  # the node being lowered
        self.pairs: dict = {}  # a complex fx node → its (real, imaginary) values (complex_pairs.py's complex rotary)
        self.empty: set = set()  # nodes of an empty tensor (a full-width rotary's pass-through slice)
        outputs = [n for n in program.graph_module.graph.nodes if n.op == "output"][0].args[0]
        self.output = outputs[0]  # logits, the forward's first output
        # the forward's further outputs (a decode step's updated caches, drivers/decode.py) → their names
        self.more = dict(zip(outputs[1:], more))
        self.positions = positions  # a decode step's cache length: a function of the position tabulated (positions.py)
        # a module's forward (import torch): each placeholder of a user input → its program input's name
        self.input_names = inputs
        self.graph.output = output

    def run(self) -> Graph:
        for n in self.program.graph_module.graph.nodes:
            self.at_node(n)
            if n.op == "placeholder" and n in self.c.dynamic:
                if self.input_names is None and len(self.c.user_inputs) != 1:
                    raise ImportFailed(f"{self.arch}: the forward takes {len(self.c.user_inputs)} inputs; expected input_ids")
                name = INPUT if self.input_names is None else self.input_names[n.name]
                self.names[n] = self.graph.add_value(Tensor(name, self.shape(n), self.dtype(n), role="input"))
            elif n.op == "call_function" and n in self.c.dynamic:
                # a causal LM's top-level op is counted in the module before it; a module's
                # forward (import torch) has its own top-level statements, at the root ("")
                top = self.input_names is not None and n.meta.get("nn_module_stack") is not None
                self.module = _module(n) if top else _module(n) or self.module
                if n.target in self.table.skip:
                    continue
                if _is_empty(n) and n.target not in self.table.cat:
                    self.empty.add(n)  # no statement: a cat drops it, anything else reading it is refused
                    continue
                fn = self.table.ops.get(n.target)
                self.current = n
                try:
                    if fn is None:
                        self.unsupported(n, MISSING)
                    fn(self, n)
                except ImportFailed:
                    if not (self.positions and tabulate_failed(self, n)):  # a function of the position alone
                        raise
        if self.output not in self.c.dynamic:
            raise ImportFailed(f"{self.arch}: the logits do not depend on input_ids" if self.input_names is None else
                               f"{self.arch}: the forward's output does not depend on its inputs")
        self._name_output(self.names[self.output])
        for node, name in self.more.items():
            self._name_more(node, name)
        if self.positions is not None:
            self._drop_unread()
        return self.graph

    def _drop_unread(self) -> None:
        """Statements no output needs: the position's values that only a tabulated function of
        it read (positions.py), the table holding what they computed."""
        g = self.graph
        keep = {g.output, *self.more.values()}
        live = []
        for s in reversed(g.stmts):
            if s.writes in keep:
                live.append(s)
                keep.update(s.reads)
        dropped = {s.writes for s in g.stmts} - {s.writes for s in live}
        g.stmts = live[::-1]
        read = {r for s in g.stmts for r in s.reads} | {s.writes for s in g.stmts}
        for name in dropped | {v.name for v in g.values.values() if v.role != "activation" and v.name not in read}:
            g.values.pop(name, None)
            g.folded.pop(name, None)

    def at_node(self, n) -> None:
        """Called before each node is lowered (layers/stamp.py tags what each node adds)."""

    def reused(self, value: str) -> None:
        """Called when a node's statement is one lowered before, whose `value` it reads (layers/stamp.py
        keeps the values that later layers read this way)."""

    # -- what the table's functions call ------------------------------------------------

    def shape(self, n) -> tuple[int, ...]:
        if isinstance(n, str):  # a value a lowering's part wrote
            return self.graph.values[n].shape
        return tuple(int(d) for d in n.meta["val"].shape)

    def dtype(self, n) -> str:
        if isinstance(n, str):
            return self.graph.values[n].dtype
        return self.dtype_of(n, n.meta["val"])

    def is_tensor(self, x) -> bool:
        return hasattr(x, "op")

    def unsupported(self, n, what: str) -> NoReturn:
        op = str(n.target) if hasattr(n.target, "_schema") else getattr(n.target, "__name__", str(n.target))
        raise ImportFailed(f"{self.arch}: {op} at {_module(n) or self.module or '(top)'}: {what}")

    def is_dynamic(self, x) -> bool:
        """Whether x's value depends on input_ids."""
        return x in self.c.dynamic

    def is_weight(self, x) -> bool:
        """Whether constant x is a weight of the model as it lies (through identity ops)."""
        return not self.is_dynamic(x) and isinstance(self.c.resolve(x), Weight)

    def transposed(self, x) -> str | None:
        """The weight a matmul operand is the transpose of, if it is one."""
        if x in self.c.dynamic:
            return None
        found = self.c.resolve(x)
        return self._weight(found.fqn, x) if isinstance(found, Transposed) else None

    def value(self, x) -> str:
        """The value (tensor) an operand is, declaring constants as inputs."""
        if isinstance(x, str):  # already a value (a transposed weight)
            return x
        if x in self.names:
            return self.names[x]
        if x in self.pairs:
            self.unsupported(self.current, f"it reads the complex value {x.name}; imported: view_as_complex, "
                                           "a product, view_as_real")
        if x in self.empty:
            self.unsupported(x, f"an empty tensor {list(self.shape(x))} read by something other than a cat")
        if x in self.c.dynamic:  # never folded: a constant would hold the traced input's value
            self.unsupported(x, f"its value depends on {INPUT}, and the op table computes no statement for it; "
                                "tprules folds only values of weights, buffers and shapes")
        found = self.c.resolve(x)
        if isinstance(found, Weight):
            name = self._weight(found.fqn, x)
        elif isinstance(found, Transposed):  # read other than by a matmul: fold the transpose
            name = self._folded(x)
        else:
            name = self._folded(found.node)
        self.names[x] = name
        return name

    def _weight(self, fqn: str, n) -> str:
        node = n
        while node.op != "placeholder":  # the weight's own shape, through the identity ops
            node = node.args[0]
        return self.graph.add_value(Tensor(fqn, self.shape(node), self.dtype(node), role="weight", module=fqn.rsplit(".", 1)[0]))

    def _folded(self, n) -> str:
        if n in self.c.dynamic:
            self.unsupported(n, f"its value depends on {INPUT}; tprules folds only values of weights, buffers and shapes")
        key = self.c.key(n)
        if key in self.folded_keys:  # the same constant folded already (another layer's copy)
            return self.folded_keys[key]
        self.graph.folded[n.name] = n
        self.folded_keys[key] = n.name
        return self.graph.add_value(Tensor(n.name, self.shape(n), self.dtype(n), role="folded", module=_module(n)))

    def emit(self, n, cls: str, operands: list, value_of=None, **attrs) -> None:
        if cls not in ops.CLASSES:  # the op table names classes; the registry (tprules/ops) defines them
            raise AssertionError(f"the op table writes {cls!r}, which is not a registry class")
        reads = tuple(self.value(x) for x in operands)
        meta = value_of if value_of is not None else n.meta["val"]
        shape, dtype = tuple(int(d) for d in meta.shape), self.dtype_of(n, meta)
        pairs = tuple((k, str(v)) for k, v in attrs.items())
        key = (cls, reads, pairs, shape, dtype, self._layer())
        if key in self.computed:  # the same statement again (q, k and v each view the hidden state)
            self.names[n] = self.computed[key]
            self.reused(self.computed[key])
            return
        name = self.graph.add_value(Tensor(n.name, shape, dtype, role="activation", module=self.module))
        self.names[n] = self.computed[key] = name
        self.graph.stmts.append(Statement(n.name, cls, reads, name, pairs, module=self.module, aten=str(n.target)))

    def _layer(self) -> str | None:
        """In a decode step, the decoder layer a statement is in: each layer computes its own
        (every layer writes its cache at the same position, which would otherwise be computed
        once, in the first layer, and read by the others: not a program layers/stamp.py can stamp)."""
        if self.positions is None:
            return None
        found = _LAYER.search(self.module)
        return found.group(0) if found else None

    def part(self, n, tag: str, cls: str, operands: list, shape, dtype: str | None = None, **attrs) -> str:
        """A statement of a lowering that writes `n` in several (its value named `n__tag`):
        the value, for the next part's operands."""
        meta = _Meta(tuple(shape), dtype or self.dtype(n))
        proxy = _Part(f"{n.name}__{tag}", n.meta, n.target)
        self.emit(proxy, cls, operands, value_of=meta, **attrs)
        return self.names[proxy]

    def filled(self, shape, dtype: str, value: float = 0.0) -> str:
        """A constant tensor of one value (a padding's zeros), folded into an input like any constant."""
        import torch

        torch_dtype = getattr(torch, {v: k for k, v in DTYPES.items() if k != "bool"}[dtype])
        return self.constant(("filled", tuple(shape), dtype, float(value)), "filled",
                             lambda: torch.full(tuple(shape), value, dtype=torch_dtype), dtype)

    def constant(self, key: tuple, stem: str, make, dtype: str) -> str:
        """A constant a lowering needs (`make()` computes it), folded into an input like any constant."""
        if key not in self.folded_keys:
            node = _Filled(f"{stem}_{len(self.graph.folded)}", self.module)
            value = make()
            self.c._values[node] = value
            self.graph.folded[node.name] = node
            self.folded_keys[key] = node.name
            self.graph.add_value(Tensor(node.name, tuple(value.shape), dtype, role="folded", module=self.module))
        return self.folded_keys[key]

    def extra(self, n, suffix: str, cls: str, operands: list, shape, **attrs) -> str:
        """A statement of its own for part of node `n` (a slice of a sum over an axis); its value."""
        reads = tuple(self.value(x) for x in operands)
        name = self.graph.add_value(Tensor(f"{n.name}_{suffix}", tuple(shape), self.dtype(n), role="activation",
                                           module=self.module))
        pairs = tuple((k, str(v)) for k, v in attrs.items())
        self.graph.stmts.append(Statement(name, cls, reads, name, pairs, module=self.module, aten=str(n.target)))
        return name

    def dtype_of(self, n, meta) -> str:
        if isinstance(meta, _Meta):
            return meta.dtype
        name = str(meta.dtype).replace("torch.", "")
        if name not in DTYPES:
            self.unsupported(n, f"tensors of dtype {name}")
        return DTYPES[name]

    def alias(self, n, x) -> None:
        self.names[n] = self.value(x)

    def _name_output(self, value: str) -> None:
        """The forward's output is the tensor `logits` (a module's: the graph's `output`)."""
        g = self.graph
        writer = next((s for s in g.stmts if s.writes == value), None)
        if writer is None:
            raise ImportFailed(f"{self.arch}: the logits are not computed by any statement" if self.input_names is None
                               else f"{self.arch}: the forward's output is not computed by any statement")
        old = g.values.pop(value)
        out = g.output
        g.values[out] = Tensor(out, old.shape, old.dtype, role=old.role, module=old.module)
        g.stmts = [Statement(s.name, s.cls, tuple(out if r == value else r for r in s.reads),
                             out if s.writes == value else s.writes, s.attrs, module=s.module, aten=s.aten)
                   for s in g.stmts]

    def _name_more(self, node, name: str) -> None:
        """A further output as its own tensor `name`: a copy (a reshape to its own shape) of the
        value, which statements may read too (a program output is a tensor no statement reads),
        right after the statement that writes the value (in its layer, for layers/stamp.py)."""
        if node not in self.c.dynamic:
            raise ImportFailed(f"{self.arch}: the forward's output {name} does not depend on its inputs")
        value = self.value(node)
        v = self.graph.values[value]
        self.graph.add_value(Tensor(name, v.shape, v.dtype, role="activation", module=v.module))
        at = next((i + 1 for i, s in enumerate(self.graph.stmts) if s.writes == value), len(self.graph.stmts))
        self.graph.stmts.insert(at, Statement(name, ops.Ops.RESHAPE, (value,), name, (), module=v.module,
                                              aten="(output)"))


_LAYER = re.compile(r"(^|\.)layers\.\d+(\.|$)")


class _Meta:
    """The shape and dtype of a part's value (what a node's `meta["val"]` says of a node's)."""

    def __init__(self, shape, dtype):
        self.shape, self.dtype = shape, dtype


class _Filled:
    """The source of a constant of one value: nothing to read, its value known (source/constants.py)."""

    op = "constant"
    all_input_nodes: list = []

    def __init__(self, name, module):
        self.name = name
        self.meta: dict[str, dict] = {"nn_module_stack": {}}
        self.module = module


class _Part:
    """A node's part: its own name, the node's module path and op."""

    def __init__(self, name, meta, target):
        self.name, self.meta, self.target = name, meta, target


def _is_empty(n) -> bool:
    val = n.meta.get("val")
    return hasattr(val, "shape") and 0 in tuple(val.shape)


def _module(n) -> str:
    stack = n.meta.get("nn_module_stack")
    if not stack:
        return ""
    path = list(stack.values())[-1][0]
    return path.replace("L['self'].", "").replace("L__self__.", "")
