"""A program nobody instrumented for specscope: unified memory. A 64 MiB buffer from the driver's
``cuMemAllocManaged`` (through ctypes) is written by the CPU, then updated by PyTorch kernels on
the GPU (page faults: host-to-device migrations), then read back by the CPU (device-to-host
migrations), 8 times in the capture range (no NVTX).

    nsys profile -t cuda --cuda-um-gpu-page-faults=true --cuda-um-cpu-page-faults=true \\
        --capture-range=cudaProfilerApi --capture-range-end=stop \\
        python scripts/real/unified_memory.py
"""

import ctypes

import numpy as np
import torch

N = 16 << 20  # floats: 64 MiB
torch.zeros(1, device="cuda")  # the primary context, current on this thread
libcuda = ctypes.CDLL("libcuda.so.1")
ptr = ctypes.c_uint64()
rc = libcuda.cuMemAllocManaged(ctypes.byref(ptr), ctypes.c_size_t(N * 4), ctypes.c_uint(1))
if rc != 0:
    raise SystemExit(f"cuMemAllocManaged failed: CUresult {rc}")


class Managed:
    """The managed buffer as a CUDA array (zero copy into torch)."""

    __cuda_array_interface__ = {"shape": (N,), "typestr": "<f4", "data": (ptr.value, False),
                                "version": 3}  # fmt: skip


gpu = torch.as_tensor(Managed(), device="cuda")
cpu = np.ctypeslib.as_array((ctypes.c_float * N).from_address(ptr.value))
torch.cuda.cudart().cudaProfilerStart()
total = 0.0
for i in range(8):
    cpu[:] = i  # CPU writes: the pages move to the host
    gpu.mul_(2.0).add_(1.0)  # GPU kernels touch every page: host-to-device migrations
    torch.cuda.synchronize()
    total += float(cpu[:: 1 << 12].sum())  # CPU reads a float per page: device-to-host
torch.cuda.cudart().cudaProfilerStop()
print("checksum", total)
