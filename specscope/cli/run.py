"""``specscope run``: the toy EAGLE/DSA decode loop that specscope profiles, measured.

A thin click command over `specscope.kernels.model.run_loop`.
"""

from __future__ import annotations

from pathlib import Path

import click

from specscope.cli import Command
from specscope.errors import SpecscopeError

VARIANTS = ("ordinary", "kpool_fused", "draft_alias", "draft_captured", "env")
JSON_FIELDS = (
    "tokens",
    "accept_len_mean",
    "tok_per_s_per_request",
    "step_ms_p50",
    "step_ms_p90",
    "draft_metadata_bytes",
    "tokens_sha256",
)


def _default_device() -> str:
    try:
        import torch
    except ImportError:
        return "cpu"
    return "cuda" if torch.cuda.is_available() else "cpu"


def _describe(r) -> str:
    share = "draft aliasing" if r.share else "sibling copies"
    graphs = "CUDA graphs" if r.graphs else "eager (no graphs)"
    gpu = f" ({r.gpu})" if r.gpu else ""
    lines = [
        f"variant {r.variant}: fusion {'on' if r.fusion else 'off'}, {share}; builder "
        f"{r.builder}, {r.copies_per_step} draft metadata copies per step",
        f"{r.device}{gpu}, {graphs}, bs {r.bs}, {r.steps} steps after {r.warmup} warm-up, "
        f"context {r.context}, index_kpool {r.index_kpool}, accept {r.accept_mode}",
    ]
    width = max(len(k) for k in JSON_FIELDS)
    for key in JSON_FIELDS:
        value = getattr(r, key)
        text = f"{value:.3f}" if isinstance(value, float) else str(value)
        lines.append(f"{key:<{width}}  {text}")
    return "\n".join(lines)


@click.command("run", cls=Command, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--variant", type=click.Choice(VARIANTS), default="env",
              show_default=True,
              help="ordinary (fusion off, sibling copies), kpool_fused (fusion on, sibling "
              "copies), draft_alias (fusion on, aliasing), draft_captured (aliasing, the draft "
              "graph refreshes its own metadata, inputs staged in one copy), env (from the "
              "SPECSCOPE_DSA_* flags).")  # fmt: skip
@click.option("--bs", default=1, show_default=True, type=int, help="Requests per batch.")
@click.option("--steps", default=50, show_default=True, type=int, help="Measured decode steps.")
@click.option("--warmup", default=10, show_default=True, type=int, help="Warm-up steps.")
@click.option("--context", default=8192, show_default=True, type=int,
              help="Prompt length (requests vary it down by up to 1/8, at most 96).")  # fmt: skip
@click.option("--index-kpool", default=4, show_default=True, type=int,
              help="Tokens pooled into one index key (1, 2, 4 or 8).")  # fmt: skip
@click.option("--device", type=click.Choice(["cuda", "cpu"]), default=None,
              help="Default: cuda when available, else cpu.")  # fmt: skip
@click.option("--graphs/--no-graphs", default=None,
              help="CUDA graphs (default: on with --device cuda; the CPU runs eager "
              "only).")  # fmt: skip
@click.option("--json", "json_out", type=click.Path(path_type=Path), default=None,
              help="Also write the results as JSON to this file.")  # fmt: skip
@click.option("--nvtx", type=click.Choice(["on", "off"]), default="on",
              show_default=True,
              help="NVTX ranges (domain specscope); a no-op when the nvtx package is "
              "missing.")  # fmt: skip
@click.option("--accept-mode", type=click.Choice(["sim", "real"]), default="sim",
              show_default=True,
              help="sim: accept lengths drawn from the seed with mean --accept-len; real: draft "
              "vs target argmax.")  # fmt: skip
@click.option("--accept-len", default=5.0, show_default=True, type=float,
              help="Mean accept length in sim mode (tokens per request per step, "
              "1..T).")  # fmt: skip
@click.option("--spec-steps", default=5, show_default=True, type=int,
              help="speculative_num_steps N: N - 1 draft forwards, T = N + 1 verify "
              "rows.")  # fmt: skip
@click.option("--seed", default=0, show_default=True, type=int,
              help="Seed of the weights, prompts and simulated acceptance.")  # fmt: skip
@click.option("--hidden", default=1024, show_default=True, type=int, help="Model width.")
@click.option("--layers", default=4, show_default=True, type=int, help="Target model layers.")
@click.option("--draft-layers", default=1, show_default=True, type=int, help="Draft model layers.")
@click.option("--vocab", default=1024, show_default=True, type=int, help="Vocabulary size.")
@click.option("--page-size", default=64, show_default=True, type=int, help="KV page size P.")
@click.option("--index-topk", default=2048, show_default=True, type=int,
              help="Keys each query attends to (K).")  # fmt: skip
@click.option("--max-new-tokens", default=None, type=int,
              help="Finish a request after this many tokens and admit a new one.")  # fmt: skip
def run(
    variant: str,
    bs: int,
    steps: int,
    warmup: int,
    context: int,
    index_kpool: int,
    device: str | None,
    graphs: bool | None,
    json_out: Path | None,
    nvtx: str,
    accept_mode: str,
    accept_len: float,
    spec_steps: int,
    seed: int,
    hidden: int,
    layers: int,
    draft_layers: int,
    vocab: int,
    page_size: int,
    index_topk: int,
    max_new_tokens: int | None,
) -> None:
    """Run the toy EAGLE decode loop (DSA metadata, draft -> verify -> accept -> draft-extend).

    Prints tokens generated, mean accept length, per-request tok/s, step time p50/p90 (CUDA
    events), the draft graph metadata memory and a hash of the generated tokens; NVTX ranges
    and cudaProfilerApi start/stop around the measured steps make it ready for
    `specscope profile`. On a CPU set TRITON_INTERPRET=1 to run the fused kernels.

    Example: specscope run --variant draft_alias --bs 8 --steps 50 --json out.json
    """
    try:
        from specscope.kernels.model import LoopConfig, run_loop
    except ImportError as e:
        raise SpecscopeError(f"`run` needs torch and triton (pip install -e '.[gpu]'): {e}") from e
    cfg = LoopConfig(
        variant=variant,
        bs=bs,
        steps=steps,
        warmup=warmup,
        context=context,
        index_kpool=index_kpool,
        device=device or _default_device(),
        graphs=graphs,
        nvtx=nvtx == "on",
        accept_mode=accept_mode,
        accept_len=accept_len,
        seed=seed,
        hidden=hidden,
        layers=layers,
        draft_layers=draft_layers,
        vocab=vocab,
        page_size=page_size,
        index_topk=index_topk,
        spec_steps=spec_steps,
        max_new_tokens=max_new_tokens,
    )
    result = run_loop(cfg)
    click.echo(_describe(result))
    if json_out is not None:
        try:
            json_out.write_text(result.to_json() + "\n")
        except OSError as e:
            raise SpecscopeError(f"cannot write {json_out}: {e.strerror}") from None
        click.echo(f"wrote {json_out}")


COMMANDS = (run,)
