"""A decode loop shaped like vLLM's piecewise CUDA graphs, with nothing added for specscope.

vLLM V1 compiles the model into CUDA graphs split at every attention op: a step replays one
graph piece per layer boundary, with attention run eagerly between the pieces, and each
batch-size bucket has its own set of pieces. This program does the same with a small model:
LAYERS layers, so LAYERS + 1 graph pieces per step, with eager attention kernels between them,
an eager H2D copy of the step's inputs before the first piece and a D2H copy of the sampled
tokens after the last (a sync, as a sampler's ``.tolist()``). The batch runs at size 3 (bucket
4) for STEPS steps, then at size 8 (bucket 8) for STEPS more: the pieces' graph ids change with
the bucket. No NVTX. Capture and warm-up happen before ``cudaProfilerStart``.

    nsys profile -t cuda --cuda-graph-trace=graph --capture-range=cudaProfilerApi \\
        --capture-range-end=stop python scripts/real/piecewise_graphs.py [STEPS] [LAYERS]
"""

import sys

import torch

HIDDEN = 256
BUCKETS = (4, 8)


class Pieces:
    """The graph pieces of one bucket: piece i runs layer i's MLP and layer i + 1's QKV
    projection (the first: the embedding's projection only; the last: the output head)."""

    def __init__(self, bucket: int, weights: list[torch.Tensor], pool) -> None:
        self.x = torch.zeros(bucket, HIDDEN, device="cuda", dtype=torch.half)
        self.attn = torch.zeros_like(self.x)  # attention output, written eagerly between pieces
        self.qkv = [torch.zeros(bucket, 3 * HIDDEN, device="cuda", dtype=torch.half)]
        self.graphs = []
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for i, w in enumerate(weights):
                self._piece(i, w, warm=True)
        torch.cuda.current_stream().wait_stream(stream)
        for i, w in enumerate(weights):
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool):
                self._piece(i, w, warm=False)
            self.graphs.append(graph)

    def _piece(self, i: int, w: torch.Tensor, warm: bool) -> None:
        h = torch.nn.functional.layer_norm(self.x + self.attn, (HIDDEN,))
        h = torch.nn.functional.gelu(h @ w[:, :HIDDEN].T) @ w[:, HIDDEN : 2 * HIDDEN]
        self.x.copy_(h)
        qkv = self.x @ w[:, 2 * HIDDEN :].repeat(1, 3)
        if warm:  # (the static buffers the captured piece writes into)
            self.qkv.append(qkv.clone())
        else:
            self.qkv[i + 1].copy_(qkv)


def attention(qkv: torch.Tensor) -> torch.Tensor:
    """Eager attention of one layer over the batch (a few kernels, as a paged kernel is)."""
    q, k, v = qkv.split(HIDDEN, dim=1)
    return torch.softmax(q @ k.T / HIDDEN**0.5, dim=-1) @ v


def main() -> None:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    layers = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    torch.manual_seed(0)
    weights = [
        torch.randn(HIDDEN, 3 * HIDDEN, device="cuda", dtype=torch.half) * 0.02
        for _ in range(layers + 1)
    ]
    pool = torch.cuda.graph_pool_handle()
    pieces = {b: Pieces(b, weights, pool) for b in BUCKETS}
    inputs = torch.randn(max(BUCKETS), HIDDEN, dtype=torch.half).pin_memory()
    tokens = []
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for batch, bucket in ((3, 4), (8, 8)):
        p = pieces[bucket]
        for _ in range(steps):
            p.x[:batch].copy_(inputs[:batch], non_blocking=True)  # the step's inputs (H2D)
            for i, graph in enumerate(p.graphs):
                graph.replay()
                if i < layers:
                    p.attn.copy_(attention(p.qkv[i + 1]))
            tokens.append(p.x[:batch].argmax(dim=1).tolist())  # sampled tokens (D2H, a sync)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    print("steps", len(tokens), "last", tokens[-1][:3])


if __name__ == "__main__":
    main()
