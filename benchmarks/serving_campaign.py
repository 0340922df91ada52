"""The launch settings each measured serving row ran with, where they differ from the framework's defaults.

The rows of benchmarks/data/serving_runs.csv were measured by a campaign that launched every
engine with its own settings (serving_runs.SOURCE.md). autopar prices a deployment as it is
launched (spec/serve.py EngineArgs, spec/serve.py Deployment.framework_for), so the benchmark
gives each row the settings its engines ran with, as the `serve estimate` flags a user would type
(launch_argv), read by the command's own parser (autopar/cli/serve.py parse_launch). Every value
here names the file and commit it is read from; a backend without a sourced setting runs at its
framework's defaults.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from autopar.cli.serve import parse_launch
from autopar.spec.serve import EngineArgs


def launch_args(row: dict[str, str], role: str | None = None) -> EngineArgs:
    """The settings the row's engines ran with (role "prefill": a disaggregated row's prefill engines, else
    its decode engines): launch_argv read by `serve estimate`'s parser, each pool's own flags over the shared."""
    shared, prefill, decode = parse_launch(launch_argv(row))
    if row.get("mode") != "disagg":
        return shared
    return (prefill if role == "prefill" else decode).over(shared)


def launch_argv(row: dict[str, str]) -> list[str]:
    """The `serve estimate` launch flags of the row's engines, as a user types them."""
    if row.get("mode") == "disagg":
        return _disagg(row)
    backend = row["backend"]
    if backend == "sglang":
        return _sglang(row)
    if backend == "vllm":
        return _vllm(row)
    return _trtllm(row)


def _flags(pool: str = "", **values: object) -> list[str]:
    """CLI words of launch settings: --[pool-]name value, a True switch alone, None and False left out."""
    words: list[str] = []
    for name, value in values.items():
        flag = "--" + (f"{pool}-" if pool else "") + name.replace("_", "-")
        if value is True:
            words.append(flag)
        elif value is not None and value is not False:
            words += [flag, str(value)]
    return words


def _trtllm(row: dict[str, str]) -> list[str]:
    """TensorRT-LLM's aggregated rows keep TensorRT-LLM's own defaults (max_batch_size 2048,
    max_num_tokens 8192, free_gpu_memory_fraction 0.9, CUDA graphs for 1-32, 64, 128, no padding).

    Nothing names how the 1.0.0rc3 files were launched. aiconfigurator's generator, at the commit
    nearest the campaign's upload (cb4d907, the day before silicon_sample.csv was added at 75f90ac7a),
    writes for trtllm (rule_plugin/benchmark/trtllm.rule; extra_engine_args.1.0.0rc3.yaml.j2):
    max_batch_size 128 when unset, max_num_tokens = max_batch_size + isl + 1500 rounded up to 32,
    cuda_graph_batch_sizes 1..max_batch_size (enable_padding false), free_gpu_memory_fraction 0.80,
    overlap scheduler on; its bench_run.sh.j2 runs aiperf at concurrencies 1, 2, 8, 16, 32, 64, 128
    and 0.95 / 1 / 1.05 x the estimated one (121, 128, 134). The 1.0.0rc3 files hold 8-128 (and 4 for
    Qwen3-235B), none of 1, 2, 121, 134, so they are not that script's output as written. The
    August 2025 generator (961028348, cli/backends/trtllm.py; templates/trtllm/dynamo) writes the same
    max_num_tokens and graph list (padding on) for the one configuration aiconfigurator picks, run by
    genai-perf at 10 x C requests. Given those settings (max_batch_size 128, max_num_tokens as above,
    graphs 1-128, memory fraction 0.8) and refitted, TensorRT-LLM scores 19.1 / 10.7% (TTFT / TPOT)
    against 20.9 / 9.6% at the defaults: Qwen3-235B TPOT 11.3 -> 15.3%, eager_layer_s 0.0002 -> 0.0006
    (a decode step of 33-63 or 65-127 requests then replays a graph, and what its eager launch
    explained moves to the steps holding prompts). The TPOT rows favour TensorRT-LLM's own graph
    list, and the TTFT they buy is not sourced to these files: the defaults are kept."""
    return []


# SGLang versions whose aiconfigurator generator template came after its rule gained
# --enable-mixed-chunk (below): ai-dynamo/aiconfigurator src/aiconfigurator/generator/config/
# backend_templates/sglang/cli_args.0.5.6.post2.j2 and cli_args.0.5.8.j2, both first written in
# c46a56b02 (2026-01-23, "add dynamo 0.8.0 backend template"); each prints --enable-mixed-chunk
# when the rule sets it.
MIXED_CHUNK_VERSIONS = ("0.5.6.post2", "0.5.8.post1")


def _sglang(row: dict[str, str]) -> list[str]:
    """SGLang aggregated engines of 0.5.6.post2 and later: --enable-mixed-chunk.

    ai-dynamo/aiconfigurator src/aiconfigurator/generator/rule_plugin/sglang.rule sets
    `agg enable_mixed_chunk = true` from 07a377923 (2026-01-19, "fix sglang enable mixed chunk";
    also benchmark/sglang.rule from 71bb3d00e, 2026-01-30; unchanged at 692e2606d, 2026-04-28,
    the last generator revision before the rows entered silicon_sample.csv on 2026-05-01), and the
    run script starts the workers with it (backend_templates/sglang/run.sh.j2, `python3 -m
    dynamo.sglang ... {{ agg_cli_args }}`). The aggregated rows carry no launch record
    (silicon_data_source names their file and concurrency only); the same campaign's disaggregated
    rows ran Dynamo 0.8.0 on 2026-01-23..25, from the generator at c46a56b02/5e0243eb1 (_disagg
    below), which has the rule. The rows agree: simulated without mixed chunks (SGLang's own
    prefill-first scheduler, waves) the 69 scored H200 rows' TTFT is off by 149%, with them 36.6%.

    Left at SGLang's defaults, with the reason:
    - the SGLang 0.5.1.post1 rows (H100 Qwen3-32B, ISL 1024/2048/4096): no row's TTFT is below the
      one-wave bound (serving_accuracy.py --waves), which mixed chunks would break (the wave's
      decodes would run in its prefill steps); they fit SGLang's default prefill-first waves (TTFT
      9.4%, TPOT 6.5%; given mixed chunks 76.6 / 26.0%, with ISL + 1500 as well 76.7 / 26.2%).
    - --max-prefill-tokens, which the same rule sets to ISL + 1500 from 95ddf241a (2025-12-04):
      SGLang 0.5.6.post2's PrefillAdder (schedule_policy.py add_one_req; cost/serve_sim.py) then
      admits at most 2 prompts of 1000 tokens and 1 of 2000 a step, and every step gives each running
      request one token, so a run admits at most 2 (1) prompts per TPOT. Five Llama-3.1-8B rows
      admitted more: C / (osl - 1 + TTFT / TPOT) = 3.56 (tp8 1000/100 c448), 2.85 (tp4 1000/100
      c352), 1.78, 1.52, 1.12 (tp8, tp4, tp2 2000/100 at c240, c176, c128). Applied anyway, the 69
      rows' TTFT goes 36.7 -> 39.7%, TPOT 9.4 -> 11.0% (36.6 -> 40.3%, 12.4 -> 13.6% before
      host_request_s; refitting kept the constants).
    - --max-running-requests and --cuda-graph-bs 1..max_batch_size (benchmark/sglang.rule): the
      rows' concurrency is at most the max batch, which the closed loop never exceeds, and SGLang's
      decode batches are not priced by captured size (Framework.graph_sizes empty).

    The InferenceX rows of serving_runs_newer.csv: the flags of their launch script (INFERENCEX_SGLANG)."""
    launch = inferencex_launch(row)
    if launch is not None:
        return _inferencex_args(row, launch)
    if row["mode"] != "agg" or row["backend_version"] not in MIXED_CHUNK_VERSIONS:
        return []
    return _flags(mixed_chunk=True)


def _vllm(row: dict[str, str]) -> list[str]:
    """vLLM 0.12's aggregated rows: vLLM's defaults (the disaggregated rows: _disagg).

    No aggregated vLLM row has a sourced launch: the H200 files (Qwen_Qwen3-235B-A22B-FP8.csv,
    nvidia_Llama-3.1-8B-Instruct-FP8.csv) and the H100 Qwen_Qwen3-32B.csv name no run, image or
    Dynamo version, and the Dynamo 0.8.0 rows' batch_size (H100 qwen3_32b.csv) is the benchmark's
    concurrency over all the deployment's workers, which the file does not count, not one worker's
    max_batch_size. Were the H200 rows the generator's launches (the SGLang H200 rows' mixed chunk,
    _sglang, suggests so), their date decides: its default rule (src/aiconfigurator/generator/
    rule_plugin/vllm.rule from 71bb3d00e, 2026-01-30, to 75f90ac7a, 2026-05-06, the commit that
    added the measured rows) sets agg max_batch_size 512 below 512 (--max-num-seqs) and max_num_tokens
    = max_batch_size + isl + 1500, which backend_templates/vllm/cli_args.0.12.0.j2 prints as
    --max-num-batched-tokens only from 2063ee024 (2026-02-11; vLLM's 8192 before); its benchmark
    rule (rule_plugin/benchmark/vllm.rule, f90534bc2 to 75f90ac7a) keeps the batch size:
    --max-num-seqs the batch size, --max-num-batched-tokens batch size + isl + 1500, --max-model-len
    isl + osl + 1500, --cudagraph-capture-sizes 1..batch size. Neither prints
    --gpu-memory-utilization (0.9). With 512 + isl + 1500, or with the concurrency as the batch
    size, H200 TTFT would be 16.0 or 15.9% instead of 15.9% (TPOT 6.3% all three): every prompt still fits
    one step (the budget exceeds isl by 1500 and more), so only the clients' first wave is cut into
    more steps (benchmark rule: tp4 1000/1000 c48 180 -> 196 ms, measured 176). None of these settings explains what the
    attention-DP rows leave (TTFT growing with the output length at a fixed input length;
    docs/calibration.md, vLLM 0.12): the KV pool holds every request in flight (tp1 dp2: 54k tokens a
    rank, at most 24k asked), and --max-num-seqs at the concurrency is above the requests a rank
    holds. Nor the Llama-3.1-8B-FP8 rows set apart as not reached (measured TPOT 7.5-23.8 ms, 0.9-1.9x
    the bare decode step, while the prompts at the stated concurrency need 1.10-2.21x the measured
    latency; benchmarks/serving_accuracy.py gpu_time_needed_s): a smaller --max-num-batched-tokens
    only spreads the same prompts over more steps, and a --max-num-seqs below the concurrency would
    queue requests before their first token, where the rows measure 72-463 ms TTFT.

    The InferenceX rows of serving_runs_newer.csv: the flags of their launch script (inferencex_launch)."""
    launch = inferencex_launch(row)
    return [] if launch is None else _inferencex_args(row, launch)


def _inferencex_args(row: dict[str, str], launch: Launch) -> list[str]:
    """The serve flags of an InferenceX script's flags (Launch) for one row."""
    # --max-num-seqs / --max-running-requests $CONC: the client's concurrency, batch_size x attention-DP
    # ranks (serving_rows.agg_concurrency)
    conc = _count(row["batch_size"]) * _count(row["attention_dp_size"])
    seqs = conc if launch.max_seqs == "conc" else launch.max_seqs
    assert seqs is None or isinstance(seqs, int)
    recv = launch.recv_interval_c16 if launch.recv_interval_c16 is not None and conc >= 16 else launch.recv_interval
    return _flags(
        memory_fraction=launch.memory_fraction,
        max_num_tokens=2 * int(row["isl"]) if launch.budget_2x_isl else launch.chunk,
        max_batch_size=seqs,
        max_prefill_tokens=launch.max_prefill_tokens,
        disable_prefix_cache=launch.no_prefix_cache,
        ssm_state_dtype=launch.ssm_state_dtype,
        scheduler_recv_interval=recv,
    )


# --- Disaggregated rows (prefill and decode pools) -------------------------------------------------
# The disaggregated rows name the Dynamo campaign in silicon_data_source (dynamo_version=0.8.0,
# image nvcr.io/nvidia/ai-dynamo/<backend>-runtime:0.8.0, measured 2026-01-23 and -25). Their
# engines were launched from ai-dynamo/aiconfigurator's generator as it stood then: commit
# 5e0243eb10dd894be5cba2ff7aa42f99e9a309b2 (2026-01-24, "align generator run script with dynamo
# 0.8.0"; the rule files below are the same at c46a56b02630723413d7ab4ad747b5ea0968d3a5 of
# 2026-01-23, which added the 0.8.0 templates). Its rules (src/aiconfigurator/generator/rule_plugin/
# {vllm,sglang,trtllm}.rule), for the columns of a disaggregated row:
# - prefill engines: `prefill max_batch_size = (max_batch_size if max_batch_size else 1)` with the
#   row's prefill_batch_size (1 in every row), launched as vLLM --max-num-seqs (cli_args.0.12.0.j2,
#   per data-parallel rank), SGLang --max-running-requests (cli_args.0.5.6.post2.j2), TensorRT-LLM
#   max_batch_size; `prefill max_num_tokens = isl + 1500` reaches TensorRT-LLM's max_num_tokens
#   only: backend_config_mapping.yaml maps max_num_tokens to vLLM --max-num-batched-tokens, which
#   cli_args.0.12.0.j2 does not print, and to nothing for SGLang. SGLang's
#   `agg_prefill_decode max_prefill_tokens = SlaConfig.isl + 1500` gives both of its pools
#   --max-prefill-tokens isl + 1500 (the prefill batch's token budget, not --chunked-prefill-size;
#   `agg enable_mixed_chunk` is for aggregated engines only).
# - decode engines: `decode max_batch_size = max_batch_size` with the row's decode_batch_size
#   (module_bridge.py _build_worker_params: "max_batch_size": the result's (d)bs), the requests one
#   attention rank runs; TensorRT-LLM's `decode max_num_tokens = max_batch_size` (one token each).
# - KV cache dtype: fp8 (kv_dtype below; the campaign's aggregated rows too).
# No rule sets the memory fraction for vLLM or SGLang (their defaults), nor turns prefix caching
# off (`disable_prefix_cache = false` only when ModelConfig.prefix > 0; vLLM 0.12 and SGLang cache
# prefixes by default).
CAMPAIGN = "dynamo_version=0.8.0"


def _disagg(row: dict[str, str]) -> list[str]:
    trt = inferencex_trtllm_recipe(row)
    if trt is not None:
        return [
            *_flags("prefill", max_batch_size=trt.prefill_batch, max_num_tokens=trt.prefill_tokens, memory_fraction=trt.prefill_fraction),
            *_flags("decode", max_batch_size=trt.decode_batch, max_num_tokens=trt.decode_batch, memory_fraction=trt.decode_fraction),
        ]
    recipe = inferencex_recipe(row)
    if recipe is not None:
        return [
            *_flags(memory_fraction=0.9),
            *_flags("prefill", max_batch_size=recipe.prefill_seqs, max_num_tokens=recipe.prefill_tokens),
            *_flags("decode", max_batch_size=recipe.decode_seqs, max_num_tokens=recipe.decode_tokens),
        ]
    budget = int(row["isl"]) + 1500
    backend = row["backend"]
    decode = _count(row["decode_batch_size"])
    return [
        *_flags(max_prefill_tokens=budget if backend == "sglang" else None),
        *_flags("prefill", max_batch_size=_count(row["prefill_batch_size"]), max_num_tokens=budget if backend == "trtllm" else None),
        *_flags("decode", max_batch_size=decode, max_num_tokens=decode if backend == "trtllm" else None),
    ]


# --- InferenceX rows (serving_runs_newer.csv, vLLM) ------------------------------------------------
# The vLLM rows of serving_runs_newer.csv are SemiAnalysisAI/InferenceX runs: the same models, GPUs,
# images (silicon_data_source names vllm/vllm-openai:TAG), layouts and concurrency sweeps as its
# .github/configs/nvidia-master.yaml entries minimaxm2.5-{fp8,fp4}-{b200,b300,h100,h200}-vllm and
# kimik2.5-{int4,fp4}-{b200,b300,h200}-vllm, and its client (benchmarks/benchmark_lib.sh
# run_benchmark_serving: random prompts, --num-prompts 10 x CONC, --max-concurrency CONC). Each
# entry launched the engine from benchmarks/single_node/<model>_<precision>_<gpu>.sh; the image tag
# dates the script revision (the commit that set the tag changed its flags with it), and where a
# script changed under one tag the row's `measured` date decides. What those scripts pass that
# EngineArgs and the KV dtype carry, per (model, precision, system, image tag):
@dataclass(frozen=True, slots=True)
class Launch:
    """A script's flags: vLLM --gpu-memory-utilization (SGLang --mem-fraction-static), --kv-cache-dtype fp8
    (SGLang fp8_e4m3), vLLM --max-num-batched-tokens 2 x ISL, --max-num-seqs (SGLang --max-running-requests;
    an int, or "conc": the row's concurrency); SGLang only: --chunked-prefill-size (chunk),
    --max-prefill-tokens, speculative decoding (mtp: EAGLE over the model's MTP layer, which autopar does not
    price), --disable-radix-cache (no_prefix_cache), --mamba-ssm-dtype bfloat16 (ssm_state_dtype "bf16");
    --scheduler-recv-interval (recv_interval; recv_interval_c16 at CONC >= 16);
    `since`: the first measured date the flags hold for (ISO, "" always)."""

    memory_fraction: float
    kv_fp8: bool = False
    budget_2x_isl: bool = False
    max_seqs: int | str | None = None
    since: str = ""
    chunk: int | None = None
    max_prefill_tokens: int | None = None
    mtp: bool = False
    no_prefix_cache: bool = False
    ssm_state_dtype: str | None = None
    recv_interval: int | None = None  # SGLang --scheduler-recv-interval below 16 clients
    recv_interval_c16: int | None = None  # ... at 16 clients and more (the scripts' `CONC -ge 16`)


_MINIMAX, _KIMI = "MiniMaxAI/MiniMax-M2.5", "moonshotai/Kimi-K2.5"
# minimaxm2.5_fp8_b200.sh, then fp4/b300: from bddbf4031 (2026-04-03, #947, "upgrade to vllm 0.19",
# the tag to v0.19.0-cu130) --gpu-memory-utilization 0.90 --kv-cache-dtype fp8 --max-num-batched-tokens
# $((ISL * 2)), as minimaxm2.5_fp4_b200.sh (79bd988e9, 2026-04-08), _fp8_b300.sh and _fp4_b300.sh
# (340d7854c, 22d0f12f7, 2026-04-17), unchanged to 2026-04-27 (41ed82dc1 changed an env var only).
_BLACKWELL_019 = Launch(0.90, kv_fp8=True, budget_2x_isl=True)
INFERENCEX_VLLM: dict[tuple[str, str, str, str], tuple[Launch, ...]] = {
    # minimaxm2.5_fp8_b200.sh before bddbf4031 (64c20b6b5 2026-03-11 .. 626932a11 2026-03-27):
    # --gpu-memory-utilization 0.95 --block-size=32, no KV dtype (auto: bf16), vLLM's step budget.
    (_MINIMAX, "fp8", "b200_sxm", "v0.17.0-cu130"): (Launch(0.95),),
    (_MINIMAX, "fp8", "b200_sxm", "v0.19.0-cu130"): (_BLACKWELL_019,),
    (_MINIMAX, "fp8", "b300_sxm", "v0.19.0-cu130"): (_BLACKWELL_019,),
    (_MINIMAX, "fp4", "b200_sxm", "v0.19.0-cu130"): (_BLACKWELL_019,),
    (_MINIMAX, "fp4", "b300_sxm", "v0.19.0-cu130"): (_BLACKWELL_019,),
    # minimaxm2.5_fp8_h100.sh (ac0d2a853 2026-03-02 .. 626932a11; v0.18.0 from 1d5cae141, 2026-03-27):
    # --gpu-memory-utilization 0.90 --max-num-seqs 256.
    (_MINIMAX, "fp8", "h100_sxm", "v0.18.0"): (Launch(0.90, max_seqs=256),),
    # minimaxm2.5_fp8_h200.sh (a36346339 2026-03-01 .. 626932a11): --gpu-memory-utilization 0.95.
    (_MINIMAX, "fp8", "h200_sxm", "v0.16.0"): (Launch(0.95),),
    (_MINIMAX, "fp8", "h200_sxm", "v0.18.0"): (Launch(0.95),),
    # kimik2.5_int4_b200.sh (eb02101ef 2026-02-23 .. 626932a11), kimik2.5_int4_h200.sh (749096c4c
    # 2026-03-02 ..): --gpu-memory-utilization 0.95 --max-num-seqs $CONC.
    (_KIMI, "int4", "b200_sxm", "v0.15.1"): (Launch(0.95, max_seqs="conc"),),
    (_KIMI, "int4", "h200_sxm", "v0.16.0"): (Launch(0.95, max_seqs="conc"),),
    # kimik2.5_fp4_b200.sh: --gpu-memory-utilization 0.90 --max-num-seqs $CONC (a58dedd5a 2026-03-11);
    # 6c3acebfa (2026-04-20, #1047, the tag kept) adds --kv-cache-dtype fp8 (the NVFP4 checkpoint's
    # auto already) and --max-num-batched-tokens $((ISL * 2)).
    (_KIMI, "fp4", "b200_sxm", "v0.17.0"): (
        Launch(0.90, kv_fp8=True, budget_2x_isl=True, max_seqs="conc", since="2026-04-20"),
        Launch(0.90, max_seqs="conc"),
    ),
    # kimik2.5_fp4_b300.sh (a35e53694 2026-04-17, f34a83b25 2026-04-20): as the B200 script before #1047.
    (_KIMI, "fp4", "b300_sxm", "v0.19.0-cu130"): (Launch(0.90, max_seqs="conc"),),
}
_MEASURED = re.compile(r"measured=(\d{4}-\d{2}-\d{2})")

# The SGLang rows of serving_runs_newer.csv (Qwen3.5-397B-A17B) are InferenceX runs too: the entries
# qwen3.5-{fp8,fp4,bf16}-{b200,b300,h200}-sglang[-mtp] of nvidia-master.yaml (images, layouts, c4-c256 sweeps),
# launched from benchmarks/single_node/qwen3.5_<precision>_<gpu>[_mtp].sh. Every script passes
# --disable-radix-cache (--disable-prefix-cache: a hybrid keeps SGLang's overlap scheduler) and
# --cuda-graph-max-bs $CONC (not carried: SGLang's decode batches are not priced by captured size); the H200 fp8,
# B300 fp8 and B300 fp4 scripts --mamba-ssm-dtype bfloat16 (--ssm-state-dtype bf16; read at 2116fc435 for H200
# and 563248391 for B300, later than the rows' revisions below, which were not re-read for it; the B200 fp8
# script at 01fa35cfe and the B300 bf16 one pass none: the config's float32).
_QWEN35 = "Qwen/Qwen3.5-397B-A17B"  # the file's model_path for every precision (-FP8, nvidia/...-NVFP4 ran)
# qwen3.5_fp8_b200.sh, efd49e50b (2026-03-03, image v0.5.9-cu129-amd64) to 626932a11 (2026-03-27; 6a5dad463,
# 2026-03-23, set v0.5.9-cu130-amd64 and kept the flags): --mem-fraction-static 0.82 --kv-cache-dtype fp8_e4m3
# --chunked-prefill-size 32768 --max-prefill-tokens 32768 --max-running-requests 128.
# --scheduler-recv-interval 10, 30 at CONC >= 16 (read at efd49e50b and 626932a11).
_B200_FP8 = Launch(
    0.82, kv_fp8=True, max_seqs=128, chunk=32768, max_prefill_tokens=32768, no_prefix_cache=True, recv_interval=10, recv_interval_c16=30
)
# qwen3.5_fp8_b200_mtp.sh (35d4bb367, 2026-03-20; the entry qwen3.5-fp8-b200-sglang-mtp, tp4 ep1 c4-256):
# --speculative-algorithm EAGLE, 3 steps, 4 draft tokens; 0.8, fp8_e4m3, 32768 / 32768, --max-running-requests
# $CONC. lmsysorg/sglang:v0.5.9-cu130 (no -amd64) is the image of that entry alone in nvidia-master.yaml
# from 2026-02-15 to 2026-04-28 (every qwen3.5 SGLang entry's image at every revision).
_B200_MTP = Launch(0.8, kv_fp8=True, max_seqs="conc", chunk=32768, max_prefill_tokens=32768, mtp=True, no_prefix_cache=True)
INFERENCEX_SGLANG: dict[tuple[str, str, str, str], tuple[Launch, ...]] = {
    (_QWEN35, "fp8", "b200_sxm", "v0.5.9-cu129-amd64"): (_B200_FP8,),
    (_QWEN35, "fp8", "b200_sxm", "v0.5.9-cu130-amd64"): (_B200_FP8,),
    (_QWEN35, "fp8", "b200_sxm", "v0.5.9-cu130"): (_B200_MTP,),
    # The B300 rows of 2026-04-03 on that image (tp4 ep1 c4-256, as the B200 MTP entry): no B300 script of
    # Qwen3.5 existed yet (qwen3.5_fp8_b300_mtp.sh came with 28752f613, 2026-04-16, on v0.5.10.post1), and
    # their TPOT is an MTP run's: 5.3 ms at 1024/1024 c4 against 8.6 for the non-MTP v0.5.10.post1 run of
    # the same layout (config 716). The B300 v0.5.9-cu130-amd64 rows of that day have no script: defaults.
    (_QWEN35, "fp8", "b300_sxm", "v0.5.9-cu130"): (_B200_MTP,),
    # qwen3.5_fp8_b300.sh (c0f62a2ef, 2026-04-17, the non-MTP entry beside 28752f613's MTP one; config 716):
    # --mem-fraction-static 0.8 --kv-cache-dtype fp8_e4m3 --max-running-requests $CONC
    # --chunked-prefill-size 16384 --max-prefill-tokens 16384; --scheduler-recv-interval 10 (read at c0f62a2ef).
    (_QWEN35, "fp8", "b300_sxm", "v0.5.10.post1-cu130"): (
        Launch(
            0.8,
            kv_fp8=True,
            max_seqs="conc",
            chunk=16384,
            max_prefill_tokens=16384,
            no_prefix_cache=True,
            ssm_state_dtype="bf16",
            recv_interval=10,
        ),
    ),
    # qwen3.5_fp4_b300.sh (8acbd08b7, 2026-04-17; configs 736, 737): 0.8, fp8_e4m3, 32768 / 32768,
    # --max-running-requests 128, --mamba-scheduler-strategy no_buffer; --scheduler-recv-interval 10, 30 at
    # CONC >= 16 (read at 8acbd08b7).
    (_QWEN35, "fp4", "b300_sxm", "v0.5.10.post1-cu130"): (
        Launch(
            0.8,
            kv_fp8=True,
            max_seqs=128,
            chunk=32768,
            max_prefill_tokens=32768,
            no_prefix_cache=True,
            ssm_state_dtype="bf16",
            recv_interval=10,
            recv_interval_c16=30,
        ),
    ),
    # qwen3.5_bf16_b300.sh (32274d6c1, 2026-04-17; configs 738, 739): 0.82, 32768 / 32768, 128, KV auto (bf16);
    # --scheduler-recv-interval 10, 30 at CONC >= 16 (read at 32274d6c1).
    (_QWEN35, "bf16", "b300_sxm", "v0.5.10.post1-cu130"): (
        Launch(0.82, max_seqs=128, chunk=32768, max_prefill_tokens=32768, no_prefix_cache=True, recv_interval=10, recv_interval_c16=30),
    ),
    # qwen3.5_fp8_h200.sh (f65d6b4b1, 2026-03-04, to 626932a11; the H200 MTP entry came 2026-04-06, 51e31df4a):
    # --mem-fraction-static 0.8 --kv-cache-dtype fp8_e4m3 --chunked-prefill-size 16384 --max-running-requests 128
    # (--max-prefill-tokens SGLang's 16384); no --scheduler-recv-interval (SGLang's 1; read at f65d6b4b1 and 626932a11).
    (_QWEN35, "fp8", "h200_sxm", "v0.5.9-cu129-amd64"): (
        Launch(0.8, kv_fp8=True, max_seqs=128, chunk=16384, no_prefix_cache=True, ssm_state_dtype="bf16"),
    ),
}
# Each engine's table and the image its silicon_data_source names (the tag: the table's last key part).
INFERENCEX: dict[str, tuple[re.Pattern[str], dict[tuple[str, str, str, str], tuple[Launch, ...]]]] = {
    "vllm": (re.compile(r"vllm/vllm-openai:(\S+?)(?:;|$)"), INFERENCEX_VLLM),
    "sglang": (re.compile(r"lmsysorg/sglang:(\S+?)(?:;|$)"), INFERENCEX_SGLANG),
}


def inferencex_launch(row: dict[str, str]) -> Launch | None:
    """The InferenceX script's flags a row ran with (its engine's table, INFERENCEX), None for a row of no entry."""
    source = row.get("silicon_data_source", "")
    image, table = INFERENCEX.get(row.get("backend", ""), (None, {}))
    tag = image.search(source) if image is not None else None
    if tag is None:
        return None
    entries = table.get((row["model_path"], row["precision"], row["system"], tag.group(1)), ())
    measured = _MEASURED.search(source)
    day = measured.group(1) if measured else ""
    return next((e for e in entries if day >= e.since), None)


@dataclass(frozen=True, slots=True)
class Recipe:
    """An InferenceX disaggregated vLLM recipe's engines: --max-num-seqs and --max-num-batched-tokens of
    each pool (per attention-DP rank), and whether the decode engine is attention-DP (dep: tp 1, one rank
    per GPU) or tensor-parallel (tep). Its prefill engines are always dep (tp 1, dp and ep the GPUs)."""

    prefill_seqs: int
    decode_seqs: int
    decode_dp: bool
    prefill_tokens: int = 16384
    decode_tokens: int = 10240


# kimik2.5-fp4-gb200-dynamo-vllm (nvidia-master.yaml at 2026-04-07, image vllm/vllm-openai:v0.18.0-cu130):
# each search-space entry names a recipe (CONFIG_FILE=recipes/vllm/kimi-k2.5/...), which InferenceX took in
# as benchmarks/multi_node/srt-slurm-recipes/vllm/kimi-k2.5/ (80d98084f, 2026-04-28, from NVIDIA/srt-slurm
# sa-submission-q2-2026, the same container). Every prefill engine: tensor-parallel-size 1,
# data-parallel-size 4, enable-expert-parallel, max-num-batched-tokens 16384, no chunked prefill; decode:
# max-num-batched-tokens 10240; kv-cache-dtype fp8 and gpu-memory-utilization 0.9 in both. By (isl,
# prefill workers, decode workers): 1k1k 1p1d-dep4-dep16 (max-num-seqs 4096 / 4096), 1k1k 1p4d-dep4-tep4
# (1024 / 1024), 8k1k 1p4d-dep4-tep4 (64 / 16), 8k1k 3p1d-dep4-dep16 (64 / 256).
INFERENCEX_RECIPES: dict[tuple[int, int, int], Recipe] = {
    (1024, 1, 1): Recipe(4096, 4096, decode_dp=True),
    (1024, 1, 4): Recipe(1024, 1024, decode_dp=False),
    (8192, 1, 4): Recipe(64, 16, decode_dp=False),
    (8192, 3, 1): Recipe(64, 256, decode_dp=True),
}


def inferencex_recipe(row: dict[str, str]) -> Recipe | None:
    """The recipe an InferenceX GB200 disaggregated vLLM row ran (INFERENCEX_RECIPES), None for any other row."""
    source = row.get("silicon_data_source", "")
    if row.get("backend") != "vllm" or row.get("mode") != "disagg" or "vllm/vllm-openai:v0.18.0-cu130" not in source:
        return None
    key = (int(row["isl"]), _count(row["prefill_num_workers"]), _count(row["decode_num_workers"]))
    return INFERENCEX_RECIPES.get(key)


# --- InferenceX rows (serving_runs_newer.csv, TensorRT-LLM) ----------------------------------------
@dataclass(frozen=True, slots=True)
class TrtllmRecipe:
    """An InferenceX disaggregated TensorRT-LLM recipe's engines (trtllm_config prefill / decode): max_batch_size
    and max_num_tokens of a context server (per attention-DP rank) and of a generation engine (its max_num_tokens
    is its max_batch_size: one token a request), and each pool's kv_cache_config.free_gpu_memory_fraction."""

    prefill_batch: int
    decode_batch: int
    prefill_tokens: int = 16384
    prefill_fraction: float = 0.4
    decode_fraction: float = 0.9


# kimik2.5-fp4-gb200-dynamo-trt (nvidia-master.yaml from e8924a6a4, 2026-04-18, image
# nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:1.1.0-dev.2): each STP search-space entry names a recipe
# (CONFIG_FILE=recipes/kimi2.5/trtllm_dynamo/disagg/gb200Nvfp4/ISL{1K,8K}_OSL1K/STP/...) of NVIDIA/srt-slurm
# branch sa-submission-q2-2026, read at f61dbba8 (its last commit before 2026-04-19; the recipes entered at
# 94903bdb, 2026-04-10). Every context server: tensor_parallel_size 4, moe_expert_parallel_size 4,
# enable_attention_dp, max_num_tokens 16384, max_batch_size 16 (1k) or 2 (8k), free_gpu_memory_fraction 0.4,
# overlap scheduler off, no CUDA graphs, fp8 KV. Generation engines: fraction 0.9, fp8 KV, CUDA graphs with
# padding, stream_interval 100. By (isl, decode workers, decode tp): 1k ctx1dep4_gen4tep8_batch128 (c4-668),
# 1k ctx1dep4_gen5tep4_batch8 (c5-55), 8k ctx1dep4_gen4tep8_batch1 (c4), 8k ctx1dep4_gen4tep4_batch32 (c156),
# 8k ctx1dep4_gen5tep4_batch16 (c5-105).
INFERENCEX_TRTLLM: dict[tuple[int, int, int], TrtllmRecipe] = {
    (1024, 4, 8): TrtllmRecipe(16, 128),
    (1024, 5, 4): TrtllmRecipe(16, 8),
    (8192, 4, 8): TrtllmRecipe(2, 1),
    (8192, 4, 4): TrtllmRecipe(2, 32),
    (8192, 5, 4): TrtllmRecipe(2, 16),
}
TRTLLM_IMAGE = "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:1.1.0-dev.2"


def inferencex_trtllm_recipe(row: dict[str, str]) -> TrtllmRecipe | None:
    """The recipe an InferenceX GB200 disaggregated TensorRT-LLM row ran (INFERENCEX_TRTLLM), None for any other row."""
    source = row.get("silicon_data_source", "")
    if row.get("backend") != "trtllm" or row.get("mode") != "disagg" or row.get("system") != "gb200" or TRTLLM_IMAGE not in source:
        return None
    key = (int(row["isl"]), _count(row["decode_num_workers"]), _count(row["decode_tp_size"]))
    return INFERENCEX_TRTLLM.get(key)


# InferenceX's `dp-attn: true` entries run `--tensor-parallel-size=1 --data-parallel-size=$TP
# --enable-expert-parallel` (minimaxm2.5_fp4_b200.sh, _fp4_b300.sh PARALLEL_ARGS from 79bd988e9 and
# 22d0f12f7): TP attention-DP ranks of tp 1, the experts over them. The database gives each search-space
# entry its config id; the ids whose rows fall only in a dp-attn entry of the master config at their
# measured date: 707 (minimaxm2.5-fp4-b200, tp 2 ep 2 dp-attn, c256-1024) and 727 (fp4-b300, tp 2 ep 2
# dp-attn, c256-2048). Not 827 (fp8-b300's { tp: 2, ep: 2, dp-attn: true, c1024 }, added by 0c2467c15 on
# 2026-04-21, the row's measured date): minimaxm2.5_fp8_b300.sh (340d7854c, 0c2467c15, unchanged to ed5867f9e
# on 2026-05-12) reads no DP_ATTENTION and launches --tensor-parallel-size=$TP --enable-expert-parallel, the
# tp 2 ep 2 run of config 735 (c1024: 3132 ms / 65.6 ms, config 827 3121 / 65.2).
DP_ATTENTION_CONFIGS = frozenset({"707", "727"})


# SGLang config ids whose rows list another layout than their entry ran: 736 (qwen3.5-fp4-b300-sglang, measured
# 2026-04-18) is listed tp4, expert-TP 2, ep 2, but the entry's search space at 8acbd08b7 and to 2026-04-27 holds
# only { tp: 4, ep: 1 } (config 737, listed tp4 expert-TP 4) and { tp: 2, ep: 2 }, launched --tensor-parallel-size 2
# --ep-size 2: two GPUs. Its TPOT is 1.18x (c4) to 1.33x (c128) that of config 737 on the same day, which the
# model prices alike at tp4 whatever the expert split.
SGLANG_LAYOUTS = {"736": (2, 2)}


def inferencex_layout(row: dict[str, str]) -> tuple[int, int] | None:
    """(tp, ep) an InferenceX SGLang row's entry ran where its columns list another (SGLANG_LAYOUTS), else None."""
    config = re.search(r"config_id=(\d+)", row.get("silicon_data_source", ""))
    return SGLANG_LAYOUTS.get(config.group(1)) if row.get("backend") == "sglang" and config is not None else None


def inferencex_dp_attention(row: dict[str, str]) -> bool:
    """Whether an InferenceX vLLM row ran a dp-attn entry (DP_ATTENTION_CONFIGS)."""
    config = re.search(r"config_id=(\d+)", row.get("silicon_data_source", ""))
    return row.get("backend") == "vllm" and config is not None and config.group(1) in DP_ATTENTION_CONFIGS


def kv_dtype(row: dict[str, str]) -> str:
    """The KV cache dtype a row's engines ran with: fp8 for the Dynamo campaign's rows, else auto.

    The campaign is the one silicon_data_source names (gtl_job_id 23364591, dynamo_version=0.8.0):
    its 7 disaggregated rows and its 8 aggregated ones (TensorRT-LLM 1.2 Qwen3-32B and
    Qwen3-235B-A22B, vLLM 0.12 Qwen3-32B, 4000/1000 on H100), all launched by the same generator.

    aiconfigurator picks the quantisation of a deployment it generates in sdk/task.py
    _get_quant_mode (commit 5e0243eb1): on SM 89 and newer (H100, H200) kvcache_quant_mode = "fp8"
    (kept unless the perf database has no fp8 attention table; collector/vllm/collect_attn.py and
    collector/sglang/collect_attn.py collect fp8 KV on SM > 86 and SM >= 90), with gemm "fp8" for
    vLLM and "fp8_block" for SGLang on SM 90, the gemm_quant_mode of these rows. The generator
    passes it on (module_bridge.py: kv_cache_dtype = kvcache_quant_mode; backend_config_mapping.yaml:
    vLLM --kv-cache-dtype, SGLang --kv-cache-dtype as fp8_e4m3 by sglang.rule, TensorRT-LLM
    kv_cache_config.dtype). The older rows carry no source (serving_runs.SOURCE.md): auto.

    The NVFP4 rows of serving_runs_newer.csv (precision fp4): fp8, what the engines' `auto` reads from
    NVIDIA's NVFP4 checkpoints of these models (nvidia/MiniMax-M2.5-NVFP4, Qwen3.5-397B-A17B-NVFP4,
    GLM-5-NVFP4 hf_quant_config.json: kv_cache_quant_algo FP8; Kimi-K2.5-NVFP4 config.json
    quantization_config.kv_cache_scheme 8-bit float; bundled in ai-dynamo/aiconfigurator model_configs/ at
    095f58a). Their fp8, int4 and bf16 rows ran the models' own checkpoints, which name no KV scheme
    (MiniMaxAI/MiniMax-M2.5 config.json quant_method fp8 without one; Kimi-K2.5 kv_cache_scheme null):
    auto, the activation dtype."""
    if CAMPAIGN in row.get("silicon_data_source", "") or row.get("precision") == "fp4":
        return "fp8"
    launch = inferencex_launch(row)
    return "fp8" if launch is not None and launch.kv_fp8 else "auto"


def _count(value: str) -> int:
    return int(value) if value and int(value) > 0 else 1
