"""What each serving framework does by default that the cost model needs, and the
constants fitted on measured serving runs.

Documented defaults carry their source. Fitted constants were set on the
aggregated rows of benchmarks/data/serving_runs.csv (810 rows, from
ai-dynamo/aiconfigurator silicon_sample.csv @095f58a) by
`python benchmarks/serving_accuracy.py --fit NAME@VERSION`, one set per
framework version that the file measures:

- vllm 0.12: the vLLM 0.12.0 rows (Qwen3-32B bf16/fp8 on H100, Qwen3-235B-A22B-FP8
  and Llama-3.1-8B-FP8 on H200);
- sglang 0.5.1: the SGLang 0.5.1.post1 rows (Qwen3-32B bf16 on H100);
- sglang 0.5.6: the SGLang 0.5.6.post2 rows (Llama-3.1-8B fp8 and Qwen3-235B-A22B-FP8
  on H200); rows of other versions (0.5.8) use the newest set;
- trtllm 1.0: the TensorRT-LLM 1.0.0rc3 rows (Llama-3.1-8B, Qwen3-32B fp8,
  Qwen3-235B-A22B-FP8 on H100).

Queue-saturated rows (KV cache too small for the concurrency), rows whose
stated concurrency would need more than the GPUs' sustained compute, and the
disaggregated rows (held out to validate) were left out of every fit. Each
fitted constant names its mechanism:

- step_overhead_s: host work per engine step that the GPU waits for (scheduler,
  sampling, detokenisation, Python), added to every decode step.
- ttft_overhead_s: per-request work before the first step (HTTP, tokenisation,
  admission) and after it (first-token return), added to TTFT.
- prefill_slowdown: serving prefill against the training GEMM/attention curves
  of the profile, for a request's own prompt: TTFT adds (slowdown - 1) x its
  prefill to what the closed loop gives. The loop's steps price prompts at the
  profile's rate: the TPOT rows measure that rate for prompts riding in decode
  steps (vLLM H100 TPOT 10.0% with no factor on them).
- moe_decode_slowdown (vLLM 0.12 only): a decode step's routed-expert read in
  moe_decode_slowdown x the profile's memory time (cost/serve.py _experts): the
  fused-MoE kernels stream the experts below the copy rate of the profile's
  memory_efficiency. Fitted 1.5 (2.67 TB/s on H200); published fused_moe kernel
  timings bracket it: vLLM benchmark_moe on H100, Qwen3-30B-A3B fp8 (E=128,
  N=768, K=2048), 263-274 us at 64-128 tokens for 604 MB of experts = 2.2 TB/s
  against BabelStream's 2.90 (1.3x; vllm-project/vllm#24700); SGLang's
  tuning_fused_moe_triton on H200, Qwen3-235B-A22B fp8 block [128,128] at tp8
  (N=192, K=4096), 92 and 125 us at 16 and 32 tokens for the 81 and 111 of 128
  experts they touch (191 and 261 MB) = 2.1 TB/s against 4.01 (1.9x;
  sgl-project/sglang#11730). It replaced moe_layer_overhead_s, a fixed 0.15 ms
  per MoE layer and decode step (see the vLLM entry).
- eager_layer_s (TensorRT-LLM only, where graph_sizes is set): host seconds per
  layer of a step that cannot replay a captured CUDA graph, a step holding a
  prompt or a decode batch of a size not captured (TensorRT-LLM 1.0 captures
  1..32, 64 and 128 without padding, so a closed loop at 64 or 128 whose batch
  is one or two short of it runs eager). Such a step takes the larger of its
  GPU time and layers x eager_layer_s (cost/serve_sim.py StepCost). Fitted on
  the TensorRT-LLM 1.0 rows (0.0002 s with the overlap scheduler and
  host_token_s below, 0.0003 s with the overlap scheduler only, 0.0004 s
  without either); what it moves is the c64 and c128
  rows of the tensor-parallel engines (TP4/TP8), where the GPU time per step
  is short.

- host_request_s (SGLang 0.5.6 only): host seconds per running request and step
  that the overlap scheduler runs beside the GPU's next step, so a step takes
  the larger of its GPU time and running requests x host_request_s
  (cost/serve_sim.py StepCost.host_per_decode). SGLang's scheduler walks every
  running request in Python after each step (0.5.6.post2
  managers/scheduler_output_processor_mixin.py process_batch_result_decode:
  append the token, test the stop conditions; stream_output_generation: build
  each request's output). Fitted on the 0.5.6 rows: 5e-5 s (step_overhead_s
  0.004 -> 0.003); what sets it is Llama-3.1-8B at c128-c512 on tp2-tp8, whose
  TPOT stays at 23-30 ms where the GPU step is 5-19 ms (512 x 50 us = 25.6
  ms); the Qwen3-235B rows (at most 9 requests) do not bind it. H200 TPOT
  12.4 -> 9.4%, TTFT 36.6 -> 36.7%; leave-one-group-out TPOT Llama held out
  13.3 -> 9.3% (the Qwen rows cannot move it from its start), Qwen held out
  14.7 -> 13.2%, TTFT 41.5 -> 41.4% and 32.7 -> 33.6%. SGLang 0.5.1's refit
  keeps it 0 (its H100 Qwen3-32B steps are GPU-bound at up to 128 requests).

- host_token_s (TensorRT-LLM 1.0 only): seconds of the serving process per
  token it streams, per engine. Not fitted by the grid: read off the rows as
  the most output tokens/s any TensorRT-LLM 1.0.0rc3 row measures (C x osl /
  its latency): 9.28k (Llama-3.1-8B tp8 2048/512 c64), with tp4 1024/512 c128
  9.24k, tp8 1024/256 c128 9.23k, tp2 1024/512 c128 9.22k: three TP sizes,
  two concurrencies and 18 or 36 requests/s alike, so a limit per token (not
  per request) of one process (not of the GPUs); 1 / 9.35k = 1.07e-4 s. Each
  token a TensorRT-LLM engine streams is one response that Python in the
  serving process hands on (tensorrt_llm/executor/proxy.py
  dispatch_result_task puts each into its request's queue), then the worker
  streams it to the frontend. When the GPUs give tokens faster, they queue
  (first come first served, cost/serve_sim.py Scheduler.host_token_s): the
  client sees a request end late and sends its next one late, so the engine
  holds fewer requests than the concurrency, TPOT stays the step's and the
  wait shows in TTFT. It explains why measured TTFT at c128 grows with osl at
  a fixed isl (Llama tp4 1024/128, /256, /512: 652, 1116, 1981 ms, as if
  about 90-115 of the 128 requests were in the engine; the model without it:
  208, 203, 198). Added alone: the 1024-token c128 rows' signed TTFT error
  -52.6 -> -40.4%, Llama-3.1-8B TTFT 32.8 -> 30.4%, TPOT 9.9 -> 10.5%, the
  Qwen3 rows unchanged (their engines stream at most 6.2k and 4.6k tokens/s,
  so none of their rows bounds it). Refitted with it (eager_layer_s 0.0003 ->
  0.0002, the rest unchanged): the 467 scored rows 22.3 / 9.2 -> 20.9 / 9.6%
  (TTFT / TPOT); Llama-3.1-8B 32.8 / 9.9 -> 28.9 / 9.0%, Qwen3-32B 16.1 /
  7.6 -> 16.0 / 8.8%, Qwen3-235B 15.5 / 10.2 -> 16.2 / 11.3%; signed TTFT at
  c128 for 1024, 2048, 4096-token prompts -52.6, -37.3, -24.1 -> -30.5,
  -24.6, -18.6%. A disaggregated decode engine streams every output token
  through the same process: its requests/s are capped at 1 / (host_token_s x
  osl) per engine (cost/serve_load.py _disagg; no TensorRT-LLM disaggregated
  row measures it).

TensorRT-LLM 1.0 also runs the overlap scheduler (overlap, not fitted; a new
request joins one step later, cost/serve_sim.py). With both, refitted:
eager_layer_s 0.0003, the other constants unchanged; the 471 scored rows' TTFT
23.4 -> 22.4%, TPOT 10.6 -> 9.7% (e.g. Qwen3-235B TP8 EP8 1024/256 c128 TPOT
26.6 -> 30.4 ms, measured 46.8).

Not fitted: the scheduler policy (`policy`, `chunked`, `max_seqs`), taken from
each framework's source, that cost/serve_sim.py runs step by step for the
benchmark's closed loop (queueing behind other prompts, waves, and the
prompts that land in a request's decode steps follow from it). It replaced
two fitted constants per version, queue_share (share of the other requests'
prefills queued ahead) and prefill_mix (share of their prefill landing in a
request's decode steps), and SGLang 0.5.1's wave formula; the constants above
were refitted with it (vLLM ttft_overhead_s 0.06 -> 0; SGLang 0.5.1
step_overhead_s 0 -> 0.001, ttft_overhead_s 0.1 -> 0.08; TensorRT-LLM
ttft_overhead_s 0.1 -> 0.08, prefill_slowdown 2.0 -> 2.5).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from autopar.errors import SpecError

if TYPE_CHECKING:
    from autopar.spec.serve import Deployment


@dataclass(frozen=True, slots=True, kw_only=True)
class Framework:
    """Defaults and fitted constants of one serving framework."""

    name: str  # vllm | sglang | trtllm
    version: str  # the framework version the fitted constants belong to
    label: str  # display name with the version the constants were fitted on
    memory_fraction: float  # share of GPU memory (total or free, see memory_rule) the engine may take
    memory_rule: str  # total: fraction of total memory holds weights + KV; free: KV gets the fraction of what weights leave
    chunk_tokens: int  # tokens one prefill step takes at most (chunked prefill budget)
    graph_reserve_bytes: float  # CUDA graphs, NCCL and workspace memory outside the KV pool
    step_overhead_s: float  # fitted: host time per decode step
    ttft_overhead_s: float  # fitted: per-request time outside the engine steps
    prefill_slowdown: float  # fitted: serving prefill over the profile's curves
    policy: str = "decode_first"  # scheduler: decode_first | prefill_first (cost/serve_sim.py)
    chunked: bool = True  # a prompt may be cut across steps (chunked prefill)
    max_seqs: int = 1024  # requests running at once (--max-num-seqs, --max-running-requests, max_batch_size)
    # KV admission when the pool cannot hold every request at full length (cost/serve_sim.py, serve_load.py):
    # reserve_full: isl + osl reserved per request, the surplus queues before its first token (TensorRT-LLM 1.0
    # _torch/pyexecutor/scheduler.py GuaranteedNoEvictScheduler, CapacitySchedulerPolicy default GUARANTEED_NO_EVICT)
    # | blocks_now_preempt: the prompt's blocks now, the newest running request preempted and recomputed when a step
    # has none (vLLM 0.12 v1/core/sched/scheduler.py schedule, _preempt_request) | reserve_ratio: isl + osl at
    # new_token_ratio, retracted when decodes run out (SGLang 0.5.6 schedule_policy.py PrefillAdder, retract_decode)
    admission: str = "reserve_full"
    retract_steps: int = 1  # decode steps of room a preemption leaves the kept requests (SGLANG_RETRACT_DECODE_STEPS)
    graph_sizes: tuple[int, ...] = ()  # decode batch sizes with a captured CUDA graph, no padding (() = not modelled)
    eager_layer_s: float = 0.0  # fitted: host seconds per layer of a step run without a CUDA graph
    overlap: bool = False  # overlap scheduler: a step's tokens are returned after the next step is launched
    dp_padding: bool = False  # attention-DP ranks step at the largest rank's token count; the MoE computes them all
    moe_decode_reads: str = "touched"  # decode steps read the experts the tokens touch | every local expert ("local")
    host_request_s: float = 0.0  # fitted: host seconds per running request a step, run beside the GPU (overlap)
    mixed_chunk: bool = False  # SGLang --enable-mixed-chunk: a prefill step also holds the running decodes
    max_prefill_tokens: int = 0  # SGLang --max-prefill-tokens: new prompt tokens a step admits (0: chunk_tokens only)
    host_token_s: float = 0.0  # read off the rows: serving-process seconds per streamed token, per engine (0: keeps up)
    moe_decode_slowdown: float = 1.0  # fitted: a decode step's expert read over the profile's memory time (fused-MoE kernel)


GIB = 2**30
# TensorRT-LLM 1.0 PyTorch backend: CUDA graphs on by default (TorchLlmArgs.cuda_graph_config
# default_factory=CudaGraphConfig), max_batch_size 0 -> 128, enable_padding False, so the captured
# batch sizes are 1..31, 32, 64, 128 (llmapi/llm_args.py CudaGraphConfig._generate_cuda_graph_batch_sizes,
# TorchLlmArgs.validate_cuda_graph_config); a batch holding a context request never replays a graph
# (pyexecutor/scheduler.py ScheduledRequests.can_run_cuda_graph: no context requests).
TRTLLM_GRAPH_SIZES = (*range(1, 33), 64, 128)

FITTED: dict[tuple[str, str], Framework] = {
    # vLLM: --gpu-memory-utilization 0.9 of total memory holds weights, activations
    # and KV (vllm/config/cache.py gpu_memory_utilization default 0.9); V1
    # --max-num-batched-tokens 8192 and --max-num-seqs 1024 for the API server on
    # >= 70 GiB GPUs other than A100 (vllm 0.12.0, vllm/engine/arg_utils.py
    # EngineArgs.get_batch_defaults).
    ("vllm", "0.12"): Framework(name="vllm", version="0.12", label="vLLM 0.12", memory_fraction=0.9, memory_rule="total", chunk_tokens=8192,
                      graph_reserve_bytes=1.5 * GIB, step_overhead_s=0.002, ttft_overhead_s=0.0,
                      prefill_slowdown=2.5, moe_decode_slowdown=1.5, moe_decode_reads="local", dp_padding=True,
                      admission="blocks_now_preempt"),
    # vLLM V1 schedules decodes first and fills the budget with chunked prefill (cost/serve_sim.py).
    # moe_decode_reads "local": a vLLM 0.12 decode step costs every local expert's weight read, not
    # only the experts its tokens touch under uniform routing. Read off the H200 Qwen3-235B-A22B-FP8
    # rows, not from vLLM's source (its fused-MoE kernels skip untouched experts; SGLang 0.5.6's tp2
    # rows on the same GPU and model measure 15-18 ms TPOT, below the local-expert read): the TPOT of
    # the tp1 dp2 rows does not move with the batch (57.7 ms at 4 requests, 58.6 at 9; touched
    # experts 22% and 43% of 128 under uniform routing), and it falls with the experts each GPU
    # holds, not with the experts touched: 113 GB per GPU (expert TP 2: tp2, tp1 dp2, tp2 ep2) 51-59 ms,
    # 57 GB (expert TP 4: tp4, tp2 dp2, tp1 dp4) 34-45 ms, 14 ms apart at the H200's 4.0 TB/s, as
    # measured (17). H200 TPOT 16.8 -> 7.0% with a fixed time per MoE layer and decode step then
    # refitted 0.2 -> 0.15 ms (H100 Qwen3-32B is dense: unchanged); leave-one-group-out TPOT 21.1 ->
    # 14.1% (H100 held out), 16.8 -> 7.0% (H200 held out). The slower step also lifts the worst prefill
    # queue of tp1 dp2 2000/1000 c9 above a third of its TTFT: it is scored (TTFT -80%), no longer
    # queue-saturated.
    # moe_decode_slowdown 1.5 (module docstring) replaced that fixed 0.15 ms per MoE layer (14.1 ms a
    # step for Qwen3-235B's 94 layers, whatever the layout). Without either, the H200 rows' TPOT is
    # under by a time that follows the experts each GPU holds, not the layers or the collectives:
    # mean measured - predicted 13.3 ms at expert TP 2 (tp2 dp1, 15 rows; 12.5 with ep2), 9.1 ms at
    # expert TP 4 (tp4 dp1, 11 rows), 0.47 and 0.64 of their 28.3 and 14.2 ms expert read, while
    # each step runs the same 94 MoE layers, and the layouts already pay their per-layer collectives
    # (tp_comm: two TP all-reduces a layer, 4.3-4.9 ms; ep_comm: the attention-DP all-gather and
    # reduce-scatter, 4.2-4.4 ms; profile latencies 22-26 us each). The attention-DP layouts are under
    # by more (tp1 dp2 18.6, tp1 dp4 18.7, tp2 dp2 11.5 ms), and the held-out H100 disaggregated
    # decode engine (tp1 dp8, 2P 1D 4000/1000) by nothing (20.5 ms predicted without either, 20.1
    # measured). H200 TTFT / TPOT 16.3 / 7.2 -> 15.9 / 6.3%; the disaggregated row's TPOT 34.6 ->
    # 25.4 ms (+72 -> +26%), TTFT 33.6 -> 32.2%; signed TPOT by layout (fixed 0.15 ms -> slowdown):
    # tp4 dp1 +14.0 -> -5.4%, tp2 dp1 +1.5 -> +1.7%, tp2 dp2 +6.5 -> -10.4%, tp1 dp2 -7.5 -> -7.4%,
    # tp1 dp4 -12.4 -> -28.7% (2 rows). Refitted with it, no constant moves. Ruled out (H200 TTFT /
    # TPOT MAPE): no per-layer time (the collectives already priced) 19.2 / 27.1%; the fixed time
    # for attention-DP engines only (the gather's latency, dp = 1 engines paying their TP all-reduce
    # alone) 18.1-18.6 / 19.0-20.7% at 0.1-0.2 ms; more collectives than ep_comm's one all-gather and
    # one reduce-scatter a layer: with the DP ranks padded to one token count vLLM's all_gatherv
    # gathers the hidden states and router logits with one all_gather each inside one NCCL group, not
    # with a broadcast per rank (vllm/distributed/device_communicators/cuda_communicator.py
    # all_gatherv: equal sizes -> pynccl all_gather; vllm-project/vllm@00b5a01dd), and the tp1 dp8
    # row, on time with ep_comm alone, leaves no room for more. What the attention-DP rows still lack
    # is not modelled (the lockstep of the DP ranks, below).
    # dp_padding (vllm 0.12.0 source, not fitted): with --data-parallel-size > 1 every step's token count
    # is agreed across the DP ranks and each rank is padded to the largest (vllm/v1/worker/
    # gpu_model_runner.py _determine_batch_execution_and_padding: allow_dp_padding unless cudagraph_mode
    # is NONE, whose default is FULL_AND_PIECEWISE, vllm/config/vllm.py; vllm/v1/worker/dp_utils.py
    # _synchronize_dp_ranks), and the MoE layer gathers the tokens of every DP rank before its experts
    # (vllm/model_executor/layers/fused_moe/layer.py FusedMoE.forward_impl: dispatch when dp_size > 1;
    # default VLLM_ALL2ALL_BACKEND allgather_reducescatter, vllm/distributed/device_communicators/
    # all2all.py: all_gatherv, reduce_scatterv). So one rank's prompt chunk costs the experts dp x its
    # tokens, its own and the other ranks' padding (cost/serve.py prefill_time). H200 Qwen3-235B: the
    # osl-100 attention-DP rows' TTFT was under by 11-42% (tp1 dp2 4000/100 c4 572 -> 743 ms, measured
    # 712; tp2 dp2 8000/100 c4 834 -> 1046, measured 941); H200 TTFT 20.1 -> 16.3% (46 -> 48 scored: the
    # slower prompt lifts the worst prefill queue of tp1 dp4 2000/100 c5 and 4000/100 c4 above a third of
    # their TTFT), TPOT 7.0 -> 7.2%; the held-out H100 disaggregated rows (DP prefill engines) TTFT 51.7 ->
    # 22.0%; the dense H100 rows unchanged. Refitted with it, the constants do not move.
    # Not modelled: the lockstep of the DP ranks' decode steps (every rank's step waits for the other
    # ranks' prompts: simulating the whole engine's C requests for TPOT moves H200 TPOT 7.2 -> 7.4%, tp1
    # dpN rows closer, tp2 dp2 8000/100 c4 45.5 -> 52.2 ms against 43.8 measured), and what makes the
    # attention-DP rows' TTFT grow with the output length at a fixed input length with ample KV (tp1 dp2
    # 2000/100 c5 451 ms, 2000/500 c9 1407, 2000/2000 c9 3225; tp1 dp4 4000/100 c4 821, 4000/2000 c7 4075):
    # 1-10% of the request's latency, as if some requests waited for a running one to end. Ruled out:
    # the KV pool (tp1 dp2 holds 54k tokens a rank, the requests ask at most 24k; tp1 dp4 350k), the
    # launch settings (benchmarks/serving_campaign.py _vllm), and the balancing alone: vLLM 0.12 sends a
    # request to the DP rank of least 4 x waiting + running in the coordinator's counts, refreshed at
    # most every 100 ms (vllm/v1/engine/core_client.py DPLBAsyncMPClient.get_core_engine_for_request,
    # coordinator.py; the generator starts Dynamo's frontend without the KV router that picks a DP rank,
    # aiconfigurator run.sh.j2: --router-mode kv only with a prefix), so stale counts can load one rank
    # more, but a request waits only at a per-rank cap, and neither --max-num-seqs 1024 nor the
    # generator's 512 or the concurrency as its batch size is reached by the requests a rank holds.
    # SGLang: --mem-fraction-static of total memory for weights + KV pool (about
    # 0.85-0.88 on 80-141 GB GPUs, python/sglang/srt/server_args.py); chunked
    # prefill 8192 tokens on >= 80 GB GPUs (same file). Versions 0.5.1 and 0.5.6
    # are fitted apart (0.5.1 on the H100 rows, 0.5.6 on the H200 rows).
    # SGLang 0.5.6.post2's scheduler is prefill-first as 0.5.1's (scheduler.py get_next_batch_to_run),
    # policy prefill_first. The measured rows were launched with --enable-mixed-chunk (the campaign's
    # generator, benchmarks/serving_campaign.py _sglang): every prefill step then also runs the running
    # decodes (Framework.mixed_chunk, cost/serve_sim.py), nothing holds a wave together, and the loop
    # runs as decode-first did. That replaces the decode-first policy earlier read off these rows (the
    # same 36.6 / 12.4% on the 69 scored H200 rows, to the row). Without mixed chunks, prefill-first:
    # TTFT 149% (137% refitted): 195-211% on the 45 Llama rows (the first tokens of a wave of 20-512
    # prompts), 26-36% on the 24 Qwen3-235B rows; the Llama TPOT says the same (8000/100 c20 tp1: 33.9
    # ms measured, 38.9 simulated with mixed chunks, 26.1 without, where the wave's prompts all run
    # before its decodes). An SGLang launched at its defaults (no --enable-mixed-chunk) is priced
    # prefill-first, as the 0.5.1 rows measure it. SGLang's admission by KV room (admission reserve_ratio) does not
    # break waves here: the wave's prompts plus outputs need 1-96% of the KV pool on every scored row.
    # The campaign's --max-prefill-tokens (ISL + 1500) is not applied: five Llama rows admitted more
    # prompts per step than it allows (serving_campaign.py _sglang; applied, TTFT 39.7%, TPOT 11.0%).
    # SGLang runs the overlap scheduler by default (scheduler.py: enable_overlap = not
    # --disable-overlap-schedule, off by default; event_loop_overlap processes step n's results, the
    # finished requests among them, after step n + 1 is launched), so a new request joins a step later
    # (overlap, cost/serve_sim.py): 0.5.6 TTFT 37.5 -> 36.6%, TPOT 12.5 -> 12.4% (0.5.1 unchanged, 9.4 /
    # 6.5%: an idle engine takes a returning wave at once); refitting 0.5.6 with it keeps its constants.
    # What the 0.5.6 rows leave unexplained (benchmarks/serving_accuracy.py --strata):
    # - Qwen3-235B c2-c9: alone at tp2 (c2, nothing to queue behind, a cold file) a 4000-token prompt
    #   takes 639-647 ms against 143 ms of the profile's prefill: 3.4-3.5x after the 0.15 s overhead,
    #   so neither the warm/cold test nor ttft_overhead_s; prefill_slowdown 3.0 is that prompt's own
    #   rate (the MoE prefill: 128 experts, top-8, ~250 rows per expert GEMM at 4000 tokens; priced per
    #   expert at the profile's small-GEMM efficiency it overshoots, Qwen TTFT 105%). At tp4 c6-c9 the
    #   4000-token rows take 1.4-2.1 s, 2.2-3.2x tp2 at c2 on twice the GPUs: a wave, which prefill-first
    #   with the loop's prompts at 4x fits (within 10%) but then overshoots tp2's 4000-token rows by 90%
    #   and the 1000-token rows by 160-225%.
    # - Llama-3.1-8B c128-c512: at c512 the output rate stops at 15-19.6k tokens/s on tp4 and tp8 alike
    #   and TTFT is 8-17% of a request's latency (TPOT 23-30 ms measured, 13-19 simulated before
    #   host_request_s, 20-27 with it): the step time is the host's walk over ~450 running requests
    #   (module docstring), but by Little's law 26-76 of the 512 requests are outside the running batch
    #   (C x TTFT / latency) for 1.4-8.0 s, on tp8 as on tp2, their whole requests needing 41-83% (tp2)
    #   to 10-20% (tp8) of the KV pool: neither the KV admission, max_running_requests (the campaign's
    #   is the concurrency) nor the prefill budget holds them (a step admits ~7 prompts of 1000 tokens,
    #   0.2-0.9 a step are needed).
    #   Not identified; a tokens/s ceiling on the simulated loop gives 34% at best (25k).
    ("sglang", "0.5.6"): Framework(name="sglang", version="0.5.6", label="SGLang 0.5.6", memory_fraction=0.85, memory_rule="total",
                        chunk_tokens=8192, graph_reserve_bytes=1.0 * GIB, step_overhead_s=0.003, ttft_overhead_s=0.15,
                        prefill_slowdown=3.0, policy="prefill_first", admission="reserve_ratio", retract_steps=20,
                        overlap=True, host_request_s=5e-5),
    # SGLang 0.5.1 (the H100 Qwen3-32B rows, sglang.bench_serving at fixed lengths): TTFT is the prefill
    # of a wave (policy prefill_first, cost/serve_sim.py): all requests of the concurrency arrive together
    # and are prefilled back to back in 8192-token steps at the profile's own GEMM and attention rates.
    # Why the wave re-forms every cycle: SGLang's scheduler runs a waiting prefill batch before any
    # decode step ("Run prefill first if possible", python/sglang/srt/managers/scheduler.py
    # get_next_batch_to_run) and does not put decode tokens into it (server_args.py
    # enable_mixed_chunk False), so the wave's requests start decoding in the same step and, with
    # equal output lengths, end and return together. vLLM V1 schedules the running decodes first and
    # fills the rest of the token budget with prefill (vllm/v1/core/sched/scheduler.py), so first
    # tokens, ends and returns are staggered and no wave holds (60 of its 89 H100 rows are below the
    # one-wave bound).
    # No row is below the one-wave bound (benchmarks/serving_accuracy.py --waves) and the wave alone,
    # with no fitted slowdown, predicts the 75 scored rows' TTFT to 9.4% (the simulated loop; 8.7% with
    # the earlier wave formula, 11.0% with a fitted prefill_slowdown 2.5 and queue_share 0.4).
    ("sglang", "0.5.1"): Framework(name="sglang", version="0.5.1", label="SGLang 0.5.1", memory_fraction=0.85, memory_rule="total",
                        chunk_tokens=8192, graph_reserve_bytes=1.0 * GIB, step_overhead_s=0.001, ttft_overhead_s=0.08,
                        prefill_slowdown=1.0,
                        policy="prefill_first", admission="reserve_ratio", retract_steps=20, overlap=True),
    # TensorRT-LLM: KvCacheConfig.free_gpu_memory_fraction 0.9 of the memory left
    # after weights and activations (tensorrt_llm/commands/serve.py
    # --kv_cache_free_gpu_memory_fraction default 0.9); --max_num_tokens 8192,
    # --max_batch_size 2048 (same file); chunked context off unless
    # enable_chunked_prefill (llmapi/llm_args.py): whole prompts only (cost/serve_sim.py).
    # CUDA graphs for decode-only batches of TRTLLM_GRAPH_SIZES; other steps launch eagerly
    # (eager_layer_s, see the module docstring). The serving process sends at most 1 / host_token_s
    # = 9.35k tokens/s per engine (the most any 1.0.0rc3 row measures, see the module docstring).
    # What the 1.0.0rc3 rows leave unexplained:
    # - Llama-3.1-8B c8-c32 (all TP): TTFT grows with the output length at a fixed input length, as
    #   if one request of the C always waited for a running one to end: TTFT ~ latency / C + a prompt's
    #   prefill (latency = TTFT + (osl - 1) TPOT, measured; tp1 c8 1024/128, /256, /512: 191, 318, 550
    #   ms against latency / C 150, 280, 542; the model gives 174 for all three). Across osl within a
    #   (tp, c, isl) group dTTFT / d(latency / C) is 0.91 (median of 36 groups; 0.84-0.96), against
    #   -0.03 for Qwen3-32B (35 groups) and 0.00 for Qwen3-235B (22): their TTFT does not move with osl.
    #   Run as an engine holding C - 1 requests (max_batch_size C - 1), with prefill_slowdown 1 and no
    #   ttft_overhead_s, the 108 Llama c8-c32 rows score TTFT 13.7% (bias -7.6%) against 25.5% today, but
    #   no source gives that cap, and on the Qwen rows it overshoots (c8-c32 +90% and +133%). Ruled out:
    #   the KV pool (c32 4096/512 needs 147k of the 458k tokens the model gives tp1; tp8, 10x it, alike),
    #   host_token_s (c8 1024/512 streams 0.9k of 9.35k tokens/s), max_num_tokens 8192 / max_batch_size
    #   2048 (hold a 4096 prompt and 31 decodes), CUDA graphs (8, 16 and 32 are captured), the overlap
    #   scheduler (one 5-10 ms step, not 150-720 ms; off, these rows 25.5 -> 24.7%), the executor's
    #   admission (PyExecutor takes up to model_engine.get_max_num_sequences() = pp x max_batch_size
    #   less the active requests each iteration, 1.0-era pyexecutor/py_executor.py, model_engine.py) and
    #   a client queue (TensorRT-LLM's serve/scripts/benchmark_serving.py, vLLM's, @0228a71, starts the
    #   TTFT clock inside its --max-concurrency semaphore; vllm-project/vllm#54101). The rows record no
    #   launch settings or client, so a cap or client of the Llama campaign alone cannot be ruled out.
    ("trtllm", "1.0"): Framework(name="trtllm", version="1.0", label="TensorRT-LLM 1.0", memory_fraction=0.9, memory_rule="free",
                        chunk_tokens=8192, graph_reserve_bytes=1.5 * GIB, step_overhead_s=0.001, ttft_overhead_s=0.08,
                        prefill_slowdown=2.5,
                        chunked=False, max_seqs=2048, graph_sizes=TRTLLM_GRAPH_SIZES, eager_layer_s=0.0002,
                        overlap=True, host_token_s=1.07e-4),
}
# vLLM 0.15: 0.12's constants, with a decode step reading the experts its tokens touch at the profile's
# memory rate (moe_decode_reads "touched", no slowdown), as vLLM's fused-MoE kernels do (they only visit
# the experts that tokens are routed to: fused_moe_kernel returns for a block past num_tokens_post_padded,
# and moe_align_block_size makes blocks only for the experts holding tokens). Nothing
# is fitted; set by the held-out Kimi-K2.5 rows of vLLM 0.15.1-0.17.0 (docs/calibration.md "Engine
# admission and expert reads"): TPOT median 107 -> 20%, where 0.12's local read at 1.5x prices a c4
# decode step at 26-42 ms against 7-9 ms measured. 0.12 keeps its local read (its H200 Qwen3-235B rows).
FITTED["vllm", "0.15"] = replace(FITTED["vllm", "0.12"], version="0.15", label="vLLM 0.15", moe_decode_reads="touched",
                                 moe_decode_slowdown=1.0)
DEFAULT_VERSION = {"vllm": "0.12", "sglang": "0.5.6", "trtllm": "1.0"}  # what --framework NAME uses


def constants(name: str, version: str = "") -> Framework:
    """The constants of `name` at `version` (a fitted version, or a longer one it prefixes: 0.5.1.post1 -> 0.5.1)."""
    if name not in DEFAULT_VERSION:
        raise SpecError(f"--framework must be one of {', '.join(DEFAULT_VERSION)}, got {name!r}")
    if not version:
        return FITTED[name, DEFAULT_VERSION[name]]
    for (fw, fitted), value in FITTED.items():
        if fw == name and (version == fitted or version.startswith(fitted + ".")):
            return value
    known = ", ".join(v for fw, v in FITTED if fw == name)
    raise SpecError(f"--framework-version {version!r}: {name} has constants for {known}")


def for_deployment(dep: Deployment, role: str | None = None) -> Framework:
    """The framework as `dep` launches it: its fitted constants with the deployment's launch settings
    (Deployment.args; role "prefill": a disaggregated deployment's prefill engines, prefill_args)."""
    fw = constants(dep.framework, dep.framework_version)
    args = dep.args_for(role)
    if args.max_num_tokens is not None:
        fw = replace(fw, chunk_tokens=args.max_num_tokens)
    if args.max_batch_size is not None:
        fw = replace(fw, max_seqs=args.max_batch_size)
    if args.memory_fraction is not None:
        fw = replace(fw, memory_fraction=args.memory_fraction)
    if args.mixed_chunk is not None:
        fw = replace(fw, mixed_chunk=args.mixed_chunk)
    if args.max_prefill_tokens is not None:
        fw = replace(fw, max_prefill_tokens=args.max_prefill_tokens)
    return fw
