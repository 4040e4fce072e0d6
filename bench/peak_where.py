"""Where a ``specscope`` command's resident memory peaks: the Python stack at each new high.

    python bench/peak_where.py compare /tmp/bench/ranks8x20m.sqlite /tmp/bench/ranks8x20m.sqlite

Runs the command in this process while a watcher process reads this one's ``VmRSS`` every
2 ms and, at each new high (``--step`` MiB above the last), sends it SIGUSR1; the handler
records the main thread's stack (the frames of ``specscope`` only). At the end it prints the
last ``--last`` highs, each with its stack, and ``VmHWM``. Where :mod:`bench_stages` says which
of its listed stages was running, this names the line, in any code: how the twenty-third
session found the second input's read mapped beside the first's leftover heap in ``compare``,
and a report's view clipping every operation. A signal is handled between two bytecodes, so
a long C call is named by the line that made it. The read ahead's child is not watched (its
own ``VmHWM`` is not this process'). Linux only (``/proc``); the tree is the one on
``sys.path`` (``cd / && PYTHONPATH=TREE``: ``python -m`` would put the working directory
first).
"""

from __future__ import annotations

import argparse
import os
import runpy
import signal
import subprocess
import sys
import traceback

WATCH = """
import os, signal, sys, time
pid, step, top = int(sys.argv[1]), int(sys.argv[2]), 0
while True:
    try:
        with open(f"/proc/{pid}/status") as f:
            rss = next(int(x.split()[1]) >> 10 for x in f if x.startswith("VmRSS"))
        if rss > top + step:
            top = rss
            os.kill(pid, signal.SIGUSR1)
    except (OSError, StopIteration):
        break
    time.sleep(0.002)
"""


def _status(key: str) -> int:
    """``key`` of /proc/self/status, in MiB."""
    with open("/proc/self/status") as f:
        return next(int(x.split()[1]) >> 10 for x in f if x.startswith(key))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--step", type=int, default=16, help="MiB above the last high (16)")
    p.add_argument("--last", type=int, default=4, help="highs printed (4)")
    p.add_argument("--frames", type=int, default=8, help="innermost specscope frames (8)")
    own, command = p.parse_known_args()
    highs: list[tuple[int, list[str]]] = []
    main_pid = os.getpid()

    def handler(signum, frame) -> None:
        frames = [f for f in traceback.extract_stack(frame) if "specscope" in f.filename]
        where = [f"{f.filename.rpartition('specscope/')[2]}:{f.lineno} {f.name}" for f in frames]
        highs.append((_status("VmRSS"), where[-own.frames :]))

    def report() -> None:
        if os.getpid() != main_pid or not highs:  # (a forked child runs this too: not its)
            return
        watcher.kill()
        for rss, where in highs[-own.last :]:
            print(f"== {rss} MiB", file=sys.stderr)
            for line in where:
                print(f"    {line}", file=sys.stderr)
        print(f"VmHWM {_status('VmHWM')} MiB", file=sys.stderr)
        highs.clear()

    signal.signal(signal.SIGUSR1, handler)
    watcher = subprocess.Popen([sys.executable, "-c", WATCH, str(main_pid), str(own.step)])
    exit_now = os._exit

    def reported_exit(code: int) -> None:  # (the CLI leaves by os._exit: no atexit)
        report()
        exit_now(code)

    os._exit = reported_exit
    sys.argv = ["specscope", *command]
    try:
        runpy.run_module("specscope", run_name="__main__")
    finally:
        report()


if __name__ == "__main__":
    main()
