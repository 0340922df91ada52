"""Steady state of a deployment under a fixed concurrency: TTFT, TPOT, throughput.

A closed loop holds `concurrency` requests in flight; each one, when it ends,
is replaced by a new one (how `vllm bench serve --max-concurrency`, genai-perf
and aiperf drive a server). Per attention rank n = concurrency / (engines x
attention-DP ranks) requests share every step.

Aggregated (prefill and decode on the same engines): the closed loop is run
step by step under the framework's scheduler (cost/serve_sim.py; the loop:
cost/serve_loop.py): which prompts wait behind which, and which prompts land
in a request's decode steps, follow from the policy. A step costs the decode
step at its batch plus each prompt token riding in it (its prefill less the
weight read the step already makes, cost/serve.py prefill_in_step).
- The run is the benchmark's: PROMPTS_PER_REQUEST x concurrency requests, the
  first `concurrency` of them arriving together (a warm-up-free run, like the
  command autopar prints); Workload.warmed measures the steady state alone.
  Under decode-first scheduling (vLLM, TensorRT-LLM) the first wave is
  simulated as sent and the rest from a steady state whose requests are spread
  evenly over their output (nothing re-aligns requests once timing jitter has
  split them); under prefill-first (SGLang 0.5.1) the wave re-forms every cycle.
- TTFT = the loop's arrival-to-first-token + (prefill_slowdown - 1) x the
  request's own prefill + the per-request overhead.
- TPOT = the loop's mean (last token - first token) / (osl - 1).
- Queue saturation: the KV pool holds at most kv_cache_tokens / (isl + osl)
  requests per rank; past that the surplus waits for a slot, about one request
  latency per full pool's worth of surplus, and the estimate says so.

Disaggregated: decode engines see no prefill (TPOT = decode step); prefill
engines are a queue (M/D/1, DistServe sec. 4.1) and the prompt's KV cache then
crosses the network to the decode engine. The slower pool sets the closed
loop's rate and with it the decode batch per rank (cost/serve_disagg.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from autopar.cost.comm import collective_time
from autopar.cost.serve import (
    StepTime,
    decode_step,
    kv_bytes_per_token,
    kv_pool_bytes,
    prefill_time,
    state_bytes_per_request,
    weight_bytes_per_gpu,
)
from autopar.cost.serve_disagg import EMPTY, RHO_SATURATED, DisaggLoop
from autopar.cost.serve_loop import closed_loop
from autopar.cost.serve_memo import remembered
from autopar.errors import SpecError
from autopar.spec.framework import Framework
from autopar.spec.hardware import HardwareProfile
from autopar.spec.model import ModelSpec
from autopar.spec.serve import Deployment, Engine, EngineArgs, Workload, for_deployment
from autopar.spec.topology import Group
from autopar.spec.units import GIB


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolEstimate:
    """One pool of identical engines (the only one when aggregated)."""

    role: str  # agg | prefill | decode
    engine: Engine  # parallel layout of each engine
    replicas: int  # engines in the pool
    requests_per_rank: float  # requests in flight per attention rank
    step: StepTime  # decode step (agg, decode) or one prompt's prefill (prefill)
    kv_cache_tokens: int  # tokens the KV pool of one engine holds
    max_concurrency: int  # requests the pool holds at once (KV-limited)
    weights_gib: float  # weights per GPU
    memory_gib_per_gpu: float  # weights, activations, reserve and the KV in use
    fits: bool  # weights and one request's KV fit on each GPU


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeEstimate:
    """A deployment's predicted behaviour under one workload."""

    deployment: Deployment
    workload: Workload
    framework_label: str  # framework and the version its constants were fitted on
    ttft_s: float  # time to first token, mean
    tpot_s: float  # inter-token latency after the first token
    requests_per_s: float  # completed requests per second, whole deployment
    pools: tuple[PoolEstimate, ...]  # agg: one; disagg: prefill, decode
    ttft_parts: dict[str, float]  # seconds: prefill, queue, first_step, kv_transfer, overhead
    tpot_parts: dict[str, float]  # seconds: weights, kv, compute, tp_comm, ep_comm, overhead, prefill_mix
    saturated: bool  # the KV pool (or the prefill queue) cannot hold the concurrency

    @property
    def latency_s(self) -> float:
        return self.ttft_s + (self.workload.osl - 1) * self.tpot_s

    @property
    def output_tokens_per_s(self) -> float:
        return self.requests_per_s * self.workload.osl

    @property
    def fits(self) -> bool:
        return all(p.fits for p in self.pools)


def _pool(
    model: ModelSpec,
    hw: HardwareProfile,
    dep: Deployment,
    wl: Workload,
    *,
    role: str,
    engine: Engine,
    replicas: int,
    step: StepTime,
    per_rank: float,
) -> PoolEstimate:
    pool, per_request, tokens, held, weights, used = _pool_terms(
        model, hw, engine, for_deployment(dep, role), dep.weights, dep.kv_bytes, wl.isl, wl.osl
    )
    in_use = min(max(pool, 0.0), per_rank * per_request)
    return PoolEstimate(
        role=role,
        engine=engine,
        replicas=replicas,
        requests_per_rank=per_rank,
        step=step,
        kv_cache_tokens=tokens,
        max_concurrency=held * engine.dp * replicas,
        weights_gib=weights / GIB,
        memory_gib_per_gpu=(used + in_use) / GIB,
        fits=held >= 1,
    )


@remembered
def _pool_terms(
    model: ModelSpec, hw: HardwareProfile, engine: Engine, fw: Framework, weights: str, kv_bytes: float, isl: int, osl: int
) -> tuple[float, float, int, int, float, float]:
    """What _pool reads of its engine whatever the concurrency, the same for each of a sweep's points (cached):
    (KV pool bytes, bytes a request holds, KV tokens an engine holds, requests it holds, weight bytes, memory
    in use outside the KV in use)."""
    pool = kv_pool_bytes(model, hw, engine, weights=weights, fw=fw)
    per_token = kv_bytes_per_token(model, engine, kv_bytes)
    context = isl + osl  # a windowed layer keeps its window of it (ModelSpec.kv_share)
    per_request = context * model.kv_share(context) * per_token + state_bytes_per_request(model, engine)
    tokens = max(0, int(pool / per_token)) * engine.dp if per_token > 0 else 0
    held = max(0, int(pool / per_request)) if per_request > 0 else 10**9
    weight = weight_bytes_per_gpu(model, engine, weights)
    used = fw.memory_fraction * hw.memory_bytes - pool if fw.memory_rule == "total" else hw.memory_bytes - pool / fw.memory_fraction
    return pool, per_request, tokens, held, weight, used


def capacity(model: ModelSpec, hw: HardwareProfile, dep: Deployment, wl: Workload) -> tuple[bool, int]:
    """(whether every pool fits, the requests the decode pool, or the only one, holds): what `estimate`'s
    pools say (PoolEstimate.fits, max_concurrency), without pricing a step. Neither depends on the
    concurrency or, per engine, on the replicas, so a sweep computes them once per engine (cached)."""
    model = dep.model_as_launched(model)
    fits, held = _capacity(
        model, hw, dep.engine, dep.prefill, dep.fw, dep.args, dep.prefill_args, dep.weights, dep.kv_dtype, dep.kv_auto, wl.isl, wl.osl
    )
    return fits, held * dep.replicas


@remembered
def _capacity(
    model: ModelSpec,
    hw: HardwareProfile,
    engine: Engine,
    prefill: Engine | None,
    fw: Framework,
    args: EngineArgs,
    prefill_args: EngineArgs,
    weights: str,
    kv_dtype: str,
    kv_auto: str,
    isl: int,
    osl: int,
) -> tuple[bool, int]:
    """capacity() of one decode (or aggregated) engine and one prefill engine."""
    one = Deployment(
        fw=fw,
        mode="agg" if prefill is None else "disagg",
        engine=engine,
        replicas=1,
        prefill=prefill,
        prefill_replicas=0 if prefill is None else 1,
        weights=weights,
        kv_dtype=kv_dtype,
        kv_auto=kv_auto,
        args=args,
        prefill_args=prefill_args,
    )
    wl, none = Workload(isl=isl, osl=osl, concurrency=1), StepTime(weights=0, kv=0, compute=0, tp_comm=0, ep_comm=0, overhead=0)
    roles = (("agg", engine),) if prefill is None else (("prefill", prefill), ("decode", engine))
    pools = [_pool(model, hw, one, wl, role=role, engine=e, replicas=1, step=none, per_rank=1.0) for role, e in roles]
    return all(p.fits for p in pools), pools[-1].max_concurrency


def estimate(model: ModelSpec, hw: HardwareProfile, dep: Deployment, wl: Workload) -> ServeEstimate:
    """TTFT, TPOT and throughput of `dep` serving `wl` in steady state."""
    model = dep.model_as_launched(model)  # the Mamba state dtype the launch sets (EngineArgs.ssm_state_dtype)
    for engine in (dep.engine, dep.prefill):
        if engine is not None:
            engine.check(model)
    if dep.mode == "disagg":
        return _disagg(model, hw, dep, wl)
    return _agg(model, hw, dep, wl)


def _agg(model: ModelSpec, hw: HardwareProfile, dep: Deployment, wl: Workload) -> ServeEstimate:
    fw, engine = for_deployment(dep), dep.engine
    n = wl.concurrency / (dep.replicas * engine.dp)
    _, _, kv_tokens, held, _, _ = _pool_terms(model, hw, engine, fw, dep.weights, dep.kv_bytes, wl.isl, wl.osl)
    cap = held * engine.dp * dep.replicas / (dep.replicas * engine.dp)  # the pool's max_concurrency per rank
    reserve = fw.admission == "reserve_full"  # otherwise the loop runs the engine's own admission on the pool
    running = min(n, max(cap, 1.0)) if reserve else n
    step = decode_step(model, hw, engine, weights=dep.weights, kv_bytes=dep.kv_bytes, batch=running, context=wl.isl + wl.osl / 2, fw=fw)
    alone = prefill_time(model, hw, engine, weights=dep.weights, tokens=wl.isl, seq_len=wl.isl, fw=fw)
    loop = closed_loop(
        model,
        hw,
        dep,
        wl,
        step=step,
        alone=alone,
        running=running,
        kv_tokens=int(kv_tokens / model.kv_share(wl.isl + wl.osl)) // engine.dp,
    )  # request tokens
    # the loop's steps price a prompt at the profile's rate (the TPOT rows measure that rate for the
    # prompts riding in decode steps); a request's own prompt waits the fitted serving slowdown more
    extra = (fw.prefill_slowdown - 1.0) * alone.total
    waited = max(0.0, loop.ttft_s - alone.total)
    late = min(loop.late_s, waited)  # the first token's wait in the serving process (Framework.host_token_s)
    ttft_parts = {
        "prefill": alone.total + extra + min(0.0, loop.ttft_s - alone.total),
        "queue": waited - late,
        "first_step": 0.0,
        "kv_transfer": 0.0,
        "serving": late,
        "overhead": fw.ttft_overhead_s,
    }
    ttft = sum(ttft_parts.values())
    tpot = loop.tpot_s
    latency = ttft + (wl.osl - 1) * tpot
    saturated = n > cap if reserve else bool(loop.preempted or loop.refused)
    if saturated and reserve:  # the surplus waits for a slot: one latency per pool's worth of waiting requests
        ttft_parts["queue"] += (n / max(cap, 1e-9) - 1) * latency
        ttft = sum(ttft_parts.values())
    pool = _pool(model, hw, dep, wl, role="agg", engine=engine, replicas=dep.replicas, step=step, per_rank=running)
    rate = running * dep.replicas * engine.dp / latency
    return ServeEstimate(
        deployment=dep,
        workload=wl,
        framework_label=fw.label,
        ttft_s=ttft,
        tpot_s=tpot,
        requests_per_s=rate,
        pools=(pool,),
        ttft_parts=ttft_parts,
        tpot_parts=_tpot_parts(step, tpot),
        saturated=saturated,
    )


def _tpot_parts(step: StepTime, tpot: float) -> dict[str, float]:
    """The decode step's parts (scaled down when the loop's mean batch is below the step's) and the rest
    of TPOT, the prompts' prefill inside the request's decode window."""
    scale = min(1.0, tpot / step.total) if step.total > 0 else 0.0
    return {
        "weights": scale * step.weights,
        "kv": scale * step.kv,
        "compute": scale * step.compute,
        "tp_comm": scale * step.tp_comm,
        "ep_comm": scale * step.ep_comm,
        "overhead": scale * step.overhead,
        "prefill_mix": max(0.0, tpot - step.total),
    }


def kv_transfer_time(model: ModelSpec, hw: HardwareProfile, dep: Deployment, *, isl: int) -> float:
    """One prompt's KV cache from a prefill engine to a decode engine.

    Each prefill GPU sends its shard over its own NIC rail (one rank per node
    pair, the profile's inter-node send/recv fit), all shards at once.
    """
    if dep.prefill is None:
        return 0.0
    return _transfer(model, hw, dep.prefill, dep.kv_bytes, isl)


@remembered
def _transfer(model: ModelSpec, hw: HardwareProfile, prefill: Engine, kv_bytes: float, isl: int) -> float:
    """kv_transfer_time of one prefill engine's prompt (cached: the same for every decode pool behind it)."""
    shard = isl * model.kv_share(isl) * kv_bytes_per_token(model, prefill, kv_bytes) + state_bytes_per_request(model, prefill)
    return collective_time(hw, "send_recv", shard, Group(size=2, per_node=1))


@dataclass(frozen=True, slots=True, kw_only=True)
class PrefillServer:
    """One attention rank of a disaggregated prefill engine, as its pool's closed loop sees it."""

    step: StepTime  # one prompt's prefill at the profile's curves, the rank's alone
    service_s: float  # s: one prompt's time on the rank, as the framework's disagg_prefill prices it
    batch: int  # B: prompts one step takes at most (token budget // isl, within the max batch)
    batch_s: float  # s_B: seconds of a full step of a busy pool


@remembered
def prefill_server(
    model: ModelSpec, hw: HardwareProfile, pre: Engine, *, weights: str, isl: int, fw: Framework, slowdown: float
) -> PrefillServer:
    """A prefill engine batches the waiting prompts up to its token budget (cost/serve_disagg.py). How a
    prompt is priced is the framework's (Framework.disagg_prefill): "slowdown", `slowdown` (the
    aggregated fit, prefill_slowdown) x the profile's time; "engine", the engine's own steps at the
    profile's curves, where a busy step of an attention-DP engine holds every rank's prompts in its MoE
    layer (the ranks' tokens are gathered into it; without Framework.dp_padding a lone prompt's step
    computes only its own) while the rank's attention and dense layers compute its prompts alone. Cached: the
    same for every decode pool and concurrency behind the prefill engine."""
    alone = prefill_time(model, hw, pre, weights=weights, tokens=isl, seq_len=isl, fw=fw)
    batch = max(1, min(fw.chunk_tokens // max(1, isl), fw.max_seqs))
    engine = fw.disagg_prefill == "engine"
    busy = engine and pre.dp > 1 and not fw.dp_padding
    full = alone
    if batch > 1 or busy:
        full = prefill_time(model, hw, pre, weights=weights, tokens=batch * isl, seq_len=isl, fw=fw, all_ranks=busy)
    factor = 1.0 if engine else slowdown
    return PrefillServer(step=alone, service_s=alone.total * factor, batch=batch, batch_s=full.total * factor)


def _disagg(model: ModelSpec, hw: HardwareProfile, dep: Deployment, wl: Workload) -> ServeEstimate:
    fw, dec, pre = for_deployment(dep), dep.engine, dep.prefill
    if pre is None:
        raise SpecError("`mode=disagg` needs the prefill engine (`prefill_tp` ...)")
    ranks = dep.replicas * dec.dp  # decode attention ranks
    n = wl.concurrency / ranks
    held = _pool_terms(model, hw, dec, fw, dep.weights, dep.kv_bytes, wl.isl, wl.osl)[3]
    cap = max(held * dec.dp * dep.replicas / ranks, 1e-9)  # the decode pool's max_concurrency per rank
    pfw = for_deployment(dep, "prefill")
    server = prefill_server(model, hw, pre, weights=dep.weights, isl=wl.isl, fw=pfw, slowdown=fw.prefill_slowdown)
    pstep = server.step
    transfer = kv_transfer_time(model, hw, dep, isl=wl.isl)
    loop = DisaggLoop(
        service_s=server.service_s,
        servers=dep.prefill_replicas * pre.dp,
        ahead_s=fw.ttft_overhead_s + transfer,
        ranks=ranks,
        osl=wl.osl,
        batch=server.batch,
        batch_s=server.batch_s,
    )

    def step_at(b: float) -> StepTime:
        return decode_step(model, hw, dec, weights=dep.weights, kv_bytes=dep.kv_bytes, batch=b, context=wl.isl + wl.osl / 2, fw=fw)

    empty = step_at(EMPTY)  # decode_step is cached (cost/serve_memo.py): the same for every concurrency
    # a decode rank runs at most the engine's max batch (Framework.max_seqs: --max-num-seqs,
    # --max-running-requests, max_batch_size, per attention-DP rank) and what its KV cache holds
    b, step = loop.solve(step_at, concurrency=wl.concurrency, most=min(n, cap, fw.max_seqs), empty=empty)
    rate = engines = loop.rate(b, step.total)
    if fw.host_token_s > 0:  # each decode engine's serving process sends at most 1 / host_token_s tokens/s
        rate = min(rate, dep.replicas / (fw.host_token_s * wl.osl))
    # Little's law on the loop: what the pools do not hold waits before its decode (the prefill queue,
    # a free slot when the decode batch is at its cap or the decode cache is full, the serving process)
    waited = max(0.0, wl.concurrency / rate - (loop.ahead_s + loop.service_s + wl.osl * step.total))
    late = min(waited, wl.concurrency / rate - wl.concurrency / engines)
    ttft_parts = {
        "prefill": loop.service_s,
        "queue": waited - late,
        "first_step": step.total,
        "kv_transfer": transfer,
        "serving": late,
        "overhead": fw.ttft_overhead_s,
    }
    ttft = sum(ttft_parts.values())
    # requests queued for a prefill hold no decode KV: the cache is full only if the decode batch reached it
    kv_full = n > cap and b >= cap * (1 - 1e-9)
    saturated = kv_full or loop.rho(b, step.total) >= RHO_SATURATED
    pools = (
        _pool(model, hw, dep, wl, role="prefill", engine=pre, replicas=dep.prefill_replicas, step=pstep, per_rank=1.0),
        _pool(model, hw, dep, wl, role="decode", engine=dec, replicas=dep.replicas, step=step, per_rank=b),
    )
    return ServeEstimate(
        deployment=dep,
        workload=wl,
        framework_label=fw.label,
        ttft_s=ttft,
        tpot_s=step.total,
        requests_per_s=rate,
        pools=pools,
        ttft_parts=ttft_parts,
        tpot_parts=_tpot_parts(step, step.total),
        saturated=saturated,
    )
