"""Per-sequence cost for the variable-length simulation, taken from the cost model.

ModelSeqCost answers the varlen package's SeqCost questions (see
``autopar/varlen/seqcost.py``) for one pipeline stage (the most loaded one) of
one plan, for any CP group size c:

- ``linear(T, c)``: the layer model (cost/compute.py ``layer_time``) on one
  full micro-batch of ``ref_tokens`` tokens per rank without CP, minus its
  attention, per token: GEMMs at a packed micro-batch's efficiency (packing
  gives short documents the GEMM shapes of the whole micro-batch), norms,
  TP collectives. Times T / c.
- ``attention(L, c)``: causal attention FLOPs of one document
  (cost/flops.py ``attention_fwd_flops``, forward, backward at 2.5x, plus the
  recomputed forward under selective or full recompute) at the profile's
  attention efficiency for an L / c-token chunk: the same formula the layer
  model uses.
- ``exposed(T, c, attn)``: the ring exchange of cost/compute.py
  ``_cp_exchange`` for a micro-batch of T tokens: c - 1 send/recv steps of
  the local K/V chunk forward (K/V and their gradients backward, twice the
  bytes), each hidden behind the attention computed meanwhile; the group is
  inside a node when c * tp fits in one. A plan with ``cp_comm allgather``
  gathers the micro-batch's K/V on its own CP group instead (all-gather and
  reduce-scatter, not overlapped), as ``_cp_exchange`` prices it; the pool
  strategies' other group sizes use the ring.
- ``p2p(tokens per rank)``: the pipeline send/recv of one micro-batch and of
  the fill/drain path (cost/pipeline.py ``p2p_time``, the fixed-length
  cost's), linear in the micro-batch's tokens.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

import numpy as np

from autopar.cost import calibration as cal
from autopar.cost.comm import Group, collective_time
from autopar.cost.compute import kv_bytes_per_token, layer_time
from autopar.cost.flops import FLASH_BWD_OVER_FWD, attention_fwd_flops
from autopar.cost.kernels import sustained
from autopar.cost.pipeline import P2PTime, p2p_time
from autopar.cost.shape import Shape
from autopar.spec.families import KIND_PARTS
from autopar.spec.hardware import HardwareProfile
from autopar.spec.layout import rank_kinds
from autopar.spec.model import ModelSpec
from autopar.spec.plan import Plan
from autopar.spec.topology import RankGrid

REF_TOKENS = 8192  # tokens per rank of the micro-batch the linear rate is taken at (GEMM efficiency saturated)


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSeqCost:
    """Stage seconds per rank for sequences and packed micro-batches; build with from_model()."""

    linear_s_per_tok: float  # linear work of one token on one rank without CP (stage, fwd + bwd)
    attn_layers: int  # attention sub-layers in the stage
    attn_coef: float  # forward attention FLOPs of a document of length L on one rank: coef * L^2 / c
    attn_mult: float  # forward + backward + recompute over forward
    attn_peak: float  # FLOP/s the attention kernel would reach at efficiency 1 (peak x sustained)
    eff_log_x: np.ndarray  # log chunk lengths of the attention efficiency table
    eff_y: np.ndarray  # efficiency at those lengths
    kv_bytes_per_tok: float  # K and V bytes one token holds on one TP rank
    tp: int  # TP degree (a CP group of c spans c * tp GPUs)
    gpus_per_node: int
    intra_lat_s: float  # one send/recv inside a node: latency and seconds per byte
    intra_s_per_byte: float
    inter_lat_s: float  # across nodes
    inter_s_per_byte: float
    slowdown: float  # compute slowdown while it hides communication (profile overlap.compute_slowdown)
    pp: int = 1  # pipeline stages
    vpp: int = 1  # virtual stages per rank
    p2p_lat_s: float = 0.0  # pipeline send/recv per micro-batch (cost/pipeline.py p2p_time): fixed part
    p2p_s_per_tok: float = 0.0  # and per token per rank
    fill_lat_s: float = 0.0  # the same for the fill/drain path, once per step
    fill_s_per_tok: float = 0.0
    allgather_cp: int = 0  # the plan's CP size when it exchanges K/V by all-gather (cp_comm allgather), else 0
    ag_lat_s: float = 0.0  # that group's all-gather + reduce-scatter: latency and seconds per byte of K/V
    ag_s_per_byte: float = 0.0

    @classmethod
    def from_model(cls, model: ModelSpec, hw: HardwareProfile, plan: Plan, *, dtype: str, ref_tokens: int = REF_TOKENS) -> ModelSeqCost:
        stage: Counter[str] = max(rank_kinds(model.layer_kinds(), plan.pp, plan.vpp), key=lambda k: sum(k.values()))
        base = replace(plan, cp=1, mbs=1)
        shape = Shape(dtype=dtype, seq_len=ref_tokens, mbs=1)
        total = sum(n * layer_time(model, hw, shape, base, kind).total for kind, n in stage.items())
        attn_layers = sum(n for kind, n in stage.items() if "attn" in KIND_PARTS[kind])
        coef = attention_fwd_flops(model, seq_len=1, batch=1, tp=plan.tp, cp=1)
        mult = 1.0 + FLASH_BWD_OVER_FWD + (0.0 if plan.recompute == "none" else 1.0)
        peak = hw.peak("bf16") * sustained(hw)
        xs = np.geomspace(16, 2**24, 64)
        ys = np.array([hw.attention_efficiency("bf16", float(x)) for x in xs])
        ref_attn = attn_layers * mult * coef * ref_tokens**2 / (peak * hw.attention_efficiency("bf16", ref_tokens))
        linear = max(total - ref_attn, 0.0) / ref_tokens
        one = 2**20
        intra, inter = Group(size=2, per_node=2), Group(size=2, per_node=1)
        fits = []
        for group in (intra, inter):
            lat = collective_time(hw, "send_recv", 1.0, group)
            fits.append((lat, (collective_time(hw, "send_recv", one + 1.0, group) - lat) / one))
        ag_cp, ag_lat, ag_per_byte = 0, 0.0, 0.0
        if plan.cp_comm == "allgather" and plan.cp > 1:
            group = RankGrid(gpus_per_node=hw.gpus_per_node, tp=plan.tp, cp=plan.cp, dp=plan.dp, pp=plan.pp).group("cp")

            def both(nbytes: float) -> float:
                return collective_time(hw, "all_gather", nbytes, group) + collective_time(hw, "reduce_scatter", nbytes, group)

            ag_cp, ag_lat, ag_per_byte = plan.cp, both(1.0), (both(one + 1.0) - both(1.0)) / one
        p2p = {}
        if plan.pp > 1:
            grid = RankGrid(gpus_per_node=hw.gpus_per_node, tp=plan.tp, cp=plan.cp, dp=plan.dp, pp=plan.pp)
            width = cal.ACT_BYTES * model.hidden_size / plan.tp  # bytes per token per rank (Megatron's scatter)

            def times(tokens: float) -> P2PTime:
                return p2p_time(hw, nbytes=width * tokens, pp=plan.pp, vpp=plan.vpp, pair=grid.neighbours("pp"))

            a, b = times(1.0), times(one + 1.0)
            p2p = dict(
                p2p_lat_s=a.per_microbatch_s,
                p2p_s_per_tok=(b.per_microbatch_s - a.per_microbatch_s) / one,
                fill_lat_s=a.fill_s,
                fill_s_per_tok=(b.fill_s - a.fill_s) / one,
            )
        return cls(
            allgather_cp=ag_cp,
            ag_lat_s=ag_lat,
            ag_s_per_byte=ag_per_byte,
            pp=plan.pp,
            vpp=plan.vpp,
            **p2p,
            linear_s_per_tok=linear,
            attn_layers=attn_layers,
            attn_coef=coef,
            attn_mult=mult,
            attn_peak=peak,
            eff_log_x=np.log(xs),
            eff_y=ys,
            kv_bytes_per_tok=kv_bytes_per_token(model, plan.tp),
            tp=plan.tp,
            gpus_per_node=hw.gpus_per_node,
            intra_lat_s=fits[0][0],
            intra_s_per_byte=fits[0][1],
            inter_lat_s=fits[1][0],
            inter_s_per_byte=fits[1][1],
            slowdown=hw.compute_slowdown,
        )

    def _efficiency(self, chunk: np.ndarray) -> np.ndarray:
        """The profile's attention efficiency for chunks of ``chunk`` tokens (falls in proportion below its table)."""
        x = np.log(np.maximum(chunk, 1.0))
        inside = np.interp(x, self.eff_log_x, self.eff_y)
        below = self.eff_y[0] * np.exp(x - self.eff_log_x[0])
        return np.where(x < self.eff_log_x[0], below, inside)

    def linear(self, tokens: np.ndarray, cp: np.ndarray | int) -> np.ndarray:
        return np.asarray(self.linear_s_per_tok * np.asarray(tokens, dtype=np.float64) / np.asarray(cp), dtype=np.float64)

    def attention(self, lengths: np.ndarray, cp: np.ndarray | int) -> np.ndarray:
        raw = np.asarray(lengths)
        c = np.asarray(cp, dtype=np.float64)
        if raw.dtype.kind in "iu" and c.ndim == 0 and raw.size >= 4096 and raw.min() >= 0 and raw.max() < raw.size:
            # integer lengths, one group size, fewer distinct values than lengths: a table of every length
            # up to the longest, read per length (the same numbers, computed once per value)
            return self.attention(np.arange(int(raw.max()) + 1, dtype=np.float64), cp)[raw]
        length = np.asarray(raw, dtype=np.float64)
        fwd = self.attn_coef * length * length / c / (self.attn_peak * self._efficiency(length / c))
        return np.asarray(self.attn_layers * self.attn_mult * fwd, dtype=np.float64)

    def exposed(self, tokens: np.ndarray, cp: np.ndarray | int, attention: np.ndarray) -> np.ndarray:
        c = np.asarray(cp, dtype=np.float64)
        t = np.asarray(tokens, dtype=np.float64)
        intra = c * self.tp <= self.gpus_per_node
        lat = np.where(intra, self.intra_lat_s, self.inter_lat_s)
        per_byte = np.where(intra, self.intra_s_per_byte, self.inter_s_per_byte)
        ring = np.maximum(c - 1.0, 0.0) * (lat + per_byte * self.kv_bytes_per_tok * t / c)  # forward, one layer
        layers = max(self.attn_layers, 1)
        a_fwd = np.asarray(attention, dtype=np.float64) / (layers * self.attn_mult)
        out = np.maximum(ring - a_fwd, 0.0) + np.maximum(2.0 * ring - FLASH_BWD_OVER_FWD * a_fwd, 0.0)
        hidden = 3.0 * ring - out
        per_layer = out + (self.slowdown - 1.0) * hidden
        if self.allgather_cp:  # the plan's own group gathers the micro-batch's K/V, not overlapped
            gathered = self.ag_lat_s + self.ag_s_per_byte * self.kv_bytes_per_tok * t
            per_layer = np.where(c == self.allgather_cp, gathered, per_layer)
        return np.asarray(self.attn_layers * per_layer, dtype=np.float64)

    def p2p(self, tokens_per_rank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Pipeline send/recv of micro-batches of ``tokens_per_rank`` tokens: (per micro-batch, fill/drain) seconds."""
        t = np.asarray(tokens_per_rank, dtype=np.float64)
        if self.pp == 1:
            return np.zeros(t.shape), np.zeros(t.shape)
        return self.p2p_lat_s + self.p2p_s_per_tok * t, self.fill_lat_s + self.fill_s_per_tok * t

    def time(self, lengths: np.ndarray, cp: np.ndarray | int) -> np.ndarray:
        attn = self.attention(lengths, cp)
        return self.linear(lengths, cp) + attn + self.exposed(lengths, cp, attn)
