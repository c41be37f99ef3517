"""The simulator device: the CUDA device's kernels and queues, run by Numba's CUDA
simulator (every GPU thread a Python thread). For CI without a GPU: small tiles (8 x 8,
64 threads a block), one block a launch (the kernels loop over their work), tiny shapes."""

from __future__ import annotations

import sys
import time
import warnings

import numpy as np

from .cuda import CudaDevice, CudaQueue

SWITCH_INTERVAL = 1e-5  # seconds


class SimQueue(CudaQueue):
    busy = 0.0
    def launch(self, compiled, buffers: list) -> None:
        # the simulator computes with numpy scalars, which warn where a GPU silently gives inf or nan
        # Its block manager polls the threads for barriers: hand the GIL round often.
        interval = sys.getswitchinterval()
        sys.setswitchinterval(SWITCH_INTERVAL)
        started = time.perf_counter()
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore", RuntimeWarning)
                with self.gpu:
                    self.stages(compiled, buffers)
        finally:
            sys.setswitchinterval(interval)
            ended = time.perf_counter()
            self.busy += ended - started  # the simulator runs a launch to its end
            if self.trace is not None:
                self.trace.append((("kernel", compiled), started, ended))

    def busy_seconds(self) -> float:
        return self.busy

    # the simulator does its work as it is enqueued: the host's clock is its clock
    def _mark(self):
        return time.perf_counter()

    def start_trace(self) -> None:
        self.trace = []

    def take_trace(self) -> list[tuple]:
        found, self.trace = self.trace or [], None
        return found


class SimDevice(CudaDevice):
    name = "sim"
    simulator = True
    tile = 8

    def describe(self) -> str:
        return "sim (Numba's CUDA simulator)" + ("" if self.core.own else f"; matmul: {self.core.library}")

    def queues(self, chips, gpu=None):
        return [SimQueue(self, c, self.gpus[0]) for c in chips]
