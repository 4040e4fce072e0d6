"""A program nobody instrumented for specscope: Hugging Face transformers' own ``generate`` on a
tiny random Llama (no NVTX), the capture range around the calls.

    nsys profile -t cuda --capture-range=cudaProfilerApi --capture-range-end=stop \\
        python scripts/real/hf_generate.py [CALLS] [--static]

CALLS (default 1): calls of ``generate`` inside the capture range, one after the other (400: a
2 M-kernel eager export, ``bench/README.md``). Eager PyTorch by default; ``--static``: a static
KV cache (``cache_implementation="static"``), under which transformers compiles the decoding
forward itself (``torch.compile``: PyTorch's CUDA graph trees replay each decode step; record
with ``--cuda-graph-trace=graph``), after two warm-up calls (compilation, graph capture).
"""

import argparse

p = argparse.ArgumentParser(description="Hugging Face generate on a tiny random Llama")
p.add_argument("calls", nargs="?", type=int, default=1, help="calls of generate (default 1)")
p.add_argument("--static", action="store_true", help="static KV cache (compiled, CUDA graphs)")
args = p.parse_args()  # (before torch: a bad CALLS is one line, exit 2)
if args.calls < 1:
    p.error("CALLS must be at least 1")

import torch  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

torch.manual_seed(0)
cfg = LlamaConfig(
    vocab_size=1000, hidden_size=256, intermediate_size=512, num_hidden_layers=4,
    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
)  # fmt: skip
model = LlamaForCausalLM(cfg).cuda().half().eval()
ids = torch.randint(3, 1000, (2, 16), device="cuda")
kw = {"do_sample": False, "pad_token_id": 0}
# warm-up: kernels loaded; with a static cache, the forward compiled and its graphs captured at
# the length the captured calls use
warm = [24, 24] if args.static else [4]
if args.static:
    kw["cache_implementation"] = "static"
with torch.no_grad():
    for n in warm:
        model.generate(ids, max_new_tokens=n, min_new_tokens=n, **kw)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for _ in range(args.calls):
        out = model.generate(ids, max_new_tokens=24, min_new_tokens=24, **kw)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
print("generated", tuple(out.shape))
