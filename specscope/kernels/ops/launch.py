"""A Triton launch bound once: validated and specialised at the first call, then re-issued cheaply.

Launching a `@triton.jit` kernel through `kernel[grid](*args)` costs tens of µs of host time per
call: Triton binds every argument, computes the specialisation key (dtype, alignment and
"equals 1" of each argument), looks the compiled kernel up, asks every tensor for its data
pointer and has the driver check it. Before a CUDA-graph replay that host time is the gap the
GPU waits in. When every argument is the same from call to call (static buffers, a fixed batch
bucket), none of that work changes the result, so `BoundLaunch` does it once:

    first call        kernel[grid](*args, **constexprs)  (compile or cache hit, launch) and keep
                      the compiled kernel it returns
    every later call  compiled.run(grid, stream, ..., *raw_args): the compiled kernel's own
                      launcher, with tensors replaced by their data pointers (plain ints: no
                      `data_ptr()` call, no pointer check) and nothing else computed

    host:  |--bind+check+key+lookup+launch--|   |-launch-|   |-launch-|
    GPU:                                  [k]            [k]          [k]

The launcher reads the current stream at each call, so a bound launch can also be captured into
a CUDA graph (it writes into the graph being captured on the current stream). The bound tensors
stay referenced, so their pointers stay valid for the life of the `BoundLaunch`.

Every call goes through the JIT (the first path) under the Triton interpreter
(`TRITON_INTERPRET=1`, CPU tests), while a launch hook is installed (a profiler such as proton
wants its launch metadata), and if the compiled kernel lacks the launcher fields of Triton
>= 3.3 (`run`, `function`, `packed_metadata`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import torch

try:  # Triton >= 3.4
    from triton import knobs as _knobs
except ImportError:  # pragma: no cover - older Triton: no global hooks to honour
    _knobs = None


def _hook_active(hook) -> bool:
    """A launch hook is set: None and an empty `HookChain` (Triton >= 3.5) are not."""
    return hook is not None and bool(getattr(hook, "calls", True))


def launch_hooks() -> tuple:
    """Triton's global (enter, exit) launch hooks, or (None, None)."""
    if _knobs is None:
        return None, None
    return _knobs.runtime.launch_enter_hook, _knobs.runtime.launch_exit_hook


def _raw(arg):
    """A tensor argument as its data pointer (what the launcher reads from it); others as is."""
    return arg.data_ptr() if isinstance(arg, torch.Tensor) else arg


class BoundLaunch:
    """One launch of `kernel` on `grid` with fixed `args` (positional) and `constexprs` (by
    name, `num_warps` included); `launch()` issues it. No host sync, ever."""

    def __init__(self, kernel, grid: Sequence[int], args: Sequence, constexprs: dict) -> None:
        self.kernel = kernel
        self.grid = tuple(grid) + (1,) * (3 - len(grid))  # (x, y, z)
        self.args = tuple(args)
        self.constexprs = dict(constexprs)
        names = list(getattr(kernel, "arg_names", ()))
        rest = [self.constexprs[n] for n in names[len(self.args) :] if n in self.constexprs]
        # Every parameter in signature order, constexprs included (Triton >= 3.3's launcher
        # takes them and skips them), tensors as data pointers.
        self.raw_args = tuple(_raw(a) for a in self.args) + tuple(rest)
        self.interpreted = os.environ.get("TRITON_INTERPRET") == "1"
        self.device = next((a.device for a in self.args if isinstance(a, torch.Tensor)), None)
        self.compiled = None  # set by the first launch on CUDA
        self._stream_of = None

    @property
    def direct(self) -> bool:
        """Later launches skip the JIT (the compiled kernel's launcher is bound)."""
        return self.compiled is not None

    def launch(self) -> None:
        """Issue the kernel: through the JIT the first time, directly afterwards."""
        enter, exit_ = launch_hooks()
        if self.compiled is None or _hook_active(enter) or _hook_active(exit_):
            self._launch_jit()
            return
        c, (gx, gy, gz) = self.compiled, self.grid
        stream = self._stream_of(self.device.index)
        c.run(gx, gy, gz, stream, c.function, c.packed_metadata, None, enter, exit_, *self.raw_args)

    __call__ = launch

    def _launch_jit(self) -> None:
        compiled = self.kernel[self.grid](*self.args, **self.constexprs)
        if self.interpreted or self.compiled is not None or self.device is None:
            return
        if self.device.type != "cuda" or len(self.raw_args) != len(self.kernel.arg_names):
            return
        if hasattr(compiled, "result") and not hasattr(compiled, "packed_metadata"):
            compiled = compiled.result()  # an asynchronous compile's future
        if all(hasattr(compiled, f) for f in ("run", "function", "packed_metadata")):
            from triton.runtime.driver import driver

            self._stream_of = driver.active.get_current_stream
            self.compiled = compiled
