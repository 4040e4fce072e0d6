"""NVTX instrumentation overhead of the EAGLE loop, unprofiled: interleaved on/off pairs.

Single runs differ by more than the effect (process-to-process noise of ±10 % was seen on an
H200), so this alternates ``--nvtx on`` / ``--nvtx off`` runs of the same configuration, in a
seeded random order inside each pair, and reports per pair the ratio of step-time medians and, over
the pairs, the median ratio with its min/max. Each run is a fresh process (``specscope run``).

    python bench/nvtx_overhead.py --pairs 6 --out nvtx.jsonl -- --variant draft_alias --bs 1

Arguments after ``--`` go to ``specscope run`` (``--steps``/``--warmup`` default to 200/20).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

RUN = [sys.executable, "-c", "from specscope.cli.run import run; run()"]


def one_run(args: list[str], nvtx: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        cmd = [*RUN, *args, "--nvtx", nvtx, "--json", str(out)]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        return json.loads(out.read_text())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--pairs", type=int, default=6)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, required=True, help="JSON lines, one per run (appended)")
    p.add_argument("run_args", nargs="*", help="arguments of `specscope run` (after --)")
    a = p.parse_args()
    args = list(a.run_args)
    if "--steps" not in args:
        args += ["--steps", "200"]
    if "--warmup" not in args:
        args += ["--warmup", "20"]
    rng = random.Random(a.seed)
    ratios = []
    with a.out.open("a") as log:
        for pair in range(a.pairs):
            order = ["on", "off"]
            rng.shuffle(order)
            p50 = {}
            for nvtx in order:
                r = one_run(args, nvtx)
                p50[nvtx] = r["step_ms_p50"]
                log.write(json.dumps({"pair": pair, "nvtx": nvtx, "args": args, **r}) + "\n")
            ratios.append(p50["on"] / p50["off"])
            print(f"pair {pair}: on {p50['on']:.4f} ms, off {p50['off']:.4f} ms, "
                  f"on/off {ratios[-1]:.4f}", flush=True)  # fmt: skip
    med = statistics.median(ratios)
    spread = f"min {min(ratios):.4f}, max {max(ratios):.4f}"
    print(f"NVTX on/off step-time ratio over {len(ratios)} pairs: median {med:.4f} ({spread})")
    print(f"NVTX overhead: {100 * (med - 1):+.2f} %")


if __name__ == "__main__":
    main()
