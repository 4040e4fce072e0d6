"""A pure-Python program with the NVTX shape of an EAGLE decode loop, for CPU-only test fixtures.

No torch, no CUDA: each phase is a short busy-wait, so a CPU machine with nsys 2023.4.4 can record
the same NVTX structure the GPU fixtures have (``scripts/fixture_program.py``). Every decode step
is a ``step`` range in domain ``specscope`` holding, in order, the ranges::

    step
    |- draft.prepare        200 us
    |- draft.replay         600 us
    |- verify.prepare       300 us
    |- verify.replay        800 us
    |- accept               150 us
    |- draft_extend.prepare 250 us
    '- draft_extend.replay  500 us

Two warm-up steps run first and are recorded like the others (there is no capture range on the
CPU), so ``--steps 8`` gives 10 ``step`` ranges and 80 ranges in all. Phases are always push/pop
ranges; ``--step-style startend`` makes ``step`` a start/end range instead. Needs ``nvtx<=0.2.11``
with nsys 2023.4.4 (newer ``nvtx`` records no ranges there).

    nsys profile -t nvtx,osrt -s none --cpuctxsw=none -o cpu_eagle \\
        python scripts/cpu_fixture_program.py --steps 8
"""

from __future__ import annotations

import argparse
import time

import nvtx

DOMAIN = "specscope"
WARMUP_STEPS = 2

# Busy-wait per phase, in microseconds; all different so that durations tell phases apart.
PHASES_US: dict[str, int] = {
    "draft.prepare": 200,
    "draft.replay": 600,
    "verify.prepare": 300,
    "verify.replay": 800,
    "accept": 150,
    "draft_extend.prepare": 250,
    "draft_extend.replay": 500,
}


def busy_wait_us(us: int) -> None:
    """Spin (no sleep, so the thread stays on the CPU) for ``us`` microseconds."""
    end = time.perf_counter_ns() + us * 1000
    while time.perf_counter_ns() < end:
        pass


def phase(name: str, us: int) -> None:
    nvtx.push_range(name, domain=DOMAIN)
    try:
        busy_wait_us(us)
    finally:
        nvtx.pop_range(domain=DOMAIN)


def decode_step(step_style: str) -> None:
    """One decode step: a ``step`` range (push/pop or start/end) around the seven phases."""
    if step_style == "push":
        nvtx.push_range("step", domain=DOMAIN)
    else:
        handle = nvtx.start_range("step", domain=DOMAIN)
    try:
        for name, us in PHASES_US.items():
            phase(name, us)
    finally:
        if step_style == "push":
            nvtx.pop_range(domain=DOMAIN)
        else:
            nvtx.end_range(handle)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="example: python scripts/cpu_fixture_program.py --steps 8 --step-style startend",
    )
    parser.add_argument("--steps", type=int, default=8, help="measured decode steps (default 8)")
    parser.add_argument(
        "--step-style",
        choices=["push", "startend"],
        default="push",
        help="range kind of `step`: push/pop (default) or start/end",
    )
    args = parser.parse_args(argv)
    for _ in range(WARMUP_STEPS + args.steps):
        decode_step(args.step_style)


if __name__ == "__main__":
    main()
