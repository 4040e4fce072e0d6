"""What one run of the EAGLE loop depends on (`LoopConfig`) and what it returns (`RunResult`),
with the per-request state (`Request`) and the seeded simulated acceptance."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from specscope.errors import SpecscopeError
from specscope.kernels.backend import VARIANT_NAMES
from specscope.kernels.ops.attention import DSAGeometry

ACCEPT_MODES = ("sim", "real")


@dataclass
class LoopConfig:
    """Everything a run depends on; `graphs=None` means on for CUDA, off for the CPU."""

    variant: str = "env"  # a name of VARIANT_NAMES; "env" reads the environment flags
    bs: int = 1  # requests per batch
    steps: int = 50  # measured decode steps
    warmup: int = 10  # decode steps before the measured ones
    context: int = 8192  # prompt length (requests vary it down by up to 1/8, at most 96)
    index_kpool: int = 4  # tokens pooled into one index key (k: 1, 2, 4 or 8)
    device: str = "cuda"  # cuda or cpu
    graphs: bool | None = None
    nvtx: bool = True  # NVTX ranges (domain specscope) around steps and phases
    accept_mode: str = "sim"  # sim: accept lengths drawn from the seed; real: the target's
    accept_len: float = 5.0  # mean accept length in sim mode (tokens per request per step)
    seed: int = 0  # of the weights, prompts and simulated acceptance
    hidden: int = 1024  # model width
    layers: int = 4  # target model layers
    draft_layers: int = 1  # draft model layers
    vocab: int = 1024  # vocabulary size
    page_size: int = 64  # KV slots per page (P)
    index_topk: int = 2048  # keys each query attends to (K)
    spec_steps: int = 5  # speculative_num_steps N: N - 1 draft forwards, T = N + 1
    max_new_tokens: int | None = None  # per request; a finished request is replaced
    num_sms: int | None = None  # default: the GPU's SM count, 8 on the CPU

    @property
    def num_draft_tokens(self) -> int:
        return self.spec_steps + 1

    @property
    def use_graphs(self) -> bool:
        return self.device == "cuda" if self.graphs is None else self.graphs

    def prompt_len(self, rid: int) -> int:
        span = max(1, min(97, self.context // 8))
        return self.context - (rid * 37) % span

    @property
    def page_table_width(self) -> int:
        t = self.num_draft_tokens
        budget = (
            self.max_new_tokens + t if self.max_new_tokens else (self.warmup + self.steps + 1) * t
        )
        need = self.context + budget + 2 * t
        return -(-need // self.page_size) * self.page_size

    def validate(self) -> None:
        """Raise SpecscopeError (one line, with the fix) for flags that cannot run."""
        t = self.num_draft_tokens

        def bad(msg: str) -> None:
            raise SpecscopeError(msg)

        if self.variant not in VARIANT_NAMES:
            bad(f"unknown variant {self.variant!r}: one of {', '.join(VARIANT_NAMES)}")
        if self.device not in ("cuda", "cpu"):
            bad(f"--device must be cuda or cpu, not {self.device}")
        if self.device == "cuda" and not torch.cuda.is_available():
            bad("no CUDA device here: use --device cpu (eager, no graphs)")
        if self.device == "cpu" and self.graphs:
            bad("CUDA graphs need --device cuda: add --no-graphs")
        for name in ("bs", "steps", "hidden", "layers", "draft_layers"):
            if getattr(self, name) < 1:
                bad(f"--{name.replace('_', '-')} must be at least 1")
        if self.warmup < 0:
            bad("--warmup must be >= 0")
        if self.spec_steps < 2:
            bad("--spec-steps must be at least 2 (one draft forward)")
        if self.accept_mode not in ACCEPT_MODES:
            bad(f"--accept-mode must be one of {', '.join(ACCEPT_MODES)}")
        if not 1 <= self.accept_len <= t:
            bad(f"--accept-len must be in 1..{t} (T = spec steps + 1)")
        if self.vocab < 2:
            bad("--vocab must be at least 2")
        if self.context < t + 2:
            bad(f"--context must be at least {t + 2}")
        if self.max_new_tokens is not None and self.max_new_tokens < 1:
            bad("--max-new-tokens must be at least 1")
        if self.page_size < 2 * t or self.page_size & (self.page_size - 1):
            bad(f"--page-size must be a power of two >= {2 * t}")
        if self.index_kpool not in (1, 2, 4, 8):
            bad("--index-kpool must be 1, 2, 4 or 8")
        if not 1 <= self.index_topk <= self.page_table_width:
            bad(f"--index-topk must be in 1..{self.page_table_width} (the page-table width)")

    def geometry(self, num_sms: int) -> DSAGeometry:
        return DSAGeometry(
            page_size=self.page_size,
            index_topk=self.index_topk,
            index_kpool=self.index_kpool,
            page_table_width=self.page_table_width,
            num_sms=num_sms,
            num_draft_tokens=self.num_draft_tokens,
        )


def simulated_accept_len(mean: float, t: int, seed: int, rid: int, step: int) -> int:
    """Accept length of request `rid` at its decode step `step`, in 1..t, with mean `mean`.

    floor(mean + u) (u uniform in [0, 1): mean exactly `mean`), then -1 or +1 with probability
    1/4 each when both stay in 1..t (symmetric: the mean is kept). A function of the seed, the
    request and its step only, so batch composition never changes it.
    """
    rng = np.random.default_rng([seed, rid, step])
    a = min(t, max(1, math.floor(mean + rng.random())))
    x = rng.random()
    if a - 1 >= 1 and a + 1 <= t:
        a += -1 if x < 0.25 else (1 if x >= 0.75 else 0)
    return a


@dataclass
class Request:
    rid: int
    row: int  # pool row
    n: int  # committed tokens, prompt included
    last: int  # x_{n-1}
    generated: list[int] = field(default_factory=list)
    steps: int = 0  # decode steps taken (seeds the simulated acceptance)


@dataclass
class RunResult:
    """What `specscope run` prints and writes (JSON names as in the issue)."""

    tokens: int  # generated in the measured steps, all requests
    accept_len_mean: float  # tokens per request per measured step
    tok_per_s_per_request: float
    step_ms_p50: float
    step_ms_p90: float
    draft_metadata_bytes: int
    tokens_sha256: str  # every generated token of the run, warm-up included
    variant: str = ""
    fusion: bool = False
    share: bool = False
    builder: str = ""
    copies_per_step: int = 0
    device: str = ""
    graphs: bool = False
    bs: int = 0
    steps: int = 0
    warmup: int = 0
    context: int = 0
    index_kpool: int = 0
    accept_mode: str = ""
    step_ms_mean: float = 0.0
    wall_s: float = 0.0
    gpu: str = ""
    step_ms: list[float] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)
