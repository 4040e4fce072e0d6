"""Progress of long loads: a rich bar on a terminal, nothing in pipes, files or CI.

The loader calls :func:`report` between its few big reads (NVTX, CUDA API calls, each part of
the GPU operations). Without an active :func:`progress_bar` that is one global lookup and a
return, so library users and tests pay nothing. ::

    with progress_bar("ops20m.sqlite"):
        analyze(path, spec)          # the loader reports; the bar advances

The bar is on stderr and only when stderr is a terminal and ``CI`` is unset (``enabled=None``);
``SPECSCOPE_PROGRESS=0/1`` forces it off/on.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Hook = Callable[[str, int, int], None]
_hook: Hook | None = None
_lock = threading.Lock()


def report(stage: str, done: int, total: int) -> None:
    """Tell the active bar (if any) that ``done`` of ``total`` parts of ``stage`` are read."""
    hook = _hook
    if hook is not None:
        hook(stage, done, total)


def wanted(stream=None) -> bool:
    """Whether to draw a bar: ``SPECSCOPE_PROGRESS``, else a terminal outside CI."""
    forced = os.environ.get("SPECSCOPE_PROGRESS")
    if forced is not None:
        return forced not in ("", "0", "false", "no")
    stream = sys.stderr if stream is None else stream
    return not os.environ.get("CI") and bool(getattr(stream, "isatty", lambda: False)())


@contextmanager
def hooked(hook: Hook | None) -> Iterator[None]:
    """Install ``hook`` as the receiver of :func:`report` calls for the duration."""
    global _hook
    with _lock:
        previous, _hook = _hook, hook
    try:
        yield
    finally:
        with _lock:
            _hook = previous


@contextmanager
def progress_bar(label: str, enabled: bool | None = None) -> Iterator[None]:
    """A transient rich bar on stderr fed by the loader's :func:`report` calls."""
    if not (wanted() if enabled is None else enabled):
        yield
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    columns = (TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task(f"{label}: opening", total=None)

        def hook(stage: str, done: int, total: int) -> None:
            bar.update(task, description=f"{label}: {stage}", completed=done, total=total)

        with hooked(hook):
            yield


@contextmanager
def count_bar(label: str, total: int, enabled: bool | None = None) -> Iterator[Callable[[], None]]:
    """A bar over ``total`` items (e.g. exports); yields ``advance()``; silent when not wanted."""
    if not (wanted() if enabled is None else enabled):
        yield lambda: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda: bar.advance(task)
