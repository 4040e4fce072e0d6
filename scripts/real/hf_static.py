"""A program nobody instrumented for specscope: Hugging Face transformers' own ``generate`` with
a static KV cache (``cache_implementation="static"``), under which transformers compiles the
decoding forward itself (``torch.compile``, PyTorch's CUDA graph trees replaying each decode
step), on a tiny random Llama; no NVTX. Two warm-up calls (compilation, graph capture) run
before the capture range, then CALLS calls inside it.

    nsys profile -t cuda --cuda-graph-trace=graph --capture-range=cudaProfilerApi \\
        --capture-range-end=stop python scripts/real/hf_static.py [CALLS]
"""

import argparse

p = argparse.ArgumentParser(description="Hugging Face generate, static cache (compiled)")
p.add_argument("calls", nargs="?", type=int, default=2, help="calls of generate (default 2)")
calls = p.parse_args().calls
if calls < 1:
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
kw = {"do_sample": False, "pad_token_id": 0, "cache_implementation": "static"}
with torch.no_grad():
    for _ in range(2):  # compiled, captured
        model.generate(ids, max_new_tokens=24, min_new_tokens=24, **kw)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for _ in range(calls):
        out = model.generate(ids, max_new_tokens=24, min_new_tokens=24, **kw)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
print("generated", tuple(out.shape))
