"""Build the CUDA kernels for a named GPU architecture with no GPU present: what `tprules
compile` does, and `benchmarks/ptx_check.py` and the tests with it.

1. the kernel is rendered as for `run --device cuda` (codegen/cuda/kernel.py, real tiles, the
   launch shape a GPU gets), and typed there (codegen/cuda/typed.py);
2. Numba-CUDA types and lowers it for the architecture and NVVM makes PTX
   (`numba.cuda.compile_ptx`, signature: the buffers as the executor allocates them);
3. where `ptxas` is installed (the `cuda-toolkit[nvcc]` wheel), the PTX is assembled to a
   cubin and `ptxas -v` says what the kernel uses: registers per thread, shared memory,
   spill stores and loads.

All of it comes with the `cuda-compile` extra (`pip install -e '.[cuda-compile]'`). A failure
names the kernel's group, the member statement of the line the compiler stopped at, and
the compiler's first error line.

>>> nvcc = Compiler(parse_arch("sm_90"))                           # doctest: +SKIP
>>> nvcc.build(kernel).registers                                     # doctest: +SKIP
40
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import BadInput, UsageError
from .. import cache
from ..ir import Kernel
from ..render.emit import origin
from . import kernel as render
from . import typed

INSTALL = "pip install -e '.[cuda-compile]' (NVVM, NVRTC and ptxas of CUDA 13)"
SIM_VARIABLE = "NUMBA_ENABLE_CUDASIM"


class CompilerMissing(BadInput):
    """NVVM (or Numba-CUDA) cannot be loaded here: nothing can be compiled."""

    kind = "not installed"


@dataclass(frozen=True)
class Arch:
    name: str  # sm_90
    cc: tuple[int, int]  # (9, 0)


def parse_arch(text: str) -> Arch:
    """`sm_90` → Arch('sm_90', (9, 0)); `sm_100` → (10, 0)."""
    m = re.fullmatch(r"sm_(\d+)(\d)", text or "")
    if not m:
        raise UsageError(f"--arch takes a GPU architecture such as sm_90 or sm_80; got {text!r}")
    return Arch(text, (int(m.group(1)), int(m.group(2))))


@dataclass
class Build:
    """One kernel compiled (or not) for an architecture."""

    kernel: Kernel
    source: str
    launch: tuple  # per stage: (grid, block), or None for a library's gemm
    ptx: str | None = None
    cubin: bytes | None = None
    registers: int | None = None
    shared_bytes: int | None = None  # static shared memory per block
    spill_stores: int | None = None  # bytes
    spill_loads: int | None = None
    error: str | None = None  # the compiler's first error line
    statement: str | None = None  # the member whose code the compiler stopped at
    seconds: float = 0.0
    reused: bool = False  # the same source as a kernel built before (built once)

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_json(self) -> dict:
        k = self.kernel
        out = {"group": k.group, "members": list(k.members), "kinds": k.kind, "place": k.place,
               "registers": self.registers, "shared_bytes": self.shared_bytes, "spill_stores": self.spill_stores,
               "spill_loads": self.spill_loads, "launch": [list(s) if s else None for s in self.launch],
               "ok": self.ok}
        if not self.ok:
            out |= {"statement": self.statement, "error": self.error}
        return out


@dataclass
class Compiler:
    """Compiles kernels for `arch`; `nvvm` and `ptxas` say what was found."""

    arch: Arch
    tile: int = 16
    nvvm: str = ""  # NVVM's version, numba-cuda's
    ptxas: str | None = None  # its path, None when it is not installed
    ptxas_version: str = ""
    _builds: dict[str, Build] = field(default_factory=dict)

    def __post_init__(self):
        self._cuda = load_nvvm(self.arch)
        self.nvvm = nvvm_version()
        self.ptxas = find_ptxas()
        if self.ptxas:
            out = subprocess.run([self.ptxas, "--version"], capture_output=True, text=True).stdout
            m = re.search(r"release ([\d.]+)", out)
            self.ptxas_version = m.group(1) if m else "?"
        self.target = render.Target(self.tile)

    def build(self, kernel: Kernel) -> Build:
        """Render, type and compile one kernel (an equal source is compiled once)."""
        started = time.perf_counter()
        try:
            source, launch, marks = render.render_marked(kernel, self.target)
        except typed.KernelTypeError as err:
            return Build(kernel, "", (), error=f"KernelTypeError: {err.message}", statement=err.statement)
        done = self._builds.get(source)
        if done is not None:
            return Build(kernel, source, launch, done.ptx, done.cubin, done.registers, done.shared_bytes,
                         done.spill_stores, done.spill_loads, done.error, done.statement, 0.0, reused=True)
        b = Build(kernel, source, launch)
        with _no_gpu(self.arch):
            try:
                fn = cache.load(source, f"nvvm_{self.arch.name}").kernel
                b.ptx, _ = self._cuda.compile_ptx(fn.py_func, signature(kernel), cc=self.arch.cc)
            except Exception as err:  # noqa: BLE001 - every compiler error is the kernel's failure
                text = str(err)
                b.error = first_error(type(err).__name__, text)
                b.statement = origin(kernel, marks, _line_of(text))
        if b.ok and self.ptxas:
            self._assemble(b)
        b.seconds = time.perf_counter() - started
        self._builds[source] = b
        return b

    def _assemble(self, b: Build) -> None:
        assert b.ptx is not None and self.ptxas is not None  # a kernel compiled, and ptxas found
        with tempfile.TemporaryDirectory(prefix="tprules-ptxas-") as tmp:
            ptx, cubin = Path(tmp) / "k.ptx", Path(tmp) / "k.cubin"
            ptx.write_text(b.ptx)
            r = subprocess.run([self.ptxas, "-v", f"-arch={self.arch.name}", str(ptx), "-o", str(cubin)],
                               capture_output=True, text=True)
            if r.returncode != 0:
                lines = [ln for ln in (r.stderr + r.stdout).splitlines() if ln.strip()]
                b.error = "ptxas: " + (next((ln for ln in lines if "error" in ln.lower()), lines[0] if lines else "failed"))
                return
            b.cubin = cubin.read_bytes()
            usage = resources(r.stderr + r.stdout)
            b.registers, b.shared_bytes = usage["registers"], usage["shared_bytes"]
            b.spill_stores, b.spill_loads = usage["spill_stores"], usage["spill_loads"]


def signature(kernel: Kernel) -> tuple:
    """The kernel's Numba signature: the stage number, then each buffer as the executor
    allocates it (program.model's storage: int64 ids as int64, f16 and bf16 as float32)."""
    from numba import from_dtype, types

    from ...program.model import Tensor

    return (types.int64, *(types.Array(from_dtype(Tensor(p.name, p.shape, p.dtype, None).storage), len(p.buffer_shape), "C")
                           for p in kernel.params))


def load_nvvm(arch: Arch):
    """`numba.cuda`, able to make PTX for `arch` here; CompilerMissing when NVVM is not
    installed, UsageError when the simulator is on or NVVM does not build for `arch`."""
    if os.environ.get(SIM_VARIABLE, "0") not in ("", "0"):
        raise UsageError(f"{SIM_VARIABLE}={os.environ[SIM_VARIABLE]} turns on the CUDA simulator, which "
                              "cannot make PTX; unset it to compile")
    try:
        from numba import cuda
        from numba.cuda.cudadrv import nvvm
    except ImportError as err:
        raise CompilerMissing(f"numba-cuda cannot be imported ({err}); install it: {INSTALL}") from None
    if not hasattr(cuda, "compile_ptx"):
        raise UsageError(f"numba.cuda is the simulator in this process; unset {SIM_VARIABLE} to compile")
    try:
        nvvm.NVVM()
    except Exception as err:  # noqa: BLE001 - Numba's own error, shortened to one line
        reason = " ".join(str(err).split())[:160]
        raise CompilerMissing(f"NVVM cannot be loaded ({reason}); install it: {INSTALL}") from None
    try:
        with _no_gpu(arch):
            cuda.compile_ptx(_probe, ("void(float32[:])"), cc=arch.cc)
    except Exception as err:  # noqa: BLE001
        raise UsageError(f"{nvvm_version()} does not build for {arch.name}: "
                         f"{first_error(type(err).__name__, str(err))}") from None
    return cuda


def _probe(a):
    a[0] = 1


def nvvm_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    from numba.cuda.cudadrv import nvvm

    try:
        numba_cuda = version("numba-cuda")
    except PackageNotFoundError:
        numba_cuda = "?"
    ir = ".".join(map(str, nvvm.NVVM().get_version()))
    toolkit = _wheel_version("nvidia-nvvm")
    return f"NVVM {toolkit or ir} (numba-cuda {numba_cuda})"


def _wheel_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return ".".join(version(name).split(".")[:2])
    except PackageNotFoundError:
        return None


def find_ptxas() -> str | None:
    """ptxas from the nvcc wheel (found as Numba finds its libraries), else on PATH."""
    try:
        from cuda.pathfinder import find_nvidia_binary_utility

        found = find_nvidia_binary_utility("ptxas")
        if found:
            return str(found)
    except Exception:  # noqa: BLE001 - an older cuda-pathfinder: try PATH
        pass
    return shutil.which("ptxas")


@contextmanager
def _no_gpu(arch: Arch):
    """Device functions compile for the current GPU's capability, and there is no GPU:
    stand `arch` in for it while compiling."""
    import numba.cuda.dispatcher as dispatcher

    real = dispatcher.get_current_device
    dispatcher.get_current_device = lambda: type("NoGpu", (), {"compute_capability": arch.cc})()
    try:
        yield
    finally:
        dispatcher.get_current_device = real


def resources(text: str) -> dict[str, int]:
    """What `ptxas -v` says of the entry function (the kernel): registers, shared memory
    (static, bytes), spill stores and loads (bytes)."""
    out = {"registers": 0, "shared_bytes": 0, "spill_stores": 0, "spill_loads": 0}
    entry = text.split("Compiling entry function", 1)[-1]
    if m := re.search(r"Used (\d+) registers", entry):
        out["registers"] = int(m.group(1))
    if m := re.search(r"(\d+) bytes smem", entry):
        out["shared_bytes"] = int(m.group(1))
    if m := re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", entry):
        out["spill_stores"], out["spill_loads"] = int(m.group(1)), int(m.group(2))
    return out


# Numba's framing lines: the first line that says what went wrong comes after them.
_FRAMING = re.compile(r"^(Failed in .* pipeline|During: |File \"|\s*$|No implementation of function|"
                      r"There are \d+ candidate|Ignoring|Resolution failure|\s*- Of which|\s*\^|\s*>>>|"
                      r"This error may have been caused)")


# Terminal colours: Numba highlights its messages wherever colorama is installed (mkdocs-material
# brings it), and a report is plain text.
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def first_error(kind: str, text: str) -> str:
    """The compiler's first line that says what is wrong, e.g. `NumbaTypeError: Unsupported
    array index type float32 in Tuple(float32, int64)`, without terminal colours."""
    lines = [ln.strip() for ln in _ANSI.sub("", text).splitlines()]
    for ln in lines:
        m = re.search(r"\b(\w*(?:Error|Exception)): (.+)", ln)
        if m and not _FRAMING.match(ln):
            return f"{m.group(1)}: {m.group(2)}"
    for ln in lines:
        if ln and not _FRAMING.match(ln):
            return f"{kind}: {ln}"
    return f"{kind}: {lines[0] if lines else ''}"


def _line_of(text: str) -> int | None:
    m = re.search(r'File "[^"]*k_[0-9a-f]+\.py", line (\d+)', text)
    return int(m.group(1)) if m else None


def write(builds: list[Build], out: Path) -> None:
    """`--out`: each distinct kernel's PTX and cubin, named by its group."""
    out.mkdir(parents=True, exist_ok=True)
    for b in builds:
        if b.reused:
            continue
        stem = re.sub(r"[^\w.@-]", "_", b.kernel.group)
        if b.source:
            (out / f"{stem}.py").write_text(b.source)
        if b.ptx:
            (out / f"{stem}.ptx").write_text(b.ptx)
        if b.cubin:
            (out / f"{stem}.cubin").write_bytes(b.cubin)
