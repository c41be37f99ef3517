"""Split a kernel's matmul stages for a library matmul: prologue pass, library call, epilogue pass.

On a GPU with cuBLAS at hand (runtime/devices/matmul.py), each matmul of a matmul stage
becomes a `Gemm` stage the device hands to the library, between stages our kernel runs:

1. a pointwise stage that computes every operand that is not a buffer as it lies, or a view
   of one (render/views.py: a reshape, permute, slice or expand keeping one stride on each of the
   block's two axes, handed to the library as an offset and a leading dimension), into a
   scratch buffer (a fused prologue, a quantized read, heads merged back across strides);
2. one `Gemm` per matmul, into a scratch buffer for its result, or straight into the
   output buffer when a store keeps the result as it is (float32, not transposed);
3. a pointwise stage for the other stores (the fused epilogue), reading the results.

The other stages are left as they are. The kernel's parameters grow by the scratch
buffers; the executor allocates them like any other. `buffer_of` and `direct_stores`
(what a library reads and writes as it lies) serve the CPU's BLAS core too (cpu/gemm.py).

>>> # see tests/codegen/render/test_library_matmul.py for the stages of the usual groups
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass, replace

from ...ops import Ops
from ..ir import Acc, Expr, Gemm, GroupedMatmulStage, Kernel, Load, MatmulStage, Op, Param, Pointwise, Stage, Store, Transpose
from .views import block, view_of

FLOAT_BUFFERS = ("f32", "f16", "bf16")  # kept as float32 in buffers (f16, bf16 rounded)


def buffer_of(e: Expr, kernel: Kernel) -> tuple[str, bool] | None:
    """(parameter, transposed) when `e` is a float32 buffer as it lies, or its transpose."""
    flipped = False
    if isinstance(e, Transpose):
        if not isinstance(e.arg, Load) or kernel.param(e.arg.param).dtype != e.dtype:
            return None  # a transpose that also converts (e.g. f32 to bf16) is computed
        e, flipped = e.arg, True
    if isinstance(e, Load) and kernel.param(e.param).dtype in FLOAT_BUFFERS and len(e.shape) == 2:
        return e.param, flipped
    return None


def direct_stores(stage: MatmulStage | GroupedMatmulStage, kernel: Kernel) -> dict[int, str]:
    """Matmul number → the output parameter the library writes its result into directly."""
    out: dict[int, str] = {}
    for st in stage.stores:
        v = st.value
        p = kernel.param(st.param)
        if (isinstance(v, Acc) and v.dtype == "f32" and not st.flip and p.dtype == "f32"
                and p.shape == (stage.m, stage.n) and v.index not in out and st.param not in out.values()):
            out[v.index] = st.param
    return out


def split_matmuls(kernel: Kernel) -> Kernel:
    """The kernel with every matmul stage split for a library matmul (see the module)."""
    if not any(isinstance(s, MatmulStage) for s in kernel.stages):
        return kernel
    params = list(kernel.params)
    stages = []
    for stage in kernel.stages:
        if isinstance(stage, MatmulStage):
            stages.extend(_split(stage, kernel, params))
        else:
            stages.append(stage)
    return Kernel(kernel.group, kernel.members, kernel.place, tuple(params), tuple(stages), kernel.origins)


def _scratch(params: list[Param], shape) -> str:
    p = Param(f"p{len(params)}", "scratch", tuple(shape), "f32")
    params.append(p)
    return p.name


def view_block(e: Expr, kernel: Kernel) -> tuple[str, bool, tuple[int, int]] | None:
    """(parameter, transposed, (offset, leading dimension)) when the 2-D operand `e` is a view
    of a float32 buffer whose block a library reads as it lies (render/views.py), else None."""
    v = view_of(e, {p.name: p.dtype for p in kernel.params})
    how = block(v, *e.shape) if v is not None and len(e.shape) == 2 else None
    return None if v is None or how is None else (v.param, how[0], (v.offset, how[1]))


def _split(stage: MatmulStage, kernel: Kernel, params: list[Param]) -> list:
    prologue: dict[tuple, list[Store]] = {}  # shape → stores of computed operands

    def operand(e: Expr) -> tuple[str, bool, tuple[int, int] | None]:
        found = buffer_of(e, kernel)
        if found is not None:
            return (*found, None)
        view = view_block(e, kernel)
        if view is not None:
            return view
        name = _scratch(params, e.shape)
        prologue.setdefault(e.shape, []).append(Store(name, e))
        return name, False, None

    direct = direct_stores(stage, kernel)
    gemms, results = [], {}
    for index, mm in enumerate(stage.matmuls):
        a, ta, a_at = operand(mm.a)
        b, flipped, b_at = operand(mm.b)
        c = direct.get(index) or _scratch(params, (stage.m, stage.n))
        results[index] = c
        gemms.append(Gemm(a, ta, b, flipped != mm.transpose_b, c, stage.m, stage.n, stage.k, a_at, b_at))
    out: list[Stage] = [Pointwise(shape, tuple(stores)) for shape, stores in prologue.items()]
    out.extend(gemms)
    epilogue = tuple(Store(st.param, _read_results(st.value, results), st.flip) for st in stage.stores
                     if not (isinstance(st.value, Acc) and direct.get(st.value.index) == st.param))
    if epilogue:
        out.append(Pointwise((stage.m, stage.n), epilogue))
    return out


def _read_results(e, results: dict[int, str]):
    """`e` with every matmul result read from the buffer the library wrote it to."""
    if isinstance(e, Acc):
        load = Load(results[e.index], e.shape)
        return load if e.dtype == "f32" else Op(Ops.CAST.value, (load,), e.shape, e.dtype)
    if not is_dataclass(e) or isinstance(e, type):
        return e
    changes = {}
    for f in fields(e):
        v = getattr(e, f.name)
        if isinstance(v, tuple):
            new = tuple(_read_results(x, results) for x in v)
        elif is_dataclass(v):
            new = _read_results(v, results)
        else:
            continue
        if new != v:
            changes[f.name] = new
    return replace(e, **changes) if changes else e
