"""The CUDA device: real GPUs through Numba-CUDA.

Chip i runs on GPU i mod k with its own stream and buffers; with one GPU every chip shares
it, each on its own stream. A kernel of several stages is launched once per stage on the
chip's stream. A partial moving to another chip is a device-to-device copy on the same
GPU, ordered after the source chip's work by an event, or goes through the host between
two GPUs.

Needs numba-cuda with the CUDA bindings of the driver's major version, e.g.
`pip install "numba-cuda[cu12]"` or `"numba-cuda[cu13]"`.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Sequence, cast

import numpy as np

from ...codegen import cache
from ...codegen.cuda import kernel as render_cuda
from .base import Compiled, Device, DeviceUnavailable, Queue

SIM_VARIABLE = "NUMBA_ENABLE_CUDASIM"


def import_cuda(simulator: bool):
    """`numba.cuda`, real or simulated. Which one is fixed when numba.cuda is first imported
    (by NUMBA_ENABLE_CUDASIM), so one process cannot have both."""
    loaded = "numba.cuda" in sys.modules
    if not loaded:
        if simulator:
            os.environ[SIM_VARIABLE] = "1"
            for name in ("numba.core.config", "numba.cuda.core.config"):  # read when numba was imported
                if name in sys.modules:
                    sys.modules[name].reload_config()
        elif os.environ.get(SIM_VARIABLE, "0") not in ("", "0"):
            raise DeviceUnavailable(f"{SIM_VARIABLE}={os.environ[SIM_VARIABLE]} asks for the CUDA simulator; "
                                    "--device cuda needs a real GPU (unset it, or use --device sim)")
    try:
        from numba import cuda
    except ImportError as err:
        raise DeviceUnavailable(f"numba-cuda cannot be imported: {err}") from None
    try:
        from numba.cuda.core import config
    except ImportError:  # an older numba-cuda keeps its settings in numba's
        from numba.core import config
    if bool(config.ENABLE_CUDASIM) != simulator:
        if simulator:
            raise DeviceUnavailable("numba.cuda was loaded for a real GPU in this process; "
                                    f"set {SIM_VARIABLE}=1 before starting it to use --device sim")
        raise DeviceUnavailable(f"the CUDA simulator is on in this process ({SIM_VARIABLE}=1); "
                                "--device cuda needs a real GPU (unset it, or use --device sim)")
    config.CUDA_LOW_OCCUPANCY_WARNINGS = 0  # small grids are expected on small programs
    return cuda


class CudaQueue(Queue):
    def __init__(self, device: "CudaDevice", chip: int, gpu):
        self.cuda = device.cuda
        self.device = device
        self.chip = chip
        self.gpu = gpu
        with gpu:
            self.stream = self.cuda.stream()
        self.timings: list[tuple] = []  # (start, end) events around each launch

    def upload(self, array):
        with self.gpu:
            return self.cuda.to_device(np.ascontiguousarray(array), stream=self.stream)

    def empty(self, shape, dtype):
        with self.gpu:
            return self.cuda.device_array(shape, dtype, stream=self.stream)

    def zeros(self, shape, dtype):
        return self.upload(np.zeros(shape, dtype))

    def launch(self, compiled: Compiled, buffers: list) -> None:
        with self.gpu:
            start, end = self.cuda.event(), self.cuda.event()
            start.record(self.stream)
            self.stages(cast(CudaCompiled, compiled), buffers)  # this device's own
            end.record(self.stream)
        self.timings.append((start, end))
        if self.trace is not None:
            self.trace.append((("kernel", compiled), start, end))

    def stages(self, compiled: "CudaCompiled", buffers: list) -> None:
        """Enqueue every stage: our kernel's launches, and the library's gemm between them."""
        for n, launch in enumerate(compiled.grids):
            if launch is None:
                g = compiled.kernel.stages[n]
                at = compiled.index
                compiled.provider.gemm(self, g, buffers[at[g.a]], buffers[at[g.b]], buffers[at[g.c]])
            else:
                grid, block = launch
                compiled.fn[grid, block, self.stream](n, *buffers)

    def mark(self):
        return self.timings[-1][1] if self.timings else None  # the end event of the last launch

    def copy_from(self, source: "CudaQueue", buffer, after=None):
        with self.gpu:
            out = self.cuda.device_array(buffer.shape, buffer.dtype, stream=self.stream)
        if source.gpu.id == self.gpu.id:
            done = after
            if done is None:
                with source.gpu:
                    done = self.cuda.event()
                    done.record(source.stream)
            with self.gpu:
                done.wait(self.stream)
                began = self._mark() if self.trace is not None else None
                out.copy_to_device(buffer, stream=self.stream)
        else:  # another GPU: through the host
            began = self._mark() if self.trace is not None else None
            with source.gpu:
                host = buffer.copy_to_host(stream=source.stream)
                source.stream.synchronize()
            with self.gpu:
                out.copy_to_device(host, stream=self.stream)
        if self.trace is not None:
            self.trace.append((("transfer", source.chip, out.nbytes), began, self._mark()))
        return out

    # -- tracing on the device's clock: events, placed on the host's by one recorded at the start

    def _mark(self):
        """A point on this chip's stream (an event, read on the device's clock later)."""
        with self.gpu:
            event = self.cuda.event()
            event.record(self.stream)
        return event

    def _seconds(self, mark) -> float:
        return self._origin[1] + self._origin[0].elapsed_time(mark) / 1e3

    def start_trace(self) -> None:
        self.synchronize()
        origin = self._mark()
        origin.synchronize()
        self._origin = (origin, time.perf_counter())
        self.trace = []

    def take_trace(self) -> list[tuple]:
        self.synchronize()
        return [(what, self._seconds(a), self._seconds(b)) for what, a, b in super().take_trace()]

    def download(self, buffer) -> np.ndarray:
        with self.gpu:
            host = buffer.copy_to_host(stream=self.stream)
            self.stream.synchronize()
        return host

    def synchronize(self) -> None:
        with self.gpu:
            self.stream.synchronize()

    def busy_seconds(self) -> float:
        """The sum of this chip's kernel times, from events around each launch."""
        self.synchronize()
        with self.gpu:
            return sum(start.elapsed_time(end) for start, end in self.timings) / 1e3


class CudaCompiled(Compiled):
    def __init__(self, kernel, source: str, fn, grids: tuple, provider=None):
        super().__init__(kernel, source, launches=len(grids))
        self.fn = fn
        self.grids = grids  # per stage: (grid, block), or None for a library's gemm
        self.provider = provider
        self.index = {p.name: i for i, p in enumerate(kernel.params)}


class CudaDevice(Device):
    name = "cuda"
    simulator = False
    tile = 16

    def __init__(self, matmul: str = "auto"):
        from .matmul import gpu_core

        self.cuda = import_cuda(self.simulator)
        self.target = render_cuda.Target(self.tile, self.simulator)
        self.gpus = self._gpus()
        self._compiled: dict[str, object] = {}
        self.core = gpu_core(matmul, self.simulator)
        self.machine = "gpu" if self.core.kind == "library" else "gpu (own tiles)"

    def _gpus(self) -> list:
        try:
            available = self.cuda.is_available()
            gpus = list(self.cuda.gpus) if available else []
        except Exception as err:  # noqa: BLE001 - the driver's own error, shortened to one line
            reason = " ".join(str(err).split())
            raise DeviceUnavailable(f"no CUDA GPU ({reason}); use --device cpu or --device sim") from None
        if not gpus:
            raise DeviceUnavailable("no CUDA GPU found; use --device cpu or --device sim")
        return gpus

    def describe(self) -> str:
        names = []
        for gpu in self.gpus:
            with gpu:
                name = self.cuda.get_current_device().name
            names.append(name.decode() if isinstance(name, bytes) else str(name))
        return f"cuda ({len(names)} GPU: {', '.join(dict.fromkeys(names))}; matmul: {self.core.library})"

    def compile(self, kernel, shared: bool = False) -> Compiled:  # chips never share a kernel here
        kernel = render_cuda.prepare(kernel, library=self.core.kind == "library")  # the library's gemm between our stages
        source, grids = render_cuda.render(kernel, self.target)
        fn = self._compiled.get(source)
        if fn is None:
            fn = cache.load(source, "sim" if self.simulator else "cuda").kernel
            if not self.simulator:
                with self.gpus[0]:
                    fn.compile(signature(kernel))  # now, not at the first launch
            self._compiled[source] = fn
        return CudaCompiled(kernel, source, fn, grids, self.core.provider)

    def queues(self, chips: Sequence[int], gpu: int | None = None) -> list[Queue]:
        n = len(self.gpus)
        return [CudaQueue(self, c, self.gpus[(c if gpu is None else gpu) % n]) for c in chips]


def signature(kernel) -> tuple:
    from numba import from_dtype, types

    from ...program.model import Tensor

    out = [types.int64]
    for p in kernel.params:
        dtype = Tensor(p.name, p.shape, p.dtype, None).storage
        out.append(types.Array(from_dtype(dtype), len(p.buffer_shape), "C"))
    return tuple(out)
