"""`autopar serve`: the DESIGN.md contract (JSON keys, exit codes, one-line errors)."""

from __future__ import annotations

import itertools
import json

import pytest
from typer.testing import CliRunner

from autopar.cli import app

runner = CliRunner()
KEYS = {
    "ttft_ms",
    "tpot_ms",
    "output_tokens_per_s",
    "output_tokens_per_s_per_gpu",
    "tokens_per_s_per_user",
    "requests_per_s",
    "kv_cache_tokens",
    "max_concurrency",
    "memory_gib_per_gpu",
    "fits",
    "tp",
    "pp",
    "dp",
    "ep",
    "attention_dp",
    "mode",
    "concurrency",
}
BASE = ["serve", "estimate", "llama3.1-8b", "--hardware", "h100-sxm", "--isl", "1024", "--osl", "256"]


def _json(args: list[str]) -> dict:
    r = runner.invoke(app, [*args, "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_estimate_json_keys_and_degrees() -> None:
    doc = _json([*BASE, "--gpus", "4", "--tp", "2", "--dp", "2", "--concurrency", "32"])
    assert doc.keys() >= KEYS
    assert (doc["tp"], doc["pp"], doc["dp"], doc["ep"], doc["attention_dp"], doc["mode"]) == (2, 1, 2, 1, False, "agg")
    assert doc["concurrency"] == 32 and doc["fits"] is True
    assert "inter-token" in doc["tpot_definition"]
    assert doc["output_tokens_per_s_per_gpu"] == pytest.approx(doc["output_tokens_per_s"] / 4)
    assert doc["tokens_per_s_per_user"] == pytest.approx(1000 / doc["tpot_ms"])


def test_attention_dp_moe_engine() -> None:
    doc = _json(
        [
            "serve",
            "estimate",
            "qwen3-235b-a22b",
            "--hardware",
            "h200-sxm",
            "--gpus",
            "8",
            "--tp",
            "1",
            "--dp",
            "8",
            "--attention-dp",
            "--ep",
            "8",
            "--weights",
            "fp8",
            "--concurrency",
            "256",
            "--isl",
            "1000",
            "--osl",
            "1000",
        ]
    )
    assert (doc["tp"], doc["dp"], doc["ep"], doc["attention_dp"]) == (1, 8, 8, True)
    assert doc["tpot_breakdown_ms"]["ep_comm"] > 0


def test_disagg_has_prefill_and_decode_subplans() -> None:
    doc = _json(
        [
            "serve",
            "estimate",
            "qwen3-32b",
            "--hardware",
            "h100-sxm",
            "--gpus",
            "16",
            "--mode",
            "disagg",
            "--prefill-workers",
            "8",
            "--prefill-tp",
            "1",
            "--decode-workers",
            "2",
            "--decode-tp",
            "4",
            "--weights",
            "fp8",
            "--concurrency",
            "224",
            "--isl",
            "4000",
            "--osl",
            "1000",
        ]
    )
    assert doc["mode"] == "disagg" and doc["tp"] == 4
    assert doc["prefill"]["workers"] == 8 and doc["decode"]["workers"] == 2 and doc["decode"]["tp"] == 4
    assert doc["ttft_breakdown_ms"]["kv_transfer"] > 0 and doc["tpot_breakdown_ms"]["prefill_mix"] == 0


def test_human_output_states_tpot_definition() -> None:
    r = runner.invoke(app, [*BASE, "--gpus", "1", "--tp", "1", "--concurrency", "8"])
    assert r.exit_code == 0, r.output
    assert "TPOT = inter-token latency after the first token" in r.stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--gpus", "4", "--tp", "2", "--framework", "tgi"], "--framework"),
        (["--gpus", "4", "--tp", "2", "--weights", "int3"], "--weights"),
        (["--gpus", "4", "--tp", "2", "--kv-dtype", "fp4"], "--kv-dtype"),
        (["--gpus", "3", "--tp", "2"], "--gpus"),
        (["--gpus", "4", "--tp", "2", "--dp", "4"], "--gpus"),
        (["--gpus", "4"], "--tp"),
        (["--tp", "2"], "--gpus"),
        (["--gpus", "3", "--tp", "3"], "num_attention_heads"),
        (["--gpus", "4", "--tp", "2", "--ep", "2"], "MoE"),
        (["--gpus", "4", "--tp", "4", "--concurrency", "0"], "--concurrency"),
        (["--gpus", "4", "--tp", "4", "--osl", "1"], "--osl"),
        (["--gpus", "4", "--tp", "4", "--mode", "both"], "--mode"),
        (["--gpus", "4", "--tp", "4", "--mode", "disagg"], "--prefill-workers"),
        (["--gpus", "4", "--tp", "4", "--decode-workers", "2"], "--mode disagg"),
        (["--gpus", "4", "--tp", "4", "--random-range-ratio", "0"], "--random-range-ratio"),
        (["--gpus", "4", "--tp", "4", "--random-range-ratio", "1.5"], "--random-range-ratio"),
        (["--gpus", "4", "--tp", "4", "--framework", "sglang", "--scheduler-recv-interval", "0"], "--scheduler-recv-interval"),
        (["--gpus", "4", "--tp", "4", "--framework", "vllm", "--scheduler-recv-interval", "10"], "--scheduler-recv-interval"),
    ],
)
def test_bad_input_exits_2_with_one_line(args: list[str], needle: str) -> None:
    r = runner.invoke(app, [*BASE, *args])
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], r.stderr
    assert "Traceback" not in r.output


def test_unknown_model_exits_2() -> None:
    r = runner.invoke(app, ["serve", "estimate", "no-such-model", "--gpus", "1", "--tp", "1"])
    assert r.exit_code == 2 and "unknown model" in r.stderr


SUGGEST = ["serve", "suggest", "llama3.1-8b", "--hardware", "h100-sxm", "--gpus", "4", "--isl", "1024", "--osl", "256"]


def test_suggest_json_recommends_a_deployment_meeting_targets() -> None:
    doc = _json([*SUGGEST, "--ttft-ms", "1000", "--tpot-ms", "20"])
    rec = doc["recommended"]
    assert rec.keys() >= KEYS and rec["fits"] is True and rec["gpus"] == 4
    assert rec["ttft_ms"] <= 1000 and rec["tpot_ms"] <= 20 and not rec["queue_saturated"]
    front = doc["pareto"]
    assert front and doc["points_priced"] >= len(front)
    # every point explains itself: weights, KV, TP all-reduce, EP all-to-all, prefill interference, queueing
    for p in front:
        assert {"weights", "kv", "tp_comm", "ep_comm", "prefill_mix"} <= p["tpot_breakdown_ms"].keys()
        assert {"prefill", "queue"} <= p["ttft_breakdown_ms"].keys()
    # along the front, each point gives up tokens/s per user for more tokens/s per GPU
    for a, b in itertools.pairwise(front):
        assert a["tokens_per_s_per_user"] >= b["tokens_per_s_per_user"]
        assert a["output_tokens_per_s_per_gpu"] < b["output_tokens_per_s_per_gpu"]
    # nothing on the front that meets the targets beats the recommendation
    ok = [p for p in front if p["ttft_ms"] <= 1000 and p["tpot_ms"] <= 20]
    assert all(p["output_tokens_per_s_per_gpu"] <= rec["output_tokens_per_s_per_gpu"] + 1e-9 for p in ok)


def test_suggest_human_output() -> None:
    r = runner.invoke(app, [*SUGGEST, "--modes", "agg", "--kv-dtype", "fp8"])
    assert r.exit_code == 0, r.output
    assert "Pareto front" in r.stdout and "recommended:" in r.stdout and "inter-token" in r.stdout


def test_suggest_table_shows_front_points_that_print_alike_once() -> None:
    """Qwen3-30B-A3B on 16 H100, disaggregated: 110 front points, many of them pools that differ only in TTFT
    (the same tok/s/GPU and tok/s/user as printed: 61 pairs); the table shows each printed pair once, at its
    lowest TTFT."""
    args = ["serve", "suggest", "qwen3-30b-a3b", "--hardware", "h100-sxm", "--gpus", "16", "--modes", "disagg"]
    front = _json(args)["pareto"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    lowest: dict[tuple[str, str], float] = {}
    for p in front:
        key = (f"{p['output_tokens_per_s_per_gpu']:,.0f}", f"{p['tokens_per_s_per_user']:.1f}")
        lowest[key] = min(lowest.get(key, float("inf")), p["ttft_ms"])
    rows = [line.split()[-5:] for line in r.stdout.splitlines() if {"auto", "bf16", "fp8"} & set(line.split()[-7:-5])]
    assert len(front) > 1.5 * len(lowest) and len(rows) == len(lowest)  # the table's row of a layout that wraps is one
    assert {(g, u): t for _conc, t, _tpot, g, u in rows} == {k: f"{v:.0f}" for k, v in lowest.items()}
    assert f"{len(lowest)} of {len(front)} front points" in r.stdout


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["--tpot-ms", "0.5"], 1, "no deployment"),
        (["--modes", "agg,split"], 2, "--modes"),
        (["--ttft-ms", "-3"], 2, "--ttft-ms"),
        (["--weights", "fp2"], 2, "--weights"),
    ],
)
def test_suggest_refusals(args: list[str], code: int, needle: str) -> None:
    r = runner.invoke(app, [*SUGGEST, *args])
    assert r.exit_code == code, r.output
    assert needle in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_suggest_model_that_fits_nowhere_exits_1() -> None:
    r = runner.invoke(app, ["serve", "suggest", "llama3.1-405b", "--hardware", "h100-sxm", "--gpus", "1"])
    assert r.exit_code == 1 and "does not fit" in r.stderr


def test_framework_version_selects_its_data_file() -> None:
    base = [
        "serve",
        "estimate",
        "qwen3-32b",
        "--hardware",
        "h100-sxm",
        "--gpus",
        "8",
        "--tp",
        "8",
        "--concurrency",
        "64",
        "--isl",
        "1024",
        "--osl",
        "128",
    ]
    old = _json([*base, "--framework", "sglang@0.5.1.post1"])
    new = _json([*base, "--framework", "sglang"])
    assert old["framework_constants"] == "SGLang 0.5.1" and new["framework_constants"] == "SGLang 0.5.6"
    assert old["ttft_ms"] != new["ttft_ms"]
    assert "framework_note" not in old and "framework_note" not in new  # each uses its own file
    r = runner.invoke(app, [*base, "--framework", "sglang@0.4.x"])
    assert r.exit_code == 2 and "--framework 'sglang@0.4.x': malformed version '0.4.x'" in r.stderr


def test_suggest_without_targets_applies_mlperf_interactive_bounds() -> None:
    # mlcommons/inference loadgen/mlperf.conf, llama2-70b-interactive.Server: ttft_latency 450, tpot_latency 40
    doc = _json(SUGGEST)
    rec = doc["recommended"]
    assert doc["recommended_by"] == "default" and "TTFT <= 450 ms, TPOT <= 40 ms" in doc["recommendation_rule"]
    assert rec["ttft_ms"] <= 450 and rec["tpot_ms"] <= 40 and not rec["queue_saturated"]
    # the front still runs past the bounds (nothing is cut), and nothing on it within them does better
    assert max(p["tpot_ms"] for p in doc["pareto"]) > 40
    ok = [p for p in doc["pareto"] if p["ttft_ms"] <= 450 and p["tpot_ms"] <= 40 and not p["queue_saturated"]]
    assert max(p["output_tokens_per_s_per_gpu"] for p in ok) == pytest.approx(rec["output_tokens_per_s_per_gpu"])
    r = runner.invoke(app, SUGGEST)
    assert r.exit_code == 0, r.output
    assert "targets: default TTFT <= 450 ms, TPOT <= 40 ms (MLPerf interactive)" in r.stdout
    assert "picked by rule 'default': no --ttft-ms/--tpot-ms given" in r.stdout


def test_suggest_with_a_target_names_the_targets_rule() -> None:
    doc = _json([*SUGGEST, "--tpot-ms", "100"])
    assert doc["recommended_by"] == "targets" and doc["recommended"]["tpot_ms"] <= 100
    # a given target replaces both defaults: TTFT is free
    assert "picked by rule 'targets'" in runner.invoke(app, [*SUGGEST, "--tpot-ms", "100"]).stdout


def test_suggest_falls_back_to_the_knee_when_the_defaults_cannot_be_met() -> None:
    # Llama-3.1-70B fp8 on 2 L40S: 35 GB of weights per GPU at 864 GB/s is 41 ms a step before the KV,
    # so no deployment reaches TPOT 40 ms; the knee is the front's largest tok/s/GPU x tok/s/user
    args = ["serve", "suggest", "llama3.1-70b", "--hardware", "l40s", "--gpus", "2", "--weights", "fp8"]
    doc = _json(args)
    assert doc["recommended_by"] == "knee" and "knee of the front" in doc["recommendation_rule"]
    assert min(p["tpot_ms"] for p in doc["pareto"]) > 40
    products = [p["output_tokens_per_s_per_gpu"] * p["tokens_per_s_per_user"] for p in doc["pareto"]]
    rec = doc["recommended"]
    assert rec["output_tokens_per_s_per_gpu"] * rec["tokens_per_s_per_user"] == pytest.approx(max(products))
    assert "picked by rule 'knee'" in runner.invoke(app, args).stdout


def test_engine_args_reach_the_estimate_the_json_and_the_launch_line() -> None:
    """--max-num-tokens/--max-batch-size/--memory-fraction are the launch's own settings: the JSON shows what
    the estimate used, the launch line carries them, and a smaller pool holds fewer KV tokens."""
    default = _json([*BASE, "--gpus", "1", "--tp", "1", "--concurrency", "16", "--framework", "trtllm"])
    assert default["engine_args"] == {
        "max_num_tokens": 8192,
        "max_batch_size": 2048,
        "memory_fraction": 0.9,
        "prefix_cache": True,
        "ssm_state_dtype": None,
    }
    args = ["--max-num-tokens", "2688", "--max-batch-size", "8", "--memory-fraction", "0.45"]
    doc = _json([*BASE, "--gpus", "1", "--tp", "1", "--concurrency", "16", "--framework", "trtllm", *args, "--emit", "trtllm"])
    assert doc["engine_args"] == {
        "max_num_tokens": 2688,
        "max_batch_size": 8,
        "memory_fraction": 0.45,
        "prefix_cache": True,
        "ssm_state_dtype": None,
    }
    # TensorRT-LLM gives the KV cache the fraction of what the weights (and reserves) leave: half the fraction,
    # half the pool, to the token (the smaller step budget above also shrinks the activation reserve)
    half = _json([*BASE, "--gpus", "1", "--tp", "1", "--concurrency", "16", "--framework", "trtllm", "--memory-fraction", "0.45"])
    assert half["kv_cache_tokens"] == pytest.approx(default["kv_cache_tokens"] / 2, abs=1)
    assert doc["kv_cache_tokens"] > half["kv_cache_tokens"]
    # 16 requests, 8 running at once: the other 8 wait a whole request's latency for a slot
    assert doc["ttft_ms"] > doc["tpot_ms"] * 255 / 2
    (line,) = doc["launch"]["servers"]
    assert "--max_batch_size 8 --max_num_tokens 2688 --kv_cache_free_gpu_memory_fraction 0.45" in line


@pytest.mark.parametrize(
    "framework,flags",
    [
        ("vllm", "--gpu-memory-utilization 0.8 --max-num-seqs 32 --max-num-batched-tokens 4096"),
        ("sglang", "--mem-fraction-static 0.8 --max-running-requests 32 --chunked-prefill-size 4096"),
    ],
)
def test_engine_args_in_vllm_and_sglang_launch_lines(framework: str, flags: str) -> None:
    doc = _json(
        [
            *BASE,
            "--gpus",
            "1",
            "--tp",
            "1",
            "--concurrency",
            "4",
            "--framework",
            framework,
            "--max-num-tokens",
            "4096",
            "--max-batch-size",
            "32",
            "--memory-fraction",
            "0.8",
            "--emit",
            framework,
        ]
    )
    assert flags in doc["launch"]["servers"][0]


def test_replicas_past_one_node_are_one_block_per_node() -> None:
    """Two tp8 engines on 16 H100s (8 per node): one block per node, each on that node's GPUs 0..7."""
    servers = _json([*BASE, "--gpus", "16", "--tp", "8", "--concurrency", "64", "--emit", "vllm"])["launch"]["servers"]
    assert servers[0].startswith("# 2 hosts of 8 GPUs: run each block below on its own host") and len(servers) == 5
    assert servers[1] == "# host 0 of 2, GPUs numbered from 0 there: engine 0"
    assert servers[3] == "# host 1 of 2, GPUs numbered from 0 there: engine 1"
    assert servers[2].startswith("CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 ") and servers[2].endswith("--port 8000")
    assert servers[4].startswith("CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 ") and servers[4].endswith("--port 8001")
    one_node = _json([*BASE, "--gpus", "8", "--tp", "4", "--concurrency", "64", "--emit", "vllm"])["launch"]["servers"]
    assert not any(line.startswith("#") for line in one_node)


def test_disagg_pools_report_their_engine_args() -> None:
    doc = _json(
        [
            *BASE,
            "--gpus",
            "2",
            "--mode",
            "disagg",
            "--prefill-workers",
            "1",
            "--decode-workers",
            "1",
            "--tp",
            "1",
            "--concurrency",
            "8",
            "--max-num-tokens",
            "4096",
        ]
    )
    assert doc["prefill"]["engine_args"]["max_num_tokens"] == 4096
    assert doc["decode"]["engine_args"]["max_num_tokens"] == 4096


def test_sglang_mixed_chunk_and_max_prefill_tokens_reach_the_json_and_the_launch_line() -> None:
    """--mixed-chunk and --max-prefill-tokens are SGLang's --enable-mixed-chunk and --max-prefill-tokens (flag names
    from SGLang 0.5.6.post2's parser, sglang/srt/server_args.py): the JSON reports them, the launch line carries them,
    and an SGLang default launch (neither) prints neither."""
    base = [*BASE, "--gpus", "1", "--tp", "1", "--concurrency", "8", "--framework", "sglang", "--emit", "sglang"]
    default = _json(base)
    assert (default["engine_args"]["mixed_chunk"], default["engine_args"]["max_prefill_tokens"]) == (False, 0)
    assert "--enable-mixed-chunk" not in default["launch"]["servers"][0]
    assert "--max-prefill-tokens" not in default["launch"]["servers"][0]
    doc = _json([*base, "--mixed-chunk", "--max-prefill-tokens", "2524"])
    assert (doc["engine_args"]["mixed_chunk"], doc["engine_args"]["max_prefill_tokens"]) == (True, 2524)
    assert "--chunked-prefill-size 8192 --enable-mixed-chunk --max-prefill-tokens 2524" in doc["launch"]["servers"][0]
    assert "mixed_chunk" not in _json([*BASE, "--gpus", "1", "--tp", "1", "--concurrency", "8"])["engine_args"]


def test_attention_data_parallelism_is_explained_where_shown() -> None:
    # issue 25: "tp1 adp8" was never explained (SGLang's front holds attention-DP layouts; vLLM's ranks wait for
    # each other's prompts, cost/serve_loop.py others_prompt_s, and its front for this model has none)
    out = runner.invoke(app, ["serve", "suggest", "qwen3-30b-a3b", "--gpus", "8", "--hardware", "h200-sxm", "--framework", "sglang"]).stdout
    assert " adp" in out and "adpN: attention data parallelism, N ranks each with its own requests and KV cache" in " ".join(out.split())


DISAGG = ["--mode", "disagg", "--prefill-workers", "1", "--decode-workers", "1", "--tp", "1", "--gpus", "2", "--concurrency", "8"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--prefill-max-batch-size", "0", *DISAGG], "--prefill-max-batch-size must be between 1 and"),
        (["--decode-memory-fraction", "2", *DISAGG], "--decode-memory-fraction must be between 0.05 and 1.0, got 2.0"),
        (["--ssm-state-dtype", "fp16", "--gpus", "1", "--tp", "1"], "--ssm-state-dtype must be one of bf16, fp32, got 'fp16'"),
        (["--ssm-state-dtype", "bf16", "--gpus", "1", "--tp", "1"], "--ssm-state-dtype sets the Mamba state of a hybrid model"),
        (["--decode-max-batch-size", "8", "--gpus", "1", "--tp", "1"], "--decode-max-batch-size sets a disaggregated pool"),
    ],
)
def test_launch_options_refuse_bad_values_in_one_line(args: list[str], message: str) -> None:
    r = runner.invoke(app, [*BASE, *args])
    assert r.exit_code == 2, r.output
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.output


def test_suggest_refuses_per_pool_options_without_disagg() -> None:
    r = runner.invoke(app, ["serve", "suggest", "llama3.1-8b", "--gpus", "2", "--modes", "agg", "--prefill-max-batch-size", "4"])
    assert r.exit_code == 2 and "--prefill-max-batch-size sets a disaggregated pool" in r.stderr


def test_per_pool_options_reach_each_pool_the_json_and_the_launch_lines() -> None:
    """TensorRT-LLM gives the KV cache the fraction of what the weights leave (memory_rule free): the prefill pool's
    own 0.45 holds half the tokens of the shared 0.9, to the token; the decode pool keeps 0.9 and its own batch cap."""
    trt = ["--framework", "trtllm", "--emit", "trtllm"]
    default = _json([*BASE, *DISAGG, *trt])
    own = ["--prefill-memory-fraction", "0.45", "--decode-max-batch-size", "8", "--prefill-max-num-tokens", "4096"]
    doc = _json([*BASE, *DISAGG, *trt, *own])
    assert doc["prefill"]["engine_args"] == {
        "max_num_tokens": 4096,
        "max_batch_size": 2048,
        "memory_fraction": 0.45,
        "prefix_cache": True,
        "ssm_state_dtype": None,
    }
    assert doc["decode"]["engine_args"]["max_batch_size"] == 8 and doc["decode"]["engine_args"]["memory_fraction"] == 0.9
    assert doc["decode"]["engine_args"]["max_num_tokens"] == 8192
    assert doc["prefill"]["kv_cache_tokens"] < default["prefill"]["kv_cache_tokens"]
    assert doc["decode"]["kv_cache_tokens"] == default["decode"]["kv_cache_tokens"]
    servers = [line for line in doc["launch"]["servers"] if "trtllm-serve" in line and "disaggregated" not in line]
    assert "--max_num_tokens 4096 --kv_cache_free_gpu_memory_fraction 0.45" in servers[0]
    assert "--max_batch_size 8 --max_num_tokens 8192 --kv_cache_free_gpu_memory_fraction 0.9" in servers[1]
    half = _json([*BASE, *DISAGG, "--framework", "trtllm", "--prefill-memory-fraction", "0.45"])
    assert half["prefill"]["kv_cache_tokens"] == pytest.approx(default["prefill"]["kv_cache_tokens"] / 2, abs=1)


def test_prefix_cache_and_state_dtype_reach_the_json_and_the_launch_line() -> None:
    """Qwen3.5 on SGLang: --disable-prefix-cache keeps the overlap scheduler (a shorter TPOT), --ssm-state-dtype bf16
    halves the SSM state (more requests held); both are echoed and launched. A plain model prices no prefix reuse,
    so the option changes nothing but the launch line."""
    base = ["serve", "estimate", "qwen3.5-397b-a17b", "--hardware", "b200", "--weights", "fp8", "--gpus", "4", "--tp", "4"]
    base += ["--framework", "sglang", "--concurrency", "16", "--isl", "1024", "--osl", "256"]
    plain = _json(base)
    doc = _json([*base, "--disable-prefix-cache", "--ssm-state-dtype", "bf16", "--emit", "sglang"])
    assert (doc["engine_args"]["prefix_cache"], doc["engine_args"]["ssm_state_dtype"]) == (False, "bf16")
    assert doc["tpot_ms"] < plain["tpot_ms"] and doc["max_concurrency"] > plain["max_concurrency"]
    line = next(s for s in doc["launch"]["servers"] if "sglang.launch_server" in s)
    assert "--disable-radix-cache" in line and "--mamba-ssm-dtype bfloat16" in line
    dense = [*BASE, "--gpus", "1", "--tp", "1", "--concurrency", "8"]
    off = _json([*dense, "--disable-prefix-cache"])
    assert off["tpot_ms"] == _json(dense)["tpot_ms"] and off["engine_args"]["prefix_cache"] is False


def test_the_benchmark_parses_launch_flags_with_the_command_s_own_parser() -> None:
    from autopar.cli.serve import parse_launch
    from autopar.errors import SpecError
    from autopar.spec.serve import EngineArgs

    argv = ["--memory-fraction", "0.9", "--prefill-max-batch-size", "64", "--decode-max-num-tokens", "10240"]
    shared, prefill, decode = parse_launch(argv)
    assert shared == EngineArgs(memory_fraction=0.9)
    assert (prefill, decode) == (EngineArgs(max_batch_size=64), EngineArgs(max_num_tokens=10240))
    with pytest.raises(SpecError, match="--tp is not a serve launch option"):
        parse_launch(["--tp", "4"])


def test_random_range_ratio_and_scheduler_recv_interval_reach_the_estimate_and_the_launch() -> None:
    """--random-range-ratio spreads the output lengths (sglang.bench_serving's [ratio x osl, osl]) and the printed
    SGLang benchmark carries it; --scheduler-recv-interval is SGLang's (server_args.py): the JSON reports it and the
    launch line carries it, a default launch (1) does not. With every request at one length it changes nothing
    (the batch ends together and an idle SGLang takes new requests at once); with lengths spread it holds the
    returning requests for its decode steps, which TTFT shows."""
    base = [*BASE, "--gpus", "1", "--tp", "1", "--concurrency", "16", "--framework", "sglang", "--emit", "sglang"]
    default = _json(base)
    assert default["engine_args"]["recv_interval"] == 1
    assert "--scheduler-recv-interval" not in default["launch"]["servers"][0]
    assert "--random-range-ratio 1 " in default["launch"]["benchmark"]
    fixed = _json([*base, "--scheduler-recv-interval", "30"])
    assert fixed["engine_args"]["recv_interval"] == 30 and "--scheduler-recv-interval 30" in fixed["launch"]["servers"][0]
    assert fixed["ttft_ms"] == default["ttft_ms"]
    spread = _json([*base, "--random-range-ratio", "0.8"])
    assert "--random-range-ratio 0.8 " in spread["launch"]["benchmark"]
    held = _json([*base, "--random-range-ratio", "0.8", "--scheduler-recv-interval", "30"])
    assert held["ttft_ms"] > spread["ttft_ms"]
