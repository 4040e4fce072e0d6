"""A decode loop whose GPU work is launched from a worker thread, as SGLang's overlap scheduler
launches its forward passes, with nothing added for specscope.

The main thread schedules: it hands each step to a worker thread through a queue, then waits
for the step before's sampled tokens (a CUDA event, then the tokens' pinned host copy) while
the worker launches the next step: an H2D copy of the inputs, one CUDA graph replay (the model)
and the argmax of the logits, copied to the host on a second stream. Main and worker threads
both call CUDA; only the worker replays graphs. No NVTX. Capture and warm-up happen before
``cudaProfilerStart``.

    nsys profile -t cuda,osrt --cuda-graph-trace=graph --capture-range=cudaProfilerApi \\
        --capture-range-end=stop python scripts/real/overlap_thread.py [STEPS]
"""

import queue
import sys
import threading

import torch

HIDDEN, BATCH = 512, 8


def main() -> None:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    torch.manual_seed(0)
    w = [torch.randn(HIDDEN, HIDDEN, device="cuda", dtype=torch.half) * 0.02 for _ in range(6)]
    x = torch.zeros(BATCH, HIDDEN, device="cuda", dtype=torch.half)

    def model() -> torch.Tensor:
        h = x
        for m in w:
            h = torch.nn.functional.gelu(h @ m)
        return h

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            model()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        logits = model()
    inputs = torch.randn(BATCH, HIDDEN, dtype=torch.half).pin_memory()
    copy_stream = torch.cuda.Stream()
    work, done = queue.Queue(), queue.Queue()

    def worker() -> None:
        while (step := work.get()) is not None:
            x.copy_(inputs, non_blocking=True)
            graph.replay()
            tokens = logits.argmax(dim=1)
            ready = torch.cuda.Event()
            copy_stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(copy_stream):
                host = tokens.to("cpu", non_blocking=True)
                ready.record(copy_stream)
            done.put((step, ready, host))

    thread = threading.Thread(target=worker)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    thread.start()
    work.put(0)
    sampled = []
    for step in range(1, steps + 1):
        if step < steps:
            work.put(step)  # the next step is launched while this one's tokens come back
        _, ready, host = done.get()
        ready.synchronize()
        sampled.append(host.tolist())
    work.put(None)
    thread.join()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    print("steps", len(sampled), "last", sampled[-1][:3])


if __name__ == "__main__":
    main()
