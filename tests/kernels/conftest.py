import pytest
import torch

from specscope.kernels.ops.attention.selection import triton_platform


@pytest.fixture
def triton_device() -> str:
    """The device the fused kernels run on here: CUDA, or the CPU under TRITON_INTERPRET=1."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if not triton_platform(device):
        pytest.skip("fused kernels need CUDA or TRITON_INTERPRET=1")
    return device
