"""One module per device. A device compiles kernels and gives each chip a queue:

base.py            what the executor asks of a device, and of each chip's queue on it
matmul.py          which matmul core a device uses, and why (a library where present, else our own)
gemm_providers.py  the libraries a GPU matmul stage hands its gemm to (cuBLAS through CuPy or PyTorch)
cpu.py             each kernel one Numba CPU function (parallel when big), one worker thread per
                   chip, so the chips run concurrently
cuda.py            real GPUs; chip i on GPU i mod k, each chip with its own stream and buffers
sim.py             Numba's CUDA simulator running the CUDA kernels (CI, tiny shapes)
pool.py            the distinct sources a plan's kernels lack in the cache, compiled in worker processes
"""

from __future__ import annotations

from .base import Compiled, Device, DeviceUnavailable, Queue

DEVICES = ("cpu", "sim", "cuda")


def get_device(name: str, matmul: str = "auto") -> Device:
    """The device `name`, its matmul core chosen by `matmul` (auto | library | own; see matmul.py)."""
    if name == "cpu":
        from .cpu import CpuDevice

        return CpuDevice(matmul)
    if name == "sim":
        from .sim import SimDevice

        return SimDevice(matmul)
    if name == "cuda":
        from .cuda import CudaDevice

        return CudaDevice(matmul)
    raise DeviceUnavailable(f"unknown device {name}; devices are {', '.join(DEVICES)}")


__all__ = ["DEVICES", "Compiled", "Device", "DeviceUnavailable", "Queue", "get_device"]
