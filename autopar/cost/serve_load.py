"""Steady state of a deployment under a fixed concurrency: TTFT, TPOT, throughput.

A closed loop holds `concurrency` requests in flight; each one, when it ends,
is replaced by a new one (how `vllm bench serve --max-concurrency`, genai-perf
and aiperf drive a server). Per attention rank n = concurrency / (engines x
attention-DP ranks) requests share every step.

Aggregated (prefill and decode on the same engines):
- TPOT = decode step at batch n + prefill mix: during one request's osl - 1
  decode steps the other n - 1 requests each bring one prompt whose prefill
  shares the engine, of which the share `prefill_mix` lands inside decode steps;
  a prompt riding in a decode step costs its prefill less the weight read the
  step already makes (cost/serve.py prefill_in_step).
- TTFT = own prefill (times the framework's serving slowdown) + the share
  `queue_share` of the other requests' prefills queued ahead + one decode step
  (the step in progress) + the per-request overhead.
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
    prefill_in_step,
    prefill_time,
    state_bytes_per_request,
    wave_ttft,
    weight_bytes_per_gpu,
)
from autopar.cost.serve_disagg import EMPTY, RHO_SATURATED, DisaggLoop
from autopar.cost.serve_frameworks import Framework, constants
from autopar.errors import SpecError
from autopar.spec.hardware import HardwareProfile
from autopar.spec.model import ModelSpec
from autopar.spec.serve import Deployment, Engine, Workload
from autopar.spec.topology import Group

GIB = 2**30


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


def _pool(model: ModelSpec, hw: HardwareProfile, dep: Deployment, wl: Workload, *, role: str, engine: Engine,
          replicas: int, step: StepTime, per_rank: float) -> PoolEstimate:
    fw = constants(dep.framework, dep.framework_version)
    pool = kv_pool_bytes(model, hw, engine, weights=dep.weights, fw=fw)
    per_token = kv_bytes_per_token(model, engine, dep.kv_bytes)
    per_request = (wl.isl + wl.osl) * per_token + state_bytes_per_request(model, engine)
    tokens = max(0, int(pool / per_token)) * engine.dp if per_token > 0 else 0
    held = max(0, int(pool / per_request)) if per_request > 0 else 10**9
    weights = weight_bytes_per_gpu(model, engine, dep.weights)
    used = fw.memory_fraction * hw.memory_bytes - pool if fw.memory_rule == "total" else hw.memory_bytes - pool / fw.memory_fraction
    in_use = min(max(pool, 0.0), per_rank * per_request)
    return PoolEstimate(role=role, engine=engine, replicas=replicas, requests_per_rank=per_rank, step=step,
                        kv_cache_tokens=tokens, max_concurrency=held * engine.dp * replicas, weights_gib=weights / GIB,
                        memory_gib_per_gpu=(used + in_use) / GIB, fits=held >= 1)


def estimate(model: ModelSpec, hw: HardwareProfile, dep: Deployment, wl: Workload) -> ServeEstimate:
    """TTFT, TPOT and throughput of `dep` serving `wl` in steady state."""
    for engine in (dep.engine, dep.prefill):
        if engine is not None:
            engine.check(model)
    if dep.mode == "disagg":
        return _disagg(model, hw, dep, wl)
    return _agg(model, hw, dep, wl)


def _agg(model: ModelSpec, hw: HardwareProfile, dep: Deployment, wl: Workload) -> ServeEstimate:
    fw, engine = constants(dep.framework, dep.framework_version), dep.engine
    n = wl.concurrency / (dep.replicas * engine.dp)
    probe = _pool(model, hw, dep, wl, role="agg", engine=engine, replicas=dep.replicas, step=StepTime(
        weights=0, kv=0, compute=0, tp_comm=0, ep_comm=0, overhead=0), per_rank=n)
    cap = probe.max_concurrency / (dep.replicas * engine.dp)
    running = min(n, max(cap, 1.0))
    step = decode_step(model, hw, engine, weights=dep.weights, kv_bytes=dep.kv_bytes, batch=running,
                       context=wl.isl + wl.osl / 2, fw=fw)
    alone = prefill_time(model, hw, engine, weights=dep.weights, tokens=wl.isl, seq_len=wl.isl, fw=fw)
    # In a decode step a prompt costs its prefill less the weight read the step already makes
    # (prefill_in_step); the step that carries a waiting prompt costs about its whole prefill.
    riding = prefill_in_step(alone, step, chunks=max(1.0, wl.isl / fw.chunk_tokens))
    others = max(0.0, running - 1)  # fewer than one request per rank: nobody else's prefill
    mix = fw.prefill_mix * others * riding / (wl.osl - 1)
    tpot = step.total + mix
    ttft_parts = {"prefill": alone.total * fw.prefill_slowdown, "queue": fw.queue_share * others * alone.total,
                  "first_step": step.total, "kv_transfer": 0.0, "overhead": fw.ttft_overhead_s}
    if fw.waves:  # requests arrive together and are prefilled back to back; no decode step is in progress
        wave = wave_ttft(model, hw, engine, weights=dep.weights, isl=wl.isl, requests=running, fw=fw)
        ttft_parts.update(prefill=alone.total, queue=max(0.0, wave - alone.total), first_step=0.0)
    ttft = sum(ttft_parts.values())
    latency = ttft + (wl.osl - 1) * tpot
    saturated = n > cap
    if saturated:  # the surplus waits for a slot: one latency per pool's worth of waiting requests
        ttft_parts["queue"] += (n / max(cap, 1e-9) - 1) * latency
        ttft = sum(ttft_parts.values())
    pool = _pool(model, hw, dep, wl, role="agg", engine=engine, replicas=dep.replicas, step=step, per_rank=running)
    rate = running * dep.replicas * engine.dp / latency
    return ServeEstimate(deployment=dep, workload=wl, framework_label=fw.label, ttft_s=ttft, tpot_s=tpot,
                         requests_per_s=rate, pools=(pool,), ttft_parts=ttft_parts,
                         tpot_parts=_tpot_parts(step, mix), saturated=saturated)


def _tpot_parts(step: StepTime, mix: float) -> dict[str, float]:
    return {"weights": step.weights, "kv": step.kv, "compute": step.compute, "tp_comm": step.tp_comm,
            "ep_comm": step.ep_comm, "overhead": step.overhead, "prefill_mix": mix}


def kv_transfer_time(model: ModelSpec, hw: HardwareProfile, dep: Deployment, *, isl: int) -> float:
    """One prompt's KV cache from a prefill engine to a decode engine.

    Each prefill GPU sends its shard over its own NIC rail (one rank per node
    pair, the profile's inter-node send/recv fit), all shards at once.
    """
    if dep.prefill is None:
        return 0.0
    shard = isl * kv_bytes_per_token(model, dep.prefill, dep.kv_bytes) + state_bytes_per_request(model, dep.prefill)
    return collective_time(hw, "send_recv", shard, Group(size=2, per_node=1))


_EMPTY: dict[tuple[object, ...], tuple[HardwareProfile, StepTime]] = {}


def _empty_step(model: ModelSpec, hw: HardwareProfile, engine: Engine, *, weights: str, kv_bytes: float,
                context: float, fw: Framework) -> StepTime:
    """The decode step at a near-empty batch (serve_disagg.EMPTY per rank), kept for the other
    concurrencies a sweep prices the same deployment at (the profile, a dict, is matched by identity)."""
    key = (model, id(hw), engine, weights, kv_bytes, context, fw)
    hit = _EMPTY.get(key)
    if hit is not None and hit[0] is hw:
        return hit[1]
    if len(_EMPTY) > 4096:
        _EMPTY.clear()
    step = decode_step(model, hw, engine, weights=weights, kv_bytes=kv_bytes, batch=EMPTY, context=context, fw=fw)
    _EMPTY[key] = (hw, step)
    return step


def _disagg(model: ModelSpec, hw: HardwareProfile, dep: Deployment, wl: Workload) -> ServeEstimate:
    fw, dec, pre = constants(dep.framework, dep.framework_version), dep.engine, dep.prefill
    if pre is None:
        raise SpecError("--mode disagg needs the prefill engine (--prefill-tp ...)")
    ranks = dep.replicas * dec.dp  # decode attention ranks
    n = wl.concurrency / ranks
    probe = _pool(model, hw, dep, wl, role="decode", engine=dec, replicas=dep.replicas, step=StepTime(
        weights=0, kv=0, compute=0, tp_comm=0, ep_comm=0, overhead=0), per_rank=n)
    cap = max(probe.max_concurrency / ranks, 1e-9)
    pstep = prefill_time(model, hw, pre, weights=dep.weights, tokens=wl.isl, seq_len=wl.isl, fw=fw)
    transfer = kv_transfer_time(model, hw, dep, isl=wl.isl)
    loop = DisaggLoop(service_s=pstep.total * fw.prefill_slowdown, servers=dep.prefill_replicas * pre.dp,
                      ahead_s=fw.ttft_overhead_s + transfer, ranks=ranks, osl=wl.osl)

    def step_at(b: float) -> StepTime:
        return decode_step(model, hw, dec, weights=dep.weights, kv_bytes=dep.kv_bytes, batch=b,
                           context=wl.isl + wl.osl / 2, fw=fw)

    empty = _empty_step(model, hw, dec, weights=dep.weights, kv_bytes=dep.kv_bytes, context=wl.isl + wl.osl / 2, fw=fw)
    b, step = loop.solve(step_at, concurrency=wl.concurrency, most=min(n, cap), empty=empty)
    rate = loop.rate(b, step.total)
    # Little's law on the loop: what the pools do not hold waits before its decode (the prefill queue,
    # and a free KV slot when the decode cache is full)
    queue = max(0.0, wl.concurrency / rate - (loop.ahead_s + loop.service_s + wl.osl * step.total))
    ttft_parts = {"prefill": loop.service_s, "queue": queue, "first_step": step.total, "kv_transfer": transfer,
                  "overhead": fw.ttft_overhead_s}
    ttft = sum(ttft_parts.values())
    saturated = n > cap or loop.rho(b, step.total) >= RHO_SATURATED
    pools = (_pool(model, hw, dep, wl, role="prefill", engine=pre, replicas=dep.prefill_replicas, step=pstep,
                   per_rank=1.0),
             _pool(model, hw, dep, wl, role="decode", engine=dec, replicas=dep.replicas, step=step, per_rank=b))
    return ServeEstimate(deployment=dep, workload=wl, framework_label=fw.label, ttft_s=ttft, tpot_s=step.total,
                         requests_per_s=rate, pools=pools, ttft_parts=ttft_parts, tpot_parts=_tpot_parts(step, 0.0),
                         saturated=saturated)
