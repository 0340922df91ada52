"""Serving: one MoE layer's routed experts on one engine at a decode step or a prefill chunk (cost/serve.py).

The experts the step's tokens touch are read (E(1 - (1 - top_k/E)^tokens) of E under uniform routing, or
every local expert where the framework's kernels stream them all), their grouped GEMMs run at the
efficiency of their total size, and with attention-DP the tokens travel to the experts and back as the
engine sends them (Framework.moe_exchange). An ExpertLayer holds what reads no token count, so that a sweep
pricing ~10^4 steps of one engine builds it once.
"""

from __future__ import annotations

from autopar.cost import calibration as cal
from autopar.cost.comm import Line, collective_line
from autopar.cost.flops import expert_gemms
from autopar.cost.kernels import gemm_time, memory_time
from autopar.spec.hardware import HardwareProfile
from autopar.spec.model import ModelSpec
from autopar.spec.serve import Engine
from autopar.spec.topology import span

# Busiest EP rank's share of routed tokens over the mean at decode batch sizes
# (DeepSeek-V3 report sec. 3.4 deploys redundant experts because per-GPU load
# is uneven; 1.2 is the imbalance the aiconfigurator and SGLang EPLB docs quote
# before rebalancing). Scales the EP all-to-all bytes.
EXPERT_IMBALANCE = 1.2


def experts_time(
    model: ModelSpec,
    hw: HardwareProfile,
    engine: Engine,
    *,
    dtype: str,
    tokens: float,
    expert_bytes: float,
    exchange: str,
    all_local: bool = False,
    read_slowdown: float = 1.0,
) -> tuple[float, float, float]:
    """(weight read, compute excess, EP exchange) seconds of one MoE layer's routed experts (ExpertLayer)."""
    if model.moe is None:
        return 0.0, 0.0, 0.0
    layer = ExpertLayer(
        model, hw, engine, dtype=dtype, expert_bytes=expert_bytes, exchange=exchange, all_local=all_local, read_slowdown=read_slowdown
    )
    return layer(tokens)


class ExpertLayer:
    """One MoE layer's routed experts on one engine, priced at any token count.

    `tokens` is what the MoE layer sees: with attention-DP the tokens of every
    attention rank are gathered into it. The experts the step's tokens touch are
    read once (every local expert with `all_local`, Framework.moe_decode_reads),
    in `read_slowdown` x the profile's memory time (the fused-MoE kernel's
    streaming rate at decode, Framework.moe_decode_slowdown);
    grouped GEMMs run as one kernel at the efficiency of their total size;
    the tokens travel as `exchange` (Framework.moe_exchange, _Exchange) says.
    """

    def __init__(
        self,
        model: ModelSpec,
        hw: HardwareProfile,
        engine: Engine,
        *,
        dtype: str,
        expert_bytes: float,
        exchange: str,
        all_local: bool,
        read_slowdown: float,
    ) -> None:
        moe = model.moe
        assert moe is not None
        self.hw, self.dtype, self.ep, self.expert_bytes = hw, dtype, engine.ep, expert_bytes
        self.local = moe.num_experts / engine.ep
        self.all_local, self.read_slowdown = all_local, read_slowdown
        self.miss = 1.0 - moe.top_k / moe.num_experts  # the chance a token's top_k picks leave an expert out
        self.routing = (moe.top_k, moe.capacity_factor, moe.num_experts)
        probe = expert_gemms(model, tokens=1.0, ep=engine.ep, etp=engine.etp)  # the shapes: m is the only term in tokens
        self.shapes = tuple((g.n, g.k, g.count) for g in probe)
        self.exchange = _Exchange(model, hw, engine, exchange=exchange)

    def __call__(self, tokens: float) -> tuple[float, float, float]:
        """(weight read, compute excess, EP exchange) seconds at `tokens` (expert_gemms' rows, in its order)."""
        hw = self.hw
        touched = self.local if self.all_local else self.local * (1.0 - self.miss**tokens)
        read = self.read_slowdown * memory_time(hw, touched * self.expert_bytes)
        top_k, capacity, experts = self.routing
        rows = self.ep * (tokens / self.ep) * top_k * capacity / experts
        flops = sum([2.0 * rows * n * k * c for n, k, c in self.shapes])
        comp = max(0.0, gemm_time(hw, self.dtype, flops, serving=True) - read) if flops > 0 else 0.0
        return read, comp, self.exchange(tokens)


def exchange_time(model: ModelSpec, hw: HardwareProfile, engine: Engine, *, tokens: float, exchange: str) -> float:
    """Seconds of one MoE layer's token exchange at `tokens` (_Exchange)."""
    return _Exchange(model, hw, engine, exchange=exchange)(tokens)


class _Exchange:
    """Seconds of one MoE layer's token exchange: `tokens` (every attention-DP rank's) to the experts and back.

    Without attention-DP every rank of the EP group holds all the step's tokens after the
    attention all-reduce: each runs its local experts on them and the layer's TP all-reduce
    (counted with tp_comm) sums the outputs, so nothing is exchanged (vLLM's EP design as the
    vllm-neuron docs describe it, awsdocs-neuron vllm-neuron/docs/design/parallelism/expert_parallelism:
    "EP is a logical remapping of the TP group for MoE layers"). With attention-DP the ranks hold
    different tokens, and each engine sends them one way (Framework.moe_exchange), never two:

    - gather_dp (vLLM 0.12, 0.15: ParallelConfig.all2all_backend "allgather_reducescatter",
      AgRsAll2AllManager): all_gatherv of every rank's tokens and reduce_scatterv of the outputs over
      the DP group (dp ranks, tp apart); the TP all-reduce then sums each rank's experts (tp_comm);
    - gather_tp (SGLang, moe_a2a_backend "none"): dp_gather and dp_reduce_scatter_tensor over its
      TP group, every tp x dp rank of the engine;
    - all_to_all (DeepEP and the like): the routed copies (top_k a token) dispatched to the expert
      ranks over the EP group and combined back, scaled by EXPERT_IMBALANCE;
    - all_to_all_mnnvl (TensorRT-LLM: WideEPMoE select_alltoall_method_type): the all-to-all where
      the EP group is larger than top_k and the NVLink domain spans hosts (MnnvlMemory.supports_mnnvl,
      a GB200 NVL72: the profile's gpus_per_host below gpus_per_node), else allgather and
      reducescatter over the engine's tp x dp ranks as gather_tp.
    """

    def __init__(self, model: ModelSpec, hw: HardwareProfile, engine: Engine, *, exchange: str) -> None:
        moe = model.moe
        self.kind = "none"
        self.lines: tuple[Line, ...] = ()
        self.scale = (engine.ep, moe.top_k if moe is not None else 0, model.hidden_size)
        if moe is None or engine.dp == 1:
            return
        mnnvl = hw.host_gpus < hw.gpus_per_node and engine.ep > moe.top_k
        if engine.ep > 1 and (exchange == "all_to_all" or (exchange == "all_to_all_mnnvl" and mnnvl)):
            group = span(size=engine.ep, stride=1, gpus_per_node=hw.gpus_per_node, ranks=engine.gpus)
            self.kind, self.lines = "all_to_all", (collective_line(hw, "all_to_all", group),)
            return
        if exchange == "gather_dp":
            group = span(size=engine.dp, stride=engine.tp, gpus_per_node=hw.gpus_per_node, ranks=engine.gpus)
        else:
            group = span(size=engine.tp * engine.dp, stride=1, gpus_per_node=hw.gpus_per_node, ranks=engine.gpus)
        self.kind = "gather"
        self.lines = (collective_line(hw, "all_gather", group), collective_line(hw, "reduce_scatter", group))

    def __call__(self, tokens: float) -> float:
        ep, top_k, hidden = self.scale
        if self.kind == "all_to_all":
            nbytes = cal.ACT_BYTES * tokens / ep * top_k * hidden * EXPERT_IMBALANCE
            return 2 * self.lines[0].time(nbytes)
        if self.kind == "gather":
            nbytes = cal.ACT_BYTES * tokens * hidden
            return self.lines[0].time(nbytes) + self.lines[1].time(nbytes)
        return 0.0
