"""The simulator device: the CUDA device's kernels and queues, run by Numba's CUDA
simulator (every GPU thread a Python thread). For CI without a GPU: small tiles (8 x 8,
64 threads a block), one block a launch (the kernels loop over their work), tiny shapes."""

from __future__ import annotations

import warnings

import numpy as np

from .cuda import CudaDevice, CudaQueue


class SimQueue(CudaQueue):
    def launch(self, compiled, buffers: list) -> None:
        # the simulator computes with numpy scalars, which warn where a GPU silently gives inf or nan
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)
            super().launch(compiled, buffers)


class SimDevice(CudaDevice):
    name = "sim"
    simulator = True
    tile = 8

    def describe(self) -> str:
        return "sim (Numba's CUDA simulator)"

    def queues(self, chips: int):
        return [SimQueue(self, c, self.gpus[0]) for c in range(chips)]
