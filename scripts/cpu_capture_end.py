"""A CPU-only loop of NVTX ``step`` ranges (domain ``specscope``) that outlasts its capture, for
the fixture ``tests/data/cpu_capture_end_2023.sqlite`` (nsys 2023.4.4 on a CPU machine):

    specscope-nsys profile -t nvtx -s none --cpuctxsw=none --delay=1 --duration=1 \\
        -o cpu_capture_end python scripts/cpu_capture_end.py

Each step sleeps 0.2 s inside its range, for 4 s in all, so the capture (from 1 s to 2 s) starts
and stops inside a step. nsys drops the range open when the capture starts and writes the one
still open when it stops with its end at the capture's end, to the nanosecond
(``ANALYSIS_DETAILS.duration``): the program never closed it inside the capture. Needs
``nvtx<=0.2.11`` with nsys 2023.4.4 (newer ``nvtx`` records no ranges there).
"""

import time

import nvtx

end = time.monotonic() + 4.0
while time.monotonic() < end:
    with nvtx.annotate("step", domain="specscope"):
        time.sleep(0.2)
