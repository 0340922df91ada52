"""The benchmark's closed loop on one attention rank of an aggregated engine, run step by step.

How a step is priced and how the run is made of a first wave and a steady state: docs/serving.md
("How it is computed") and cost/serve_load.py; the scheduler itself is cost/serve_sim.py.
"""

from __future__ import annotations

from typing import Any

from autopar.cost.serve import StepTime, decode_step, prefill_in_step
from autopar.cost.serve_admit import Scheduler
from autopar.cost.serve_sim import simulate
from autopar.cost.serve_step import LoopResult, StepCost
from autopar.spec.hardware import HardwareProfile
from autopar.spec.model import ModelSpec
from autopar.spec.serve import Deployment, Workload, for_deployment

# requests the benchmark client sends per request in flight (emit/serving.py PROMPTS_PER_SLOT: the
# --num-prompts of the benchmark command autopar prints)
PROMPTS_PER_REQUEST = 10
# with a serving process that may fall behind (Framework.host_token_s), the steady loop leaves out the
# first HOST_WARMUP rounds of C requests while its lag builds and averages over HOST_ROUNDS more, as the
# lag swings from round to round (the rounds tried: docs/calibration.md, host_token_s)
HOST_WARMUP = 2
HOST_ROUNDS = 3
HOST_NEAR = 0.7  # ... when the process's time for one round is above 0.7 of the round (tokens and prompts)


def closed_loop(
    model: ModelSpec,
    hw: HardwareProfile,
    dep: Deployment,
    wl: Workload,
    *,
    step: StepTime,
    alone: StepTime,
    running: float,
    kv_tokens: int = 0,
) -> LoopResult:
    """The benchmark's closed loop on one attention rank, step by step (cost/serve_sim.py).

    A step with d decode requests and p prompt tokens costs the decode step
    at batch d (linear between the decode steps at batch 1 and `running`)
    plus p / isl of a prompt's prefill riding in a step (prefill_in_step: its
    prefill less the weight read the step already makes). A framework that
    admits by the KV pool it has left (Framework.admission other than
    reserve_full) is given the rank's `kv_tokens`. A hybrid model's engine runs the overlap scheduler only where Framework.hybrid_overlap
    says so; without it the host's walk over the running requests follows the GPU's step.

    Attention-DP ranks that step together (Framework.dp_padding) wait for each other's prompts:
    every step of this rank also lasts the other ranks' prompt work, at their steady rate
    (others_prompt_s)."""
    fw = for_deployment(dep)
    overlap = fw.overlap and (model.mamba is None or fw.hybrid_overlap)
    conc = max(1, round(running))
    one = (
        decode_step(model, hw, dep.engine, weights=dep.weights, kv_bytes=dep.kv_bytes, batch=1.0, context=wl.isl + wl.osl / 2, fw=fw).total
        if conc > 1
        else step.total
    )
    per_decode = (step.total - one) / (conc - 1) if conc > 1 else 0.0
    riding = prefill_in_step(alone, step, chunks=max(1.0, wl.isl / fw.chunk_tokens))
    eager = fw.eager_layer_s * model.layers / dep.engine.pp if fw.graph_sizes else 0.0
    others = others_prompt_s(riding, dp=dep.engine.dp if fw.dp_padding else 1, concurrency=conc, osl=wl.osl)
    cost = StepCost(
        fixed=one - per_decode + others,
        per_decode=per_decode,
        per_token=riding / wl.isl,
        eager_s=eager,
        graph_sizes=frozenset(fw.graph_sizes),
        host_per_decode=fw.host_request_s,
        host_serial=not overlap,
    )
    sched = Scheduler(
        policy=fw.policy,
        budget=fw.chunk_tokens,
        chunked=fw.chunked,
        max_seqs=fw.max_seqs,
        kv_tokens=kv_tokens if fw.admission != "reserve_full" else 0,
        overlap=overlap,
        mixed=fw.mixed_chunk,
        admission="room" if fw.admission == "reserve_ratio" else "blocks",
        retract_steps=fw.retract_steps,
        recv_interval=fw.recv_interval,
        prefill_tokens=fw.max_prefill_tokens,
        host_token_s=fw.host_token_s * dep.engine.dp,
        host_prompt_token_s=fw.host_prompt_token_s * dep.engine.dp,
    )
    run: dict[str, Any] = {"concurrency": conc, "isl": wl.isl, "osl": wl.osl, "spread": wl.random_range_ratio}  # the requests
    if fw.policy == "prefill_first" and not fw.mixed_chunk:  # every cycle re-forms the clients' first wave
        return simulate(cost, sched, **run, prompts=PROMPTS_PER_REQUEST * conc)
    steady = simulate(cost, sched, **run, prompts=conc, staggered=True)
    per_request = sched.host_token_s * wl.osl + sched.host_prompt_token_s * wl.isl  # the process's time for one request
    if per_request * conc > HOST_NEAR * (steady.ttft_s + (wl.osl - 1) * steady.tpot_s):
        # the serving process (Framework.host_token_s) sets the loop's pace: its lag builds over the first
        # requests, so the steady loop is run longer and its first rounds left out
        warm = conc * HOST_WARMUP
        steady = simulate(cost, sched, **run, prompts=conc * HOST_ROUNDS + warm, staggered=True, warmup=warm)
    if wl.warmed:
        return steady
    wave = simulate(cost, sched, **run, prompts=conc)
    k = PROMPTS_PER_REQUEST
    return LoopResult(
        ttft_s=(wave.ttft_s + (k - 1) * steady.ttft_s) / k,
        tpot_s=(wave.tpot_s + (k - 1) * steady.tpot_s) / k,
        seconds=wave.seconds + (k - 1) * steady.seconds,
        steps=wave.steps + (k - 1) * steady.steps,
        late_s=(wave.late_s + (k - 1) * steady.late_s) / k,
        preempted=steady.preempted,
        refused=steady.refused,
    )


def others_prompt_s(riding: float, *, dp: int, concurrency: int, osl: int) -> float:
    """Seconds the other attention-DP ranks' prompts add to each step of one rank when the ranks step
    together: vLLM's DP engine cores agree on every step's token count across the DP group
    (vllm/v1/worker/dp_utils.py coordinate_batch_across_dp; gpu_model_runner.py
    _determine_batch_execution_and_padding) and the MoE layer gathers every rank's tokens
    (AgRsAll2AllManager), so a rank's decode-only step lasts as long as a step in which another rank
    prefills. In steady state each of the dp - 1 other ranks takes concurrency / osl new prompts a
    step (one arrives as one ends), each `riding` seconds of the step it joins (prefill_in_step);
    their sum is added to this rank's every step, a mean over the steps (where two ranks prefill in
    one step the longer counts, not the sum: an upper bound where prompts are frequent). 0 with one rank."""
    if dp <= 1 or osl <= 0:
        return 0.0
    return (dp - 1) * riding * concurrency / osl
