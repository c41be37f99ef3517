"""What does not depend on `input_ids` is a constant, computed at import as a compiler's
constant folding would, and read by the program as an input tensor.

A constant that a statement reads is one of:
- `Weight`: a parameter or buffer, through ops that change nothing (alias, clone, a copy
  to its own dtype, a multiplication by 1, a view to its own shape);
- `Transposed`: a 2-D weight through `permute [1, 0]`, which a matmul reads with
  `transpose_b 1` (the weight stays as the checkpoint holds it, and is split as the plan says);
- `Folded`: any other constant subgraph (RoPE's cos and sin tables, the causal mask, Gemma's
  1 + w): its root becomes an input tensor, evaluated here with the model's values.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass


@dataclass(frozen=True)
class Weight:
    fqn: str


@dataclass(frozen=True)
class Transposed:
    fqn: str


@dataclass(frozen=True)
class Folded:
    node: object  # the fx node at the subgraph's root


class Constants:
    def __init__(self, program, model):
        import torch

        aten = torch.ops.aten
        self.aten = aten
        self.program = program
        self.model = model
        sig = program.graph_signature
        self.fqn: dict[str, str] = {}
        for spec in sig.input_specs:
            if spec.target is not None:
                self.fqn[spec.arg.name] = spec.target
        self.user_inputs = [s.arg.name for s in sig.input_specs
                            if s.kind.name == "USER_INPUT" and type(s.arg).__name__ == "TensorArgument"]
        nodes = list(program.graph_module.graph.nodes)
        self.dynamic: set = set()
        for n in nodes:
            if (n.op == "placeholder" and n.name in self.user_inputs) or \
                    any(a in self.dynamic for a in n.all_input_nodes):
                self.dynamic.add(n)
        self._values: dict = {}
        self._keys: dict = {}
        self._numbers: dict[tuple, int] = {}
        self._weights = None
        self.identity = {aten.alias.default, aten.clone.default, aten.detach.default, aten.lift_fresh_copy.default}

    # -- what a constant is ----------------------------------------------------------

    def resolve(self, node):
        """Weight, Transposed or Folded, for a constant fx node."""
        if node.op == "placeholder":
            return Weight(self.fqn[node.name])
        if node.op == "get_attr":
            return Folded(node)
        inner = node.args[0] if node.args and hasattr(node.args[0], "op") else None
        if inner is not None and self._is_identity(node):
            return self.resolve(inner)
        if inner is not None and node.target == self.aten.permute.default and list(node.args[1]) == [1, 0]:
            below = self.resolve(inner)
            if isinstance(below, Weight):
                return Transposed(below.fqn)
        return Folded(node)

    def _is_identity(self, node) -> bool:
        aten = self.aten
        if node.target in self.identity:
            return True
        val, inner = node.meta.get("val"), node.args[0].meta.get("val")
        if not hasattr(val, "shape") or not hasattr(inner, "shape"):
            return False  # a multi-output node (a list of tensors) or an item of one: not an identity
        same_shape = tuple(val.shape) == tuple(inner.shape)
        same_dtype = val.dtype == inner.dtype
        if node.target in (aten.view.default, aten._unsafe_view.default, aten.expand.default) and same_shape:
            return True
        if node.target == aten._to_copy.default and same_dtype and same_shape:
            return True
        if node.target in (aten.mul.Tensor, aten.mul.Scalar) and len(node.args) == 2 and \
                not hasattr(node.args[1], "op") and node.args[1] == 1 and same_dtype:
            return True
        return False

    def key(self, node) -> int:
        """Equal for constant subgraphs that compute the same thing (each layer's copy of the
        RoPE table's view): they fold into one input tensor. Hash-consed: a node's key is
        the number of its (op, operands' keys, arguments)."""
        if node not in self._keys:
            if node.op == "placeholder":
                k: tuple[str, ...] = ("weight", self.fqn.get(node.name, node.name))
            else:
                k = (str(node.target), repr(map_nodes(node.args, self.key)), repr(map_nodes(node.kwargs, self.key)))
            self._keys[node] = self._numbers.setdefault(k, len(self._numbers))
        return self._keys[node]

    def leaves(self, node) -> set[str]:
        """The parameters and buffers a constant subgraph reads."""
        seen, todo, out = set(), [node], set()
        while todo:
            n = todo.pop()
            if n in seen:
                continue
            seen.add(n)
            if n.op == "placeholder":
                out.add(self.fqn.get(n.name, n.name))
            todo.extend(n.all_input_nodes)
        return out

    # -- values ----------------------------------------------------------------------

    def weights(self) -> dict:
        if self._weights is None:
            named = dict(self.model.named_parameters(remove_duplicate=False))
            named.update(self.model.named_buffers(remove_duplicate=False))
            named.update(self.program.constants)
            self._weights = named
        return self._weights

    def forget_weights(self) -> None:
        """Read the model's weights again on next use (a decode step's tabulated values read
        them in the reduced model that stamp.py traces; its data reads every layer's)."""
        self._weights = None

    def weight(self, fqn: str):
        return self.weights()[fqn].detach()

    def value(self, node):
        """The value of a constant fx node, computed from the model's weights."""
        if node in self._values:
            return self._values[node]
        if node.op == "placeholder":
            out = self.weight(self.fqn[node.name])
        elif node.op == "get_attr":
            out = getattr(self.program.graph_module, node.target)
        else:
            out = _call(node, map_nodes(node.args, self.value), map_nodes(node.kwargs, self.value))
        self._values[node] = out
        return out

    def value_as(self, node, rename, memo: dict):
        """`value(node)` with every weight's name passed through `rename` (a stamped layer's
        copy of a constant computed from its own layer's weights)."""
        if node in memo:
            return memo[node]
        if node.op == "constant":  # a lowering's constant (lower.py's _Filled): it reads no weight
            return self.value(node)
        if node.op == "placeholder":
            out = self.weight(rename(self.fqn[node.name]))
        elif node.op == "get_attr":
            out = getattr(self.program.graph_module, node.target)
        else:
            out = _call(node, map_nodes(node.args, lambda x: self.value_as(x, rename, memo)),
                        map_nodes(node.kwargs, lambda x: self.value_as(x, rename, memo)))
        memo[node] = out
        return out


def _call(node, args, kwargs):
    """A constant node's value from its operands' values; an uninitialised tensor (`empty`,
    `new_empty`: what it holds is never read, it is written over) as zeros, so that every
    import of a model writes the same data/."""
    if node.target is operator.getitem:
        return args[0][args[1]]
    out = node.target(*args, **kwargs)
    space, _, op = str(node.target).partition(".")
    if space == "aten" and op.split(".")[0] in _UNINITIALISED:
        out = out.zero_()
    return out


_UNINITIALISED = {"empty", "new_empty", "empty_like", "empty_strided", "new_empty_strided", "empty_permuted"}


def map_nodes(x, fn):
    """x with every fx node in it (through lists, tuples and dicts) replaced by fn(node)."""
    if hasattr(x, "op"):
        return fn(x)
    if isinstance(x, (list, tuple)):
        return type(x)(map_nodes(a, fn) for a in x)
    if isinstance(x, dict):
        return {k: map_nodes(v, fn) for k, v in x.items()}
    return x
