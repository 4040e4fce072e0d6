"""Graph runners: static input buffers, an eager input-copy prologue, one graph per bucket.

As in SGLang's CUDA-graph runners, every runner owns static buffers sized for the largest
bucket; `prepare` (eager, the `*.prepare` NVTX range) copies the step's inputs into them (host
ints H2D, device tensors D2D), pads the rows up to the bucket with the pad request (pool row
mapped to the trash page), and refreshes the DSA metadata in place; `replay` (the `*.replay`
range) launches the bucket's graph, or runs the same forward eagerly without graphs.

    DraftRunner        N - 1 draft forwards in one graph; forward i reads draft backend i
    VerifyRunner       target forward over bs * T rows (TARGET_VERIFY)
    DraftExtendRunner  draft forward over bs * T rows, fixed width T (DRAFT_EXTEND); keeps the
                       last accepted row's token and hidden: the next step's first draft

Staged runners (`staged=True`, the `draft_captured` variant) keep every static int input in
one buffer filled by one H2D copy per `prepare` (`staging.py`), and take their device inputs
(the previous phase's tokens and hidden states, all static buffers) inside the forward, so a
captured graph copies them itself: `bind_device_inputs` names the sources once, before capture.

    prepare (ordinary):  H2D per field, D2D per device input, metadata refresh
    prepare (staged):    one H2D, metadata refresh (none for a captured draft refresh)
    forward (staged):    device inputs <- sources, [draft metadata refresh], model

A staged draft-extend given an `acc` source goes further (`DraftExtendRunner.derive_inputs`):
its forward computes every int input and its metadata on the device, so it needs no prepare.
"""

from __future__ import annotations

import numpy as np
import torch

from specscope.kernels.backend import DeepseekSparseAttnBackend, DeepseekSparseAttnMultiStepBackend
from specscope.kernels.ops.attention import DSAForwardInputs, DSAGeometry, ForwardMode

from .cache import ModelCache
from .staging import StagedInputs
from .toy import ForwardBatch, ToyDSAModel

_DTYPES = {"int32": torch.int32, "int64": torch.int64}


def bucket_sizes(max_bs: int) -> list[int]:
    """Batch-size buckets 1, 2, 4, ... up to the first power of two >= max_bs."""
    out = [1]
    while out[-1] < max_bs:
        out.append(out[-1] * 2)
    return out


class GraphRunner:
    """Static int inputs by name (`fields`: name -> (entries per request, dtype)), graphs."""

    fields: dict[str, tuple[int, str]] = {}
    extra_fields: dict[str, tuple[int, str]] = {}
    mode: ForwardMode

    def __init__(
        self,
        geometry: DSAGeometry,
        req_to_token: torch.Tensor,  # [max_reqs, L] int32, shared pool
        buckets: list[int],
        device: torch.device,
        use_graphs: bool,
        pool=None,
        staged: bool = False,
    ) -> None:
        self.geometry = geometry
        self.req_to_token = req_to_token
        self.buckets = buckets
        self.max_bs = buckets[-1]
        self.device = device
        self.use_graphs = use_graphs
        self.pool = pool
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self.sources: dict[str, torch.Tensor] | None = None  # staged: device inputs' sources
        self.staging = StagedInputs(self.input_shapes(), device) if staged else None
        if self.staging is not None:
            self.inp = dict(self.staging.views)
        else:
            self.inp = {
                name: torch.zeros(shape, dtype=dtype, device=device)
                for name, (shape, dtype) in self.input_shapes().items()
                if name in self.fields
            }

    def input_shapes(self) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
        """Every static int input: name -> (shape, dtype)."""
        return {
            name: ((self.max_bs * width,), _DTYPES[dt]) for name, (width, dt) in self.fields.items()
        }

    @property
    def staged(self) -> bool:
        return self.staging is not None

    def bind_device_inputs(self, **sources: torch.Tensor) -> None:
        """Staged runners: the static device tensors the forward copies its device inputs
        from (inside the graph); call once, before capture."""
        if not self.staged:
            raise RuntimeError("only staged runners read their device inputs in the forward")
        self.sources = sources

    def bucket(self, bs: int) -> int:
        """The batch size a forward of `bs` requests runs at: its bucket, or bs without graphs."""
        if not self.use_graphs:
            return bs
        for b in self.buckets:
            if b >= bs:
                return b
        raise ValueError(f"bs={bs} exceeds the largest bucket {self.max_bs}")

    def load(self, bs: int, host: dict[str, np.ndarray]) -> None:
        """Host -> static buffers: one H2D copy per field, its first bs * width entries (staged:
        every field into the host twin, then one H2D copy)."""
        if self.staging is not None:
            for name, arr in host.items():
                self.staging.write(name, arr)
            self.staging.upload()
            return
        for name, arr in host.items():
            width = self.fields[name][0]
            src = torch.from_numpy(np.ascontiguousarray(arr).reshape(-1))
            self.inp[name][: bs * width].copy_(src, non_blocking=True)

    def forward_inputs(self, bs: int) -> DSAForwardInputs:
        """The metadata builders' view of the static buffers for `bs` requests."""
        rows = self.geometry.rows(self.mode, bs)
        return DSAForwardInputs(
            req_to_token=self.req_to_token,
            req_pool_indices=self.inp["req_pool_indices"][:bs],
            seq_lens=self.inp["seq_lens"][:bs],
            out_cache_loc=self._meta_locs(bs, rows),
            positions=self._meta_positions(bs, rows),
            accept_lens=self.inp["accept_lens"][:bs] if "accept_lens" in self.inp else None,
        )

    def _meta_locs(self, bs: int, rows: int) -> torch.Tensor:
        return self.inp["out_cache_loc"][:rows]

    def _meta_positions(self, bs: int, rows: int) -> torch.Tensor:
        return self.inp["positions"][:rows]

    # -- per runner ---------------------------------------------------------------------------
    def pad_host(self, bs: int, pad_row: int) -> dict[str, np.ndarray]:
        """Host inputs of `bs` pad requests (trash slots, shortest valid lengths)."""
        raise NotImplementedError

    def refresh_metadata(self, bs: int, capture: bool = False) -> None:
        raise NotImplementedError

    def forward(self, bs: int) -> None:
        raise NotImplementedError

    # -- graphs -------------------------------------------------------------------------------
    def capture(self, pad_row: int) -> None:
        """Capture one graph per bucket on pad inputs (the metadata built first, eagerly)."""
        for b in self.buckets:
            self.load(b, self.pad_host(b, pad_row))
            self.refresh_metadata(b, capture=True)
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(2):
                    self.forward(b)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=self.pool):
                self.forward(b)
            self.graphs[b] = graph

    def replay(self, bs_eff: int) -> None:
        if self.use_graphs:
            self.graphs[bs_eff].replay()
        else:
            self.forward(bs_eff)


class VerifyRunner(GraphRunner):
    """Target verify. Staged, it also carries `sim_accept` [max_bs] int64: the simulated
    accept lengths (known on the host before verify), so accept needs no copy of its own."""

    mode = ForwardMode.TARGET_VERIFY
    extra_fields: dict[str, tuple[int, str]] = {"sim_accept": (1, "int64")}

    def __init__(
        self,
        model: ToyDSAModel,
        cache: ModelCache,
        backend: DeepseekSparseAttnBackend,
        geometry: DSAGeometry,
        *args,
        **kw,
    ) -> None:
        t = geometry.num_draft_tokens
        self.fields = {
            "req_pool_indices": (1, "int64"),
            "seq_lens": (1, "int32"),
            "positions": (t, "int64"),
            "out_cache_loc": (t, "int64"),
            "tokens": (t, "int64"),
        } | self.extra_fields
        super().__init__(geometry, *args, **kw)
        self.model, self.cache = model, cache
        self.backend = backend
        rows = self.max_bs * t
        self.out_tokens = torch.zeros(rows, dtype=torch.int64, device=self.device)  # [rows]
        self.out_hidden = torch.zeros(rows, model.cfg.hidden, device=self.device)  # [rows, H]

    def pad_host(self, bs: int, pad_row: int) -> dict[str, np.ndarray]:
        t = self.geometry.num_draft_tokens
        return {
            "req_pool_indices": np.full(bs, pad_row, np.int64),
            "seq_lens": np.full(bs, t + 1, np.int32),
            "positions": np.tile(np.arange(1, t + 1, dtype=np.int64), bs),
            "out_cache_loc": np.zeros(bs * t, np.int64),
            "tokens": np.zeros(bs * t, np.int64),
            "sim_accept": np.ones(bs, np.int64),
        }

    def prepare(
        self, bs: int, bs_eff: int, host: dict[str, np.ndarray], drafts: torch.Tensor, pad_row: int
    ) -> None:
        """host: req_pool_indices, seq_lens, positions, out_cache_loc, tokens (column 0 = the
        last committed token); drafts [bs, T - 1] int64 on the device fill columns 1..T-1."""
        t = self.geometry.num_draft_tokens
        pad = self.pad_host(bs_eff - bs, pad_row)
        self.load(bs_eff, {k: np.concatenate([v.reshape(-1), pad[k]]) for k, v in host.items()})
        if not self.staged:
            self.inp["tokens"].view(self.max_bs, t)[:bs, 1:].copy_(drafts)  # D2D
        self.refresh_metadata(bs_eff)

    def pull_device_inputs(self, bs: int) -> None:
        """Staged: drafts (source `drafts`, [max_bs, T - 1]) into token columns 1..T-1."""
        if self.sources is not None:
            t = self.geometry.num_draft_tokens
            self.inp["tokens"].view(self.max_bs, t)[:bs, 1:].copy_(self.sources["drafts"][:bs])

    def refresh_metadata(self, bs: int, capture: bool = False) -> None:
        build = (
            self.backend.init_forward_metadata_capture_cuda_graph
            if capture
            else self.backend.init_forward_metadata_replay_cuda_graph
        )
        build(self.mode, bs, self.forward_inputs(bs))

    def forward(self, bs: int) -> None:
        rows = bs * self.geometry.num_draft_tokens
        self.pull_device_inputs(bs)
        batch = ForwardBatch(
            self.mode, bs, self.inp["tokens"][:rows], self.inp["out_cache_loc"][:rows]
        )
        tok, hid = self.model.forward(
            batch, self.backend.forward_metadata, self.backend.kv_counter, self.cache
        )
        self.out_tokens[:rows].copy_(tok)
        self.out_hidden[:rows].copy_(hid)


class DraftExtendRunner(VerifyRunner):
    mode = ForwardMode.DRAFT_EXTEND

    extra_fields = {"accept_lens": (1, "int32")}

    def __init__(self, model, cache, backend, geometry, *args, **kw) -> None:
        super().__init__(model, cache, backend, geometry, *args, **kw)
        self.inp["accept_lens"].fill_(1)
        t, h = self.geometry.num_draft_tokens, model.cfg.hidden
        self.hidden_in = torch.zeros(self.max_bs * t, h, device=self.device)  # [rows, H]
        self.next_token = torch.zeros(self.max_bs, dtype=torch.int64, device=self.device)
        self.next_hidden = torch.zeros(self.max_bs, h, device=self.device)  # [max_bs, H]

    def pad_host(self, bs: int, pad_row: int) -> dict[str, np.ndarray]:
        t = self.geometry.num_draft_tokens
        out = super().pad_host(bs, pad_row)
        del out["sim_accept"]
        out["positions"] = np.tile(np.full(t, t, dtype=np.int64), bs)  # acc 1: position T
        out["accept_lens"] = np.ones(bs, np.int32)
        return out

    def prepare(  # type: ignore[override]
        self,
        bs: int,
        bs_eff: int,
        host: dict[str, np.ndarray],
        tokens: torch.Tensor,  # [bs, T] int64: the committed tokens, first accept_lens valid
        hidden: torch.Tensor,  # [bs * T, H]: the target's hidden of the verify rows
        pad_row: int,
    ) -> None:
        pad = self.pad_host(bs_eff - bs, pad_row)
        self.load(bs_eff, {k: np.concatenate([v.reshape(-1), pad[k]]) for k, v in host.items()})
        t = self.geometry.num_draft_tokens
        if not self.staged:
            self.inp["tokens"][: bs * t].copy_(tokens.reshape(-1))  # D2D
            self.hidden_in[: bs * t].copy_(hidden)  # D2D
        self.refresh_metadata(bs_eff)

    def pull_device_inputs(self, bs: int) -> None:
        """Staged: tokens (source `tokens`, [max_bs, T]) and hidden (`hidden`, [rows, H]);
        with an `acc` source also every int input and the metadata (`derive_inputs`)."""
        if self.sources is not None:
            rows = bs * self.geometry.num_draft_tokens
            self.inp["tokens"][:rows].copy_(self.sources["tokens"].reshape(-1)[:rows])
            self.hidden_in[:rows].copy_(self.sources["hidden"][:rows])
            if "acc" in self.sources:
                self.derive_inputs(bs)

    def derive_inputs(self, bs: int) -> None:
        """The int inputs and the metadata of a draft-extend, computed on the device (inside the
        graph) from the verify's inputs and the accept lengths, so no host value is needed.

        Sources: `acc` [max_bs] int64 (1..T), `verify_seq_lens` [max_bs] int32 (n + T - 1 for
        n committed tokens before the accept), `verify_req_pool_indices` [max_bs] int64. As the
        host computes them for `prepare`: seq_lens = n + a, row j at position n + min(j, a - 1),
        KV slot req_to_token[row, position] for j < a, the trash slot 0 for padded rows.
        """
        t, src = self.geometry.num_draft_tokens, self.sources
        acc = src["acc"][:bs]  # [bs] int64
        n = src["verify_seq_lens"][:bs].to(torch.int64) - (t - 1)  # [bs]
        pool_rows = src["verify_req_pool_indices"][:bs]  # [bs] int64
        j = torch.arange(t, device=self.device)[None, :]  # [1, T]
        pos = n[:, None] + torch.minimum(j, acc[:, None] - 1)  # [bs, T]
        locs = self.req_to_token[pool_rows[:, None], pos].to(torch.int64)  # [bs, T]
        locs = torch.where(j < acc[:, None], locs, 0)
        self.inp["req_pool_indices"][:bs].copy_(pool_rows)
        self.inp["seq_lens"][:bs].copy_(n + acc)
        self.inp["accept_lens"][:bs].copy_(acc)
        self.inp["positions"][: bs * t].copy_(pos.reshape(-1))
        self.inp["out_cache_loc"][: bs * t].copy_(locs.reshape(-1))
        self.backend.init_forward_metadata(self.mode, self.forward_inputs(bs))

    def forward(self, bs: int) -> None:
        t = self.geometry.num_draft_tokens
        rows = bs * t
        self.pull_device_inputs(bs)
        batch = ForwardBatch(
            self.mode,
            bs,
            self.inp["tokens"][:rows],
            self.inp["out_cache_loc"][:rows],
            self.hidden_in[:rows],
        )
        tok, hid = self.model.forward(
            batch, self.backend.forward_metadata, self.backend.kv_counter, self.cache
        )
        last = torch.arange(bs, device=self.device) * t + self.inp["accept_lens"][:bs] - 1
        self.next_token[:bs].copy_(tok[last])
        self.next_hidden[:bs].copy_(hid[last])


class DraftRunner(GraphRunner):
    """The draft graph: forwards 0..N-2 at positions n..n+N-2; d_0 comes from draft-extend.

    Static inputs are step-major ([steps, max_bs]) so step i's slots are one contiguous row.
    """

    mode = ForwardMode.DECODE

    def __init__(
        self,
        model: ToyDSAModel,
        cache: ModelCache,
        backend: DeepseekSparseAttnMultiStepBackend,
        geometry: DSAGeometry,
        *args,
        **kw,
    ) -> None:
        self.steps = backend.num_steps
        self.fields = {
            "req_pool_indices": (1, "int64"),
            "seq_lens": (1, "int32"),
        }
        super().__init__(geometry, *args, **kw)
        self.model, self.cache, self.backend = model, cache, backend
        mb, h = self.max_bs, model.cfg.hidden
        if self.staged:
            self.positions, self.locs = self.inp["positions"], self.inp["locs"]
        else:
            self.positions = torch.zeros(self.steps, mb, dtype=torch.int64, device=self.device)
            self.locs = torch.zeros(self.steps, mb, dtype=torch.int64, device=self.device)
        self.token0 = torch.zeros(mb, dtype=torch.int64, device=self.device)  # [max_bs]
        self.hidden0 = torch.zeros(mb, h, device=self.device)  # [max_bs, H]
        self.out_tokens = torch.zeros(mb, self.steps + 1, dtype=torch.int64, device=self.device)

    def input_shapes(self) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
        """The fields, plus positions and locs: [steps, max_bs] int64 (step i's row i)."""
        grid = ((self.steps, self.max_bs), torch.int64)
        return super().input_shapes() | {"positions": grid, "locs": grid}

    def _meta_locs(self, bs: int, rows: int) -> torch.Tensor:
        return self.locs[0, :bs]

    def _meta_positions(self, bs: int, rows: int) -> torch.Tensor:
        return self.positions[0, :bs]

    def pad_host(self, bs: int, pad_row: int) -> dict[str, np.ndarray]:
        return {
            "req_pool_indices": np.full(bs, pad_row, np.int64),
            "seq_lens": np.full(bs, 2, np.int32),
            "positions": np.ones((self.steps, bs), np.int64),
            "locs": np.zeros((self.steps, bs), np.int64),
        }

    def load(self, bs: int, host: dict[str, np.ndarray]) -> None:
        if self.staged:
            super().load(bs, host)
            return
        host = dict(host)
        for name, buf in (("positions", self.positions), ("locs", self.locs)):
            if name in host:
                arr = host.pop(name)
                full = np.zeros((self.steps, self.max_bs), np.int64)
                full[:, : arr.shape[1]] = arr
                buf.copy_(torch.from_numpy(full), non_blocking=True)  # one H2D per field
        super().load(bs, host)

    def prepare(
        self,
        bs: int,
        bs_eff: int,
        host: dict[str, np.ndarray],
        token0: torch.Tensor,  # [bs] int64
        hidden0: torch.Tensor,  # [bs, H]
        pad_row: int,
    ) -> None:
        """host: req_pool_indices [bs], seq_lens [bs] (n + 1), positions/locs [steps, bs]."""
        pad = self.pad_host(bs_eff - bs, pad_row)
        merged = {
            k: np.concatenate([v, pad[k]], axis=1 if v.ndim == 2 else 0) for k, v in host.items()
        }
        self.load(bs_eff, merged)
        if not self.staged:
            self.token0[:bs].copy_(token0)  # D2D
            self.hidden0[:bs].copy_(hidden0)  # D2D
        self.refresh_metadata(bs_eff)

    def pull_device_inputs(self, bs: int) -> None:
        """Staged: the first draft token and hidden (sources `token0`, `hidden0`)."""
        if self.sources is not None:
            self.token0[:bs].copy_(self.sources["token0"][:bs])
            self.hidden0[:bs].copy_(self.sources["hidden0"][:bs])

    def refresh_metadata(self, bs: int, capture: bool = False) -> None:
        if capture:
            self.backend.init_forward_metadata_capture_cuda_graph(bs, self.forward_inputs(bs))
        else:
            self.backend.init_forward_metadata_replay_cuda_graph(bs, self.forward_inputs(bs))

    def forward(self, bs: int) -> None:
        """The draft forwards; first, when captured, the draft metadata refresh."""
        self.pull_device_inputs(bs)
        self.backend.init_forward_metadata_in_graph(bs, self.forward_inputs(bs))
        tok, hid = self.token0[:bs], self.hidden0[:bs]
        self.out_tokens[:bs, 0].copy_(tok)
        for i, b in enumerate(self.backend.backends):
            batch = ForwardBatch(self.mode, bs, tok, self.locs[i, :bs], hid)
            tok, hid = self.model.forward(batch, b.forward_metadata, b.kv_counter, self.cache)
            self.out_tokens[:bs, i + 1].copy_(tok)
