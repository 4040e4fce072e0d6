"""Staged runner inputs: every static int input of a runner in one buffer, filled in one copy.

A runner's eager `prepare` ordinarily copies each host field into its own static device buffer:
one H2D `cudaMemcpyAsync` per field (4-6 per runner, ~20 per decode step), each a few µs of
host time between graph replays. Staging lays all fields out in one byte buffer instead, each
field a typed view at a fixed, 64-byte aligned offset, with a host twin of the same layout:

    host (numpy views)   | req_pool_indices | seq_lens | positions | out_cache_loc | ... |
                                              one H2D copy (`upload`)
    device (torch views) | req_pool_indices | seq_lens | positions | out_cache_loc | ... |

The device views *are* the runner's static inputs (same addresses for the life of the runner),
so captured graphs and bound metadata builds read them directly; nothing is unpacked. The host
twin is ordinary (pageable) memory: the copy has read it by the time `upload` returns, so the
next `prepare` may overwrite it at once.
"""

from __future__ import annotations

import math

import numpy as np
import torch

ALIGN = 64  # bytes: every field starts on a 64-byte boundary (vector loads stay aligned)


class StagedInputs:
    """Fields by name (`shapes`: name -> (shape, dtype)) in one device buffer and its host twin.

    `views[name]`       the device tensor of the field (static)
    `host_views[name]`  the numpy array the host writes before `upload`
    """

    def __init__(
        self, shapes: dict[str, tuple[tuple[int, ...], torch.dtype]], device: torch.device
    ) -> None:
        offsets, end = {}, 0
        for name, (shape, dtype) in shapes.items():
            offsets[name] = end
            nbytes = math.prod(shape) * dtype.itemsize
            end += -(-nbytes // ALIGN) * ALIGN
        self.nbytes = end
        self.host = torch.zeros(end, dtype=torch.uint8)  # [nbytes] uint8, pageable
        self.buffer = torch.zeros(end, dtype=torch.uint8, device=device)  # [nbytes] uint8
        self.views: dict[str, torch.Tensor] = {}
        self.host_views: dict[str, np.ndarray] = {}
        for name, (shape, dtype) in shapes.items():
            o, n = offsets[name], math.prod(shape) * dtype.itemsize
            self.views[name] = self.buffer[o : o + n].view(dtype).view(shape)
            self.host_views[name] = self.host[o : o + n].view(dtype).view(shape).numpy()

    def write(self, name: str, arr: np.ndarray) -> None:
        """Host values of one field: its first entries (1-D), or first columns (2-D)."""
        view = self.host_views[name]
        if view.ndim == 2:
            view[:, : arr.shape[1]] = arr
        else:
            view[: arr.size] = arr.reshape(-1)

    def upload(self) -> None:
        """The one H2D copy of every field (no host sync beyond the copy of pageable memory)."""
        self.buffer.copy_(self.host, non_blocking=True)
