"""Expected failures of the profiler side; each one line with its fix (see specscope.errors)."""

from __future__ import annotations

from specscope.errors import SpecscopeError


class ProfilerError(SpecscopeError):
    """nsys, the profiled command or the output folder is not usable as asked."""


class NsysNotFound(ProfilerError):
    """No nsys anywhere we looked."""


class NsysTooOld(ProfilerError):
    """This nsys cannot export SQLite."""


class CommandNotFound(ProfilerError):
    """The command to profile does not exist."""


class OutputNotWritable(ProfilerError):
    """The output folder cannot be created or written."""


class NoReport(ProfilerError):
    """nsys made no report (capture range never opened, or the import failed)."""


class NoActivity(ProfilerError):
    """The export lacks what was asked for: CUDA activity on a GPU machine, or NVTX ranges."""


class CommandFailed(ProfilerError):
    """The profiled command exited non-zero: the wrapper exits with the same status."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.exit_code = status if 0 < status < 256 else 1
