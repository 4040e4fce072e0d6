"""A program nobody instrumented for specscope: Hugging Face transformers' own ``generate`` on a
tiny random Llama (no NVTX, eager PyTorch), the capture range around one call.

    nsys profile -t cuda --capture-range=cudaProfilerApi --capture-range-end=stop \\
        python scripts/real/hf_generate.py [CALLS]

CALLS (default 1): calls of ``generate`` inside the capture range, one after the other (400: a
2 M-kernel eager export, ``bench/README.md``).
"""

import argparse

p = argparse.ArgumentParser(description="Hugging Face generate on a tiny random Llama (eager)")
p.add_argument("calls", nargs="?", type=int, default=1, help="calls of generate (default 1)")
calls = p.parse_args().calls  # (before torch: a bad CALLS is one line, exit 2)
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
kw = {"do_sample": False, "pad_token_id": 0}
with torch.no_grad():
    model.generate(ids, max_new_tokens=4, min_new_tokens=4, **kw)  # warm-up
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for _ in range(calls):
        out = model.generate(ids, max_new_tokens=24, min_new_tokens=24, **kw)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
print("generated", tuple(out.shape))
