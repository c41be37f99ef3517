"""Program inputs (tensors no statement writes): `<dir>/data/<tensor>.npy` when present, else
values generated from a fixed seed per tensor name, so a run is reproducible anywhere.

Generated values suit how the tensor is read: a matmul's right operand is scaled by
1/sqrt(K) so activations keep unit size through a layer; what rsqrt or a divisor reads
is kept in [0.5, 1.5]; ids lie in the range they index (a table's rows, a gather's axis),
other integers in [-8, 8].
"""

from __future__ import annotations

import zlib

import numpy as np

from ... import ops
from ...errors import IllFormed
from ...ops import Ops
from ...pos import Pos
from ...program.model import Program, Tensor
from .semantics import store


def program_inputs(prog: Program, names=None) -> dict[str, np.ndarray]:
    """Every program input's value (or only those in `names`), as its dtype is stored."""
    roles = _roles(prog)
    values = {}
    for name in (prog.inputs if names is None else [n for n in prog.inputs if n in names]):
        tensor = prog.tensors[name]
        path = prog.directory / "data" / f"{name}.npy"
        if path.exists():
            values[name] = _load(path, tensor, f"{prog.display}/data/{name}.npy")
        else:
            values[name] = generate(tensor, roles.get(name, "plain"))
    return values


def check_input_files(prog: Program) -> None:
    """Every input file is readable and of the right shape, read no further than its header
    (a launcher checks a big model's weights before its ranks start, without loading them)."""
    for name in prog.inputs:
        path = prog.directory / "data" / f"{name}.npy"
        if path.exists():
            _read(path, prog.tensors[name], f"{prog.display}/data/{name}.npy", mmap_mode="r")


def generate(tensor: Tensor, role: str) -> np.ndarray:
    rng = np.random.default_rng(zlib.crc32(tensor.name.encode()))
    shape = tensor.shape
    if role.startswith("index:"):  # rows of an embedding table
        return rng.integers(0, int(role.split(":")[1]), size=shape).astype(tensor.storage)
    if tensor.dtype in ("i8", "i32", "i64"):
        return rng.integers(-8, 9, size=shape).astype(tensor.storage)
    if role == "positive":
        x = rng.uniform(0.5, 1.5, size=shape)
    elif role.startswith("weight:"):
        x = rng.standard_normal(size=shape) / np.sqrt(int(role.split(":")[1]))
    else:
        x = rng.standard_normal(size=shape)
    return store(x.astype(np.float32), tensor.dtype)


def _roles(prog: Program) -> dict[str, str]:
    roles: dict[str, str] = {}
    for s in prog.statements:
        if s.cls == Ops.MATMUL:
            k = prog.tensors[s.reads[0]].shape[-1]
            roles.setdefault(s.reads[1], f"weight:{k}")
        elif s.cls == Ops.RSQRT or (s.cls == Ops.DIV and len(s.reads) > 1):
            roles.setdefault(s.reads[-1], "positive")
        elif s.cls == Ops.RMSNORM and len(s.reads) > 1:
            roles.setdefault(s.reads[1], "positive")
        elif ops.CLASSES[s.cls].ids:  # ids: the positions they index (an embedding's rows, a gather's axis)
            bound = ops.CLASSES[s.cls].bound
            size = bound(dict(s.attrs), [prog.tensors[t].shape for t in s.reads]) if bound is not None else None
            for i in ops.CLASSES[s.cls].ids:
                roles.setdefault(s.reads[i], f"index:{size if size is not None else prog.tensors[s.reads[0]].shape[0]}")
    return roles


def _read(path, tensor: Tensor, display: str, mmap_mode=None) -> np.ndarray:
    try:
        value = np.load(path, mmap_mode=mmap_mode, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise IllFormed(f"cannot read input {tensor.name}: {err}", Pos(display, 0)) from None
    if tuple(value.shape) != tensor.shape:
        raise IllFormed(f"input {tensor.name} has shape {list(value.shape)}; the facts say {list(tensor.shape)}",
                        Pos(display, 0))
    return value


def _load(path, tensor: Tensor, display: str) -> np.ndarray:
    return as_stored(_read(path, tensor, display), tensor)


def as_stored(value: np.ndarray, tensor: Tensor) -> np.ndarray:
    """An input's value as its dtype is stored: floats as float32 rounded as the dtype keeps
    them, integers as the tensor's storage type (no copy where it already is)."""
    if value.dtype.kind == "f":
        return store(value.astype(np.float32, copy=False), tensor.dtype)
    return value.astype(tensor.storage, copy=False)
