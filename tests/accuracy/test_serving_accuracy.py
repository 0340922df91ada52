"""benchmarks/serving_accuracy.py: the one-wave TTFT bound and the error strata, hand-derived; and
benchmarks/serving_rows.py: how the measured rows become deployments."""

from __future__ import annotations

import csv
import dataclasses
from collections import Counter
from pathlib import Path

import pytest

from autopar.io.frameworks import load_framework
from autopar.io.models import load_model
from autopar.spec.serve import Deployment, Engine, EngineArgs, Workload
from benchmarks import serving_accuracy as sa
from benchmarks import serving_rows as sr
from benchmarks.serving_campaign import kv_dtype, launch_args


def _row(*, tp: int, isl: int, concurrency: int, ttft_ms: float = 100.0, source: str = "") -> sr.Row:
    model = load_model("llama3.1-8b")
    dep = Deployment(fw=load_framework("vllm@0.12"), mode="agg", engine=Engine(tp=tp), replicas=1)
    return sr.Row(
        key=("vllm", "h100_sxm", "agg"),
        label="test",
        model=model,
        model_key="meta-llama/Llama-3.1-8B-Instruct",
        hw_name="h100-sxm",
        dep=dep,
        wl=Workload(isl=isl, osl=128, concurrency=concurrency),
        ttft_ms=ttft_ms,
        tpot_ms=10.0,
        source=source,
    )


def test_wave_bound_is_half_the_wave_at_peak() -> None:
    # Llama-3.1-8B active matmul weights: 32 x (attention 4096^2 x 2 + 2 x 4096 x 1024, MLP 3 x 4096 x 14336)
    # + logits 128256 x 4096 = 7,504,658,432; H100 SXM dense bf16 peak 989.4 TFLOP/s (profiles/h100-sxm.yaml)
    params = 32 * (2 * 4096**2 + 2 * 4096 * 1024 + 3 * 4096 * 14336) + 128256 * 4096
    assert params == 7_504_658_432
    prompt = 1024 * 2 * params / 989.4e12  # 15.53 ms on one GPU
    assert sa.wave_bound_s(_row(tp=1, isl=1024, concurrency=8)) == pytest.approx(4.5 * prompt)  # 69.9 ms
    assert sa.wave_bound_s(_row(tp=4, isl=1024, concurrency=8)) == pytest.approx(4.5 * prompt / 4)
    assert sa.wave_bound_s(_row(tp=1, isl=1024, concurrency=1)) == pytest.approx(prompt)


def test_strata_buckets_concurrency_by_powers_of_two() -> None:
    rows = [_row(tp=1, isl=1024, concurrency=c) for c in (8, 12, 16)]
    est = [sa.estimate(r.model, sa.load_hardware(r.hw_name), r.dep, r.wl) for r in rows]
    out = sa.strata([(r, e, "scored") for r, e in zip(rows, est, strict=True)])
    assert sorted(out) == [("vllm", "h100_sxm", 1024, 8), ("vllm", "h100_sxm", 1024, 16)]
    n, bias, mape, _ = out["vllm", "h100_sxm", 1024, 8]
    errs = [(e.ttft_s * 1e3 - 100.0) / 100.0 for e in est[:2]]
    assert n == 2 and bias == pytest.approx(sum(errs) / 2) and mape == pytest.approx(sum(map(abs, errs)) / 2)


@pytest.mark.parametrize(
    ("system", "profile"),
    [
        ("h100_sxm", "h100-sxm"),
        ("h200_sxm", "h200-sxm"),
        ("b200_sxm", "b200"),
        ("a100_sxm", "a100-sxm-80g"),
        ("h100_pcie", "h100-pcie"),
        ("h20", "h20"),
        ("gb200", "gb200"),
        ("gb200_sxm", "gb200"),
        ("l40s", "l40s"),
        ("h20_3e", "h20-3e"),
        ("a100_pcie", None),
        ("b300_sxm", "b300"),
        ("gb300", None),
    ],
)
def test_a_system_name_finds_the_profile_of_the_same_gpu(system: str, profile: str | None) -> None:
    assert sr.profile_for_system(system) == profile


def test_rows_autopar_cannot_describe_are_counted_not_fatal(tmp_path: Path) -> None:
    with open(sr.HERE / "data" / "serving_runs.csv") as f:
        head = f.readline()
    cols = head.strip().split(",")
    good = {c: "" for c in cols} | {
        "backend": "vllm",
        "backend_version": "0.12.0",
        "model_path": "Qwen/Qwen3-32B",
        "system": "b200_sxm",
        "mode": "agg",
        "isl": "1024",
        "osl": "128",
        "batch_size": "8",
        "tp_size": "2",
        "silicon_ttft_ms": "100",
        "silicon_tpot_ms": "10",
    }
    others = [
        good | {"model_path": "Qwen/Qwen2.5-72B-Instruct"},
        good | {"system": "gb300"},
        good | {"system": "gb300"},
        good | {"backend": "lmdeploy"},
    ]
    path = tmp_path / "rows.csv"
    path.write_text(head + "".join(",".join(r[c] for c in cols) + "\n" for r in [good, *others]))
    skipped: list[str] = []
    rows = sr.load_rows(path, skipped)
    assert [(r.model.name, r.hw_name, r.dep.engine.tp, r.wl.concurrency) for r in rows] == [("qwen3-32b", "b200", 2, 8)]
    assert skipped == [
        "framework 'lmdeploy' is not modelled (1 rows)",
        "no built-in preset for model 'Qwen/Qwen2.5-72B-Instruct' (1 rows)",
        "no built-in profile for system 'gb300' (2 rows)",
    ]


def test_a_file_with_a_row_below_the_first_wave_share_was_measured_warm() -> None:
    row = _row(tp=1, isl=1024, concurrency=64)
    share = sr.first_wave_share_s(row)
    # 64 prompts of 1024 tokens, 8 per 8192-token step: the wave's mean TTFT is seconds, a tenth of it in a run
    assert 0.05 < share < 1.0
    cold = _row(tp=1, isl=1024, concurrency=64, ttft_ms=share * 1e3 * 1.01, source="a.csv")
    warm = _row(tp=1, isl=1024, concurrency=64, ttft_ms=share * 1e3 * 0.99, source="b.csv")
    assert sr.warmed_sources([cold, warm, _row(tp=1, isl=1024, concurrency=8, source="b.csv")]) == {"b.csv"}


def test_disaggregated_rows_are_reached_only_if_the_prefill_pool_keeps_up() -> None:
    # Llama-3.1-8B bf16 on H100: a 4096-token prompt is 4096 x 2 x 7,504,658,432 = 6.148e13 FLOP; an
    # H100 sustains 989.4e12 x 0.803 (largest bf16 GEMM, profiles/h100-sxm.yaml) x 0.75
    # (cost/calibration.py SUSTAINED_TENSOR_EFFICIENCY) = 5.959e14 FLOP/s, 9.69 prompts/s. At
    # TTFT 100 ms and TPOT 10 ms over 128 tokens a request takes 1.37 s, so 16 in flight need
    # 16 / 1.37 = 11.7 prompts/s: more than the one prefill GPU of 1P(tp1) 3D(tp1) sustains, though
    # less than all four GPUs would.
    model = load_model("llama3.1-8b")
    dep = Deployment(
        fw=load_framework("vllm@0.12"), mode="disagg", engine=Engine(tp=1), replicas=3, prefill=Engine(tp=1), prefill_replicas=1
    )
    row = sr.Row(
        key=("vllm", "h100_sxm", "disagg"),
        label="test",
        model=model,
        model_key="meta-llama/Llama-3.1-8B-Instruct",
        hw_name="h100-sxm",
        dep=dep,
        wl=Workload(isl=4096, osl=128, concurrency=16),
        ttft_ms=100.0,
        tpot_ms=10.0,
    )
    est = sa.estimate(model, sa.load_hardware("h100-sxm"), dep, row.wl)
    assert sa.not_reached(row, est)
    two = dataclasses.replace(row, dep=dataclasses.replace(dep, prefill_replicas=2), wl=row.wl)
    assert not sa.not_reached(two, est)  # 19.4 prompts/s on two prefill GPUs


def test_an_aggregated_row_needing_more_gpu_time_than_its_latency_is_not_reached() -> None:
    # Llama-3.1-8B bf16, vLLM tp1 on H100, 8 in flight at 4096/128. Prompts: 8 x 4096 x 2 x 7,504,658,432
    # FLOP at 989.4e12 x 0.803 x 0.75 = 5.9587e14 FLOP/s = 0.8254 s. At most 8 x 4096 / 8192 = 4 of the 127
    # decode steps hold prompt tokens; the other 123 read at least the weights streamed per step (the bf16
    # matmul weights and the output layer, 16,059,998,208 bytes less the 1.05e9-byte embedding table:
    # 15.01e9 bytes) and the batch's KV, 8 x (4096 + 64) x 131,072 bytes = 4.362e9, at 3.35 TB/s x 0.866
    # (profiles/h100-sxm.yaml), the KV at 1 / 1.5 of it (vllm-0.12.yaml kv_decode_slowdown): 5.174 + 1.504 x
    # 1.5 = 5.174 + 2.256 ms. In all 0.8254 + 123 x 7.430 ms = 1.739 s.
    row = _row(tp=1, isl=4096, concurrency=8)
    est = sa.estimate(row.model, sa.load_hardware(row.hw_name), row.dep, row.wl)
    assert sa.gpu_time_needed_s(row, est) == pytest.approx(0.8254 + 123 * (5.174e-3 + 1.5 * 1.504e-3), rel=2e-3)
    # TTFT 100 ms + 127 x 10 ms = 1.37 s: 5.84 prompts/s pass the compute test (9.69/s), but the request
    # would need 1.739 s > 1.05 x 1.37 s of engine time
    assert sa.not_reached(row, est)
    slower = dataclasses.replace(row, tpot_ms=13.0)  # 1.751 s: 1.05 x 1.751 = 1.839 s covers it
    assert not sa.not_reached(slower, est)


def test_the_engine_time_a_row_needs_counts_the_prompts_tp_all_reduce() -> None:
    # tp2: each prompt's 2 x 32 layers all-reduce 4096 x 4096 x 2 bytes = 33.55 MB between the 2 GPUs:
    # 18.4 us + 33.55 MB / 363 GB/s (profiles/h100-sxm.yaml; ring factor 2(n-1)/n = 1) = 110.8 us,
    # 7.094 ms a prompt, 8 prompts 56.75 ms; the prompts' FLOPs now on 2 GPUs (0.4127 s)
    row = _row(tp=2, isl=4096, concurrency=8)
    est = sa.estimate(row.model, sa.load_hardware(row.hw_name), row.dep, row.wl)
    floor = 123 * (est.pools[-1].step.weights + est.pools[-1].step.kv)
    assert sa.gpu_time_needed_s(row, est) == pytest.approx(0.8254 / 2 + 8 * 64 * 110.84e-6 + floor, rel=1e-3)


def _disagg_row(*, tpot_ms: float) -> sr.Row:
    model = load_model("llama3.1-8b")
    dep = Deployment(
        fw=load_framework("vllm@0.12"), mode="disagg", engine=Engine(tp=1), replicas=1, prefill=Engine(tp=1), prefill_replicas=2
    )
    return sr.Row(
        key=("vllm", "h100_sxm", "disagg"),
        label="test",
        model=model,
        model_key="meta-llama/Llama-3.1-8B-Instruct",
        hw_name="h100-sxm",
        dep=dep,
        wl=Workload(isl=4096, osl=128, concurrency=16),
        ttft_ms=100.0,
        tpot_ms=tpot_ms,
    )


def test_a_disaggregated_decode_step_faster_than_its_batch_reads_is_not_reached() -> None:
    # Llama-3.1-8B bf16, 2P 1D(tp1) on H100, 16 in flight at 4096/128, TTFT 100 ms, TPOT 10 ms: a request
    # takes 0.1 + 127 x 0.01 = 1.37 s, so by Little's law 16 x 1.27 / 1.37 = 14.832 are decoding, all on
    # the one decode rank. Its step reads the streamed weights, 15.01e9 bytes at 3.35 TB/s x 0.866 = 5.174
    # ms (as above), and the KV of 14.832 x (4096 + 64) x 131,072 bytes = 8.0877e9, 2.788 ms at the
    # profile's rate, x 1.5 (kv_decode_slowdown) = 4.182 ms: 9.356 ms, under 1.05 x 10 ms.
    row = _disagg_row(tpot_ms=10.0)
    assert sa.decode_floor_s(row) == pytest.approx(5.174e-3 + 1.5 * 2.788e-3, rel=2e-3)
    est = sa.estimate(row.model, sa.load_hardware(row.hw_name), row.dep, row.wl)
    assert sa.prefill_need(row) < 1  # 11.7 prompts/s of the 19.4 two prefill GPUs sustain
    assert not sa.not_reached(row, est)
    # TPOT 7 ms: 0.989 s a request, 14.382 decoding, 5.174 + 1.5 x 2.703 = 9.229 ms > 1.05 x 7 ms
    fast = dataclasses.replace(row, tpot_ms=7.0)
    assert sa.decode_floor_s(fast) == pytest.approx(5.174e-3 + 1.5 * 2.703e-3, rel=2e-3)
    assert sa.not_reached(fast, est)
    assert sa.reach_note(fast).startswith("decode floor 9.2 ms")


def test_a_disaggregated_row_stands_for_decode_batch_x_attention_ranks_x_workers() -> None:
    # aiconfigurator's own reading (sdk/backends/base_backend.py global_bs, inference_session.py): the
    # vLLM Qwen3-235B row 2P 1D(tp1 x attention-DP 8) with decode_batch_size 7 stands for 7 x 8 x 1 = 56
    row = {"decode_batch_size": "7", "decode_attention_dp_size": "8", "decode_num_workers": "1"}
    assert sr.disagg_concurrency(row) == 56
    assert sr.disagg_concurrency({**row, "decode_attention_dp_size": "", "decode_num_workers": "11", "decode_batch_size": "48"}) == 528


def test_an_aggregated_row_with_attention_dp_stands_for_batch_x_attention_ranks() -> None:
    # the same reading for an aggregated engine (global_bs = bs x attention_dp_size): the MiniMax-M2.5
    # B300 row cfg734 (tp4, attention-DP 4, batch_size 128) was run at silicon_concurrency=512
    row = {"batch_size": "128", "attention_dp_size": "4"}
    assert sr.agg_concurrency(row) == 512
    assert sr.agg_concurrency({"batch_size": "64", "attention_dp_size": ""}) == 64


def test_every_aggregated_row_is_read_at_the_concurrency_its_source_names(tmp_path: Path) -> None:
    # the 1,942 aggregated rows whose silicon_data_source records silicon_concurrency, 97 of them with
    # attention-DP ranks: batch_size x attention_dp_size is that concurrency on every one
    checked = with_dp = 0
    for name in ("serving_runs.csv", "serving_runs_newer.csv"):
        with open(sr.HERE / "data" / name) as f:
            for r in csv.DictReader(f):
                named = dict(x.split("=", 1) for x in r["silicon_data_source"].split("; ") if "=" in x)
                if r["mode"] == "agg" and "silicon_concurrency" in named:
                    assert sr.agg_concurrency(r) == int(named["silicon_concurrency"]), r["id"]
                    checked, with_dp = checked + 1, with_dp + (sr.agg_concurrency(r) != int(r["batch_size"]))
    assert (checked, with_dp) == (1942, 97)
    with open(sr.HERE / "data" / "serving_runs_newer.csv") as f:
        head, *lines = f.readlines()
    path = tmp_path / "rows.csv"
    path.write_text(head + "".join(line for line in lines if line.startswith("minimaxm2_5_b300_vllm_fp8_agg_1024x1024_c512_cfg734")))
    (row,) = sr.load_rows(path)
    assert row.wl.concurrency == 512  # batch_size 128 x attention_dp_size 4 (the engine: the test below)


def test_a_row_whose_columns_contradict_its_id_runs_the_layout_its_id_names(tmp_path: Path) -> None:
    # 71 aggregated rows of serving_runs_newer.csv's 2026-04-06 file name tpN_epM in their id and list
    # another layout (tp4 ep4 as tp4 attention-DP 4 ep16, tp8 ep8 as tp64 ep8); their measurements
    # are those of the id's layout (Kimi-K2.5 B200 vLLM 0.17 8192/1024: "tp4 ep4" c4 254 ms / 9.8 ms,
    # the 2026-03-25 tp4 ep4 run at c4 232 ms / 8.8 ms; c64 1279 / 33.5 against 1321 / 33.1)
    with open(sr.HERE / "data" / "serving_runs_newer.csv") as f:
        head, *lines = f.readlines()
    picked = [line for line in lines if line.split(",")[0].endswith(("_c4_tp4_ep4_1301", "_c64_tp8_ep8_1499", "_c32_tp2_ep2_1384"))]
    path = tmp_path / "rows.csv"
    path.write_text(head + "".join(picked))
    skipped: list[str] = []
    rows = sr.load_rows(path, skipped)
    got = sorted((r.model.name, r.dep.engine.tp, r.dep.engine.dp, r.dep.engine.ep, r.wl.concurrency) for r in rows)
    assert got == [("kimi-k2", 4, 1, 4, 4), ("minimax-m2.5", 2, 1, 2, 32), ("qwen3.5-397b-a17b", 8, 1, 8, 64)]
    assert skipped == []
    assert sr.id_layout({"id": "x_agg_8192x1024_c4_tp4_0_ep4_0_569"}) == (4, 4)
    assert sr.id_layout({"id": "minimaxm2_5_b300_vllm_fp8_agg_8192x1024_c128_cfg733"}) is None


def test_a_row_that_repeats_a_named_run_runs_that_runs_layout(tmp_path: Path) -> None:
    # qwen3_5_b200_sglang_fp8_agg_8192x1024_c64_cfg615 (a database dump, no layout in its id) repeats the
    # columns (tp16, moe_tp4 x ep4) and both measurements, to every digit, of ..._c64_tp4_ep4_1451: the
    # same run, read as tp4 ep4
    with open(sr.HERE / "data" / "serving_runs_newer.csv") as f:
        head, *lines = f.readlines()
    twin = next(line for line in lines if line.startswith("qwen3_5_b200_sglang_fp8_agg_8192x1024_c64_cfg615,"))
    named = next(line for line in lines if line.split(",")[0].endswith("_c64_tp4_ep4_1451"))
    assert twin.split(",")[-2:] == named.split(",")[-2:]
    path = tmp_path / "rows.csv"
    path.write_text(head + twin)
    (alone,) = sr.load_rows(path)
    assert (alone.dep.engine.tp, alone.dep.engine.dp, alone.dep.engine.ep) == (16, 1, 4)  # nothing says otherwise
    path.write_text(head + twin + named)
    got = [(r.dep.engine.tp, r.dep.engine.dp, r.dep.engine.ep, r.wl.concurrency) for r in sr.load_rows(path)]
    assert got == [(4, 1, 4, 64), (4, 1, 4, 64)]


def test_a_vllm_row_that_records_ep_as_attention_dp_runs_tp_n_ep_n(tmp_path: Path) -> None:
    # every vLLM row of serving_runs_newer.csv with attention-DP ranks lists tp N, attention-DP N, ep N x N
    # (97 rows); the 65 whose id or twin names a layout name tpN_epN. The database dumps that name none
    # read the same: minimaxm2_5_b300_vllm_fp8_agg_1024x1024_c512_cfg734 (tp4, attention-DP 4, ep16; 728 ms
    # / 31.7 ms, the B300 tp4 run at c512 764 / 36.3) is tp4 ep4 on 4 GPUs at 128 x 4 = 512 requests, and
    # kimik2_5_b200_vllm_fp4_agg_8192x1024_c4_cfg635 (twin of ..._c4_tp4_ep4_1301) is tp4 ep4 alone
    with open(sr.HERE / "data" / "serving_runs_newer.csv") as f:
        head, *lines = f.readlines()
    picked = [
        line
        for line in lines
        if line.startswith(("minimaxm2_5_b300_vllm_fp8_agg_1024x1024_c512_cfg734,", "kimik2_5_b200_vllm_fp4_agg_8192x1024_c4_cfg635,"))
    ]
    path = tmp_path / "rows.csv"
    path.write_text(head + "".join(picked))
    got = sorted(
        (r.model.name, r.dep.engine.tp, r.dep.engine.dp, r.dep.engine.ep, r.dep.gpus, r.wl.concurrency) for r in sr.load_rows(path)
    )
    assert got == [("kimi-k2", 4, 1, 4, 4, 4), ("minimax-m2.5", 4, 1, 4, 4, 512)]
    base = {"backend": "vllm", "tp_size": "2", "attention_dp_size": "2", "moe_tp_size": "1", "moe_ep_size": "4"}
    assert sr.vllm_ep_as_dp(base) == (2, 2)
    assert sr.vllm_ep_as_dp({**base, "backend": "sglang"}) is None  # SGLang's columns are read as given
    assert sr.vllm_ep_as_dp({**base, "moe_ep_size": "2"}) is None  # ep is not tp x dp
    assert sr.vllm_ep_as_dp({**base, "tp_size": "1", "attention_dp_size": "1", "moe_ep_size": "1"}) is None
    counted = 0
    with open(sr.HERE / "data" / "serving_runs_newer.csv") as f:
        for r in csv.DictReader(f):
            if r["backend"] == "vllm" and r["mode"] == "agg" and sr._int(r["attention_dp_size"]) > 1:
                assert sr.vllm_ep_as_dp(r) is not None, r["id"]
                counted += 1
    assert counted == 97


def test_the_campaign_launched_disaggregated_pools_with_their_batch_and_fp8_kv() -> None:
    row = {
        "backend": "vllm",
        "mode": "disagg",
        "isl": "4000",
        "prefill_batch_size": "1",
        "decode_batch_size": "24",
        "silicon_data_source": "source_file=x.csv; image=nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.8.0; dynamo_version=0.8.0",
    }
    assert launch_args(row, "prefill") == EngineArgs(max_batch_size=1)
    assert launch_args(row) == EngineArgs(max_batch_size=24)  # vLLM: no --max-num-batched-tokens printed
    trt = {**row, "backend": "trtllm"}
    assert launch_args(trt, "prefill") == EngineArgs(max_batch_size=1, max_num_tokens=5500)  # isl + 1500
    assert launch_args(trt) == EngineArgs(max_batch_size=24, max_num_tokens=24)
    sgl = {**row, "backend": "sglang"}  # --max-prefill-tokens isl + 1500 on both pools
    assert launch_args(sgl, "prefill") == EngineArgs(max_batch_size=1, max_prefill_tokens=5500)
    assert launch_args(sgl) == EngineArgs(max_batch_size=24, max_prefill_tokens=5500)
    assert kv_dtype(row) == "fp8"
    assert kv_dtype({**row, "silicon_data_source": ""}) == "auto"


def test_the_dynamo_campaign_rows_aggregated_and_disaggregated_run_fp8_kv(monkeypatch: pytest.MonkeyPatch) -> None:
    # serving_runs.SOURCE.md: 7 disaggregated and 8 aggregated rows name one campaign, gtl_job_id
    # 23364591 (Dynamo 0.8.0), whose generator sets kvcache_quant_mode = "fp8" on SM >= 89
    # (aiconfigurator sdk/task.py _get_quant_mode, commit 5e0243eb1); the other rows keep auto
    path = sr.HERE / "data" / "serving_runs.csv"
    with path.open() as f:
        campaign = Counter(
            (r["silicon_data_source"].split(";")[0].rsplit("/data/", 1)[-1], r["mode"])
            for r in csv.DictReader(f)
            if "gtl_job_id=23364591" in r["silicon_data_source"]
        )
    assert Counter(mode for _, mode in campaign.elements()) == {"agg": 8, "disagg": 7}
    monkeypatch.setattr(sr, "warmed_sources", lambda rows: set())  # not what is tested here (seconds)
    rows = sr.load_rows(path)
    assert Counter((r.source, r.dep.mode) for r in rows if r.dep.kv_dtype == "fp8") == campaign
    assert sum(r.dep.kv_dtype == "auto" for r in rows) == len(rows) - 15


@pytest.mark.parametrize("version,mode,mixed", [("0.5.6.post2", "agg", True), ("0.5.8.post1", "agg", True), ("0.5.1.post1", "agg", None)])
def test_sglang_rows_launched_with_mixed_chunks(version: str, mode: str, mixed: bool | None) -> None:
    # aiconfigurator's generator rule sets enable_mixed_chunk for aggregated SGLang engines (07a377923); its
    # 0.5.6.post2 and 0.5.8 templates came after (c46a56b02); 0.5.1.post1 rows keep
    # SGLang's defaults, and --max-prefill-tokens is not applied (serving_campaign._sglang gives the rows)
    from benchmarks.serving_campaign import launch_args

    args = launch_args({"backend": "sglang", "backend_version": version, "mode": mode, "isl": "1000"})
    assert (args.mixed_chunk, args.max_prefill_tokens, args.max_batch_size) == (mixed, None, None)


def test_a_fit_runs_the_rows_on_the_values_tried_and_prints_them_as_yaml() -> None:
    # --fit NAME@VERSION: each trial value runs the version's rows (with_framework), the others untouched;
    # the result prints as the `value:` lines of that version's data file, only the fields fitted for it
    vllm, other = _row(tp=1, isl=1024, concurrency=4), _row(tp=2, isl=1024, concurrency=4)
    other = dataclasses.replace(other, dep=dataclasses.replace(other.dep, fw=load_framework("sglang@0.5.1")))
    trial = dataclasses.replace(load_framework("vllm@0.12"), step_overhead_s=0.004)
    moved = sa.with_framework([vllm, other], trial)
    assert moved[0].dep.fw is trial and moved[1] is other
    assert sa.fitted_fields(load_framework("trtllm@1.0")) == ["step_overhead_s", "ttft_overhead_s", "prefill_slowdown", "eager_layer_s"]
    text = sa.fitted_yaml(trial)
    assert text.splitlines()[:3] == ["# autopar/data/frameworks/vllm-0.12.yaml, fitted values:", "step_overhead_s:", "  value: 0.004"]
    assert "moe_decode_slowdown:\n  value: 1.5" in text and "host_request_s" not in text


def test_the_inferencex_vllm_rows_run_their_scripts_flags() -> None:
    # SemiAnalysisAI/InferenceX benchmarks/single_node/minimaxm2.5_fp8_b200.sh from bddbf4031 (the image
    # v0.19.0-cu130): --gpu-memory-utilization 0.90 --kv-cache-dtype fp8 --max-num-batched-tokens $((ISL * 2));
    # before it (v0.17.0-cu130): --gpu-memory-utilization 0.95 and no KV dtype.
    src = "db-dump/2026-04-27; config_id=733; silicon_concurrency=128; measured=2026-04-17T00:00:00.000Z; workflow_run_id=758; "
    row = {
        "backend": "vllm",
        "mode": "agg",
        "backend_version": "0.19.0",
        "model_path": "MiniMaxAI/MiniMax-M2.5",
        "precision": "fp8",
        "system": "b200_sxm",
        "isl": "8192",
        "batch_size": "128",
        "attention_dp_size": "1",
        "silicon_data_source": src + "vllm/vllm-openai:v0.19.0-cu130",
    }
    assert launch_args(row) == EngineArgs(memory_fraction=0.9, max_num_tokens=16384)
    assert kv_dtype(row) == "fp8"
    old = {**row, "silicon_data_source": src + "vllm/vllm-openai:v0.17.0-cu130"}
    assert launch_args(old) == EngineArgs(memory_fraction=0.95)
    assert kv_dtype(old) == "auto"
    # kimik2.5_int4_h200.sh: --gpu-memory-utilization 0.95 --max-num-seqs $CONC (128 x 1 rank)
    kimi = {**row, "model_path": "moonshotai/Kimi-K2.5", "precision": "int4", "system": "h200_sxm"}
    kimi["silicon_data_source"] = "source_file=2026-04-06.csv; model=Kimi-K2.5; image=vllm/vllm-openai:v0.16.0"
    assert launch_args(kimi) == EngineArgs(memory_fraction=0.95, max_batch_size=128)
    # kimik2.5_fp4_b200.sh gained the 2 x ISL budget on 2026-04-20 (6c3acebfa), the image unchanged
    fp4 = {**kimi, "precision": "fp4", "system": "b200_sxm", "isl": "1024"}
    fp4["silicon_data_source"] = src.replace("2026-04-17", "2026-04-20") + "vllm/vllm-openai:v0.17.0"
    assert launch_args(fp4) == EngineArgs(memory_fraction=0.9, max_num_tokens=2048, max_batch_size=128)
    fp4["silicon_data_source"] = src.replace("2026-04-17", "2026-03-27") + "vllm/vllm-openai:v0.17.0"
    assert launch_args(fp4) == EngineArgs(memory_fraction=0.9, max_batch_size=128)
    # a row of no InferenceX entry (no image, another engine) keeps the defaults
    assert launch_args({**row, "silicon_data_source": "source_file=kimi-k2.5-gap-analysis.csv"}) == EngineArgs()
    assert launch_args({**row, "backend": "sglang"}) == EngineArgs()


def test_the_inferencex_gb200_vllm_rows_run_their_recipes_engines() -> None:
    # kimik2.5-fp4-gb200-dynamo-vllm, recipe 1k1k disagg-gb200-1p1d-dep4-dep16: prefill tensor-parallel-size 1,
    # data-parallel-size 4, max-num-seqs 4096, max-num-batched-tokens 16384; decode data-parallel-size 16,
    # max-num-seqs 4096, max-num-batched-tokens 10240; gpu-memory-utilization 0.9. The file lists tp4 ep4 / tp16 ep16.
    row = {
        "backend": "vllm",
        "mode": "disagg",
        "isl": "1024",
        "prefill_num_workers": "1",
        "decode_num_workers": "1",
        "prefill_batch_size": "1",
        "decode_batch_size": "256",
        "silicon_data_source": "db-dump/2026-04-27; config_id=697; measured=2026-04-07; vllm/vllm-openai:v0.18.0-cu130",
    }
    assert launch_args(row, "prefill") == EngineArgs(max_batch_size=4096, max_num_tokens=16384, memory_fraction=0.9)
    assert launch_args(row) == EngineArgs(max_batch_size=4096, max_num_tokens=10240, memory_fraction=0.9)
    pre, dec = sr.recipe_engines(row, Engine(tp=4, ep=4), Engine(tp=16, ep=16))
    assert (pre, dec) == (Engine(tp=1, dp=4, ep=4), Engine(tp=1, dp=16, ep=16))
    # 8k1k disagg-gb200-1p4d-dep4-tep4: the four decode engines are tp4 (tep4), max-num-seqs 16
    tep = {**row, "isl": "8192", "decode_num_workers": "4"}
    assert launch_args(tep) == EngineArgs(max_batch_size=16, max_num_tokens=10240, memory_fraction=0.9)
    assert sr.recipe_engines(tep, Engine(tp=4, ep=4), Engine(tp=4, ep=4)) == (Engine(tp=1, dp=4, ep=4), Engine(tp=4, ep=4))
    # the Dynamo 0.8.0 campaign's disaggregated rows keep their generator's reading
    other = {**row, "silicon_data_source": "dynamo_version=0.8.0"}
    assert launch_args(other, "prefill") == EngineArgs(max_batch_size=1)
    assert sr.recipe_engines(other, Engine(tp=4, ep=4), Engine(tp=16, ep=16)) == (Engine(tp=4, ep=4), Engine(tp=16, ep=16))


def test_the_inferencex_gb200_trtllm_rows_run_their_recipes_engines() -> None:
    # kimik2.5-fp4-gb200-dynamo-trt, NVIDIA/srt-slurm sa-submission-q2-2026 (f61dbba8) recipe
    # ISL1K_OSL1K/STP/ctx1dep4_gen4tep8_batch128_allconc_eplb0_mtp0.yaml: prefill max_batch_size 16,
    # max_num_tokens 16384, free_gpu_memory_fraction 0.4; decode max_batch_size 128, max_num_tokens 128, 0.9.
    # The file's decode_batch_size is the concurrency over the engines (668 / 4 = 167), not the recipe's cap.
    row = {
        "backend": "trtllm",
        "mode": "disagg",
        "system": "gb200",
        "isl": "1024",
        "prefill_batch_size": "1",
        "decode_num_workers": "4",
        "decode_tp_size": "8",
        "decode_batch_size": "167",
        "silicon_data_source": "config_id=759; nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:1.1.0-dev.2",
    }
    assert launch_args(row, "prefill") == EngineArgs(max_batch_size=16, max_num_tokens=16384, memory_fraction=0.4)
    assert launch_args(row) == EngineArgs(max_batch_size=128, max_num_tokens=128, memory_fraction=0.9)
    # ISL1K ctx1dep4_gen5tep4_batch8: decode 8; ISL8K: prefill max_batch_size 2 (two 8192-token prompts a
    # step in 16384 tokens), gen5tep4_batch16, gen4tep4_batch32, gen4tep8_batch1
    assert launch_args({**row, "decode_num_workers": "5", "decode_tp_size": "4"}).max_batch_size == 8
    k8 = {**row, "isl": "8192"}
    assert launch_args(k8, "prefill") == EngineArgs(max_batch_size=2, max_num_tokens=16384, memory_fraction=0.4)
    assert launch_args({**k8, "decode_num_workers": "5", "decode_tp_size": "4"}).max_batch_size == 16
    assert launch_args({**k8, "decode_tp_size": "4"}).max_batch_size == 32
    assert launch_args(k8).max_batch_size == 1
    # another image (the blank-version GLM-5 rows) keeps the Dynamo 0.8.0 generator's reading
    other = {**row, "silicon_data_source": "source_file=2026-03-25.csv; model=GLM-5"}
    assert launch_args(other, "prefill") == EngineArgs(max_batch_size=1, max_num_tokens=2524)
    assert launch_args(other) == EngineArgs(max_batch_size=167, max_num_tokens=167)


def test_the_inferencex_dp_attention_rows_run_tp1_ranks(tmp_path: Path) -> None:
    # minimaxm2.5_fp4_b300.sh: DP_ATTENTION=true -> --tensor-parallel-size=1 --data-parallel-size=$TP
    # --enable-expert-parallel; config 727 is minimaxm2.5-fp4-b300-vllm's { tp: 2, ep: 2, dp-attn: true }.
    # The file lists it tp2 attention-DP 2 ep4 and batch_size 512 a rank: 2 ranks of tp 1, ep 2, 1024 requests.
    assert _layouts_of(tmp_path, "minimaxm2_5_b300_vllm_fp4_agg_1024x1024_c1024_cfg727") == [(1, 2, 2, 2, 1024)]


def test_the_fp8_b300_dp_attention_entry_ran_tp2_ep2(tmp_path: Path) -> None:
    # minimaxm2.5_fp8_b300.sh at 0c2467c15 (2026-04-21, which added { tp: 2, ep: 2, dp-attn: true } as config 827)
    # reads no DP_ATTENTION: --tensor-parallel-size=$TP --enable-expert-parallel, one tp 2 ep 2 engine, as 735.
    assert _layouts_of(tmp_path, "minimaxm2_5_b300_vllm_fp8_agg_1024x1024_c1024_cfg827") == [(2, 1, 2, 2, 1024)]


def _layouts_of(tmp_path: Path, run: str) -> list[tuple[int, int, int, int, int]]:
    """(tp, dp, ep, GPUs, concurrency) of each row of serving_runs_newer.csv's run `run`, as load_rows reads them."""
    with open(sr.HERE / "data" / "serving_runs_newer.csv") as f:
        lines = f.readlines()
    path = tmp_path / "rows.csv"
    path.write_text(lines[0] + "".join(line for line in lines if line.startswith(run + ",")))
    return [(r.dep.engine.tp, r.dep.engine.dp, r.dep.engine.ep, r.dep.gpus, r.wl.concurrency) for r in sr.load_rows(path)]


def test_the_inferencex_sglang_rows_run_their_scripts_flags() -> None:
    # SemiAnalysisAI/InferenceX benchmarks/single_node/qwen3.5_fp8_b200.sh (efd49e50b .. 626932a11):
    # --mem-fraction-static 0.82 --kv-cache-dtype fp8_e4m3 --chunked-prefill-size 32768 --max-prefill-tokens 32768
    # --max-running-requests 128, on lmsysorg/sglang:v0.5.9-cu129-amd64 and (from 6a5dad463) v0.5.9-cu130-amd64.
    src = "db-dump/2026-04-27; config_id=618; silicon_concurrency=16; measured=2026-03-24T00:00:00.000Z; workflow_run_id=336; "
    row = {
        "backend": "sglang",
        "mode": "agg",
        "backend_version": "0.5.9",
        "model_path": "Qwen/Qwen3.5-397B-A17B",
        "precision": "fp8",
        "system": "b200_sxm",
        "isl": "8192",
        "batch_size": "16",
        "attention_dp_size": "1",
        "silicon_data_source": src + "lmsysorg/sglang:v0.5.9-cu130-amd64",
    }
    # every script: --disable-radix-cache (prefix_cache False); --mamba-ssm-dtype bfloat16 in the H200 fp8 (2116fc435)
    # and B300 fp8 / fp4 (563248391) scripts, not the B200 fp8 (01fa35cfe) nor the B300 bf16 one
    # --scheduler-recv-interval 10, 30 at CONC >= 16 (B200 fp8 at efd49e50b and 626932a11, B300 fp4 8acbd08b7 and
    # bf16 32274d6c1); 10 (B300 fp8, c0f62a2ef); none (H200 fp8, f65d6b4b1)
    b200 = EngineArgs(
        memory_fraction=0.82, max_num_tokens=32768, max_batch_size=128, max_prefill_tokens=32768, prefix_cache=False, recv_interval=30
    )
    assert launch_args(row) == b200
    assert launch_args({**row, "batch_size": "8"}).recv_interval == 10
    assert kv_dtype(row) == "fp8"
    # qwen3.5_fp8_b300.sh (c0f62a2ef): 0.8, --max-running-requests $CONC (64), 16384 / 16384
    b300 = {**row, "system": "b300_sxm", "batch_size": "64", "backend_version": "0.5.10.post1"}
    b300["silicon_data_source"] = src + "lmsysorg/sglang:v0.5.10.post1-cu130"
    assert launch_args(b300) == EngineArgs(
        memory_fraction=0.8,
        max_num_tokens=16384,
        max_batch_size=64,
        max_prefill_tokens=16384,
        prefix_cache=False,
        ssm_state_dtype="bf16",
        recv_interval=10,
    )
    # qwen3.5_bf16_b300.sh (32274d6c1) names no KV dtype: the bf16 checkpoint's auto
    bf16 = {**b300, "precision": "bf16"}
    assert launch_args(bf16) == EngineArgs(
        memory_fraction=0.82, max_num_tokens=32768, max_batch_size=128, max_prefill_tokens=32768, prefix_cache=False, recv_interval=30
    )
    assert kv_dtype(bf16) == "auto"
    # qwen3.5_fp8_h200.sh (f65d6b4b1): no --max-prefill-tokens
    h200 = {**row, "system": "h200_sxm", "silicon_data_source": "source_file=2026-03-25.csv; image=lmsysorg/sglang:v0.5.9-cu129-amd64"}
    assert launch_args(h200) == EngineArgs(
        memory_fraction=0.8, max_num_tokens=16384, max_batch_size=128, prefix_cache=False, ssm_state_dtype="bf16"
    )
    # the B300 rows of v0.5.9-cu130-amd64 (no B300 script then) and a row of no image keep the defaults
    assert launch_args({**b300, "silicon_data_source": "image=lmsysorg/sglang:v0.5.9-cu130-amd64"}) == EngineArgs()
    assert launch_args({**row, "silicon_data_source": "source_file=qwen3.5-397b-gap-analysis.csv"}) == EngineArgs()
    # InferenceX's client (RANDOM_RANGE_RATIO 0.8, benchmark-tmpl.yml) for its rows; fixed lengths otherwise
    assert sr.client_range_ratio(row) == sr.client_range_ratio(h200) == 0.8
    assert sr.client_range_ratio({**row, "silicon_data_source": "source_file=qwen3.5-397b-gap-analysis.csv"}) == 1.0


def test_the_inferencex_sglang_mtp_rows_are_skipped_and_their_copies_too(tmp_path: Path) -> None:
    # lmsysorg/sglang:v0.5.9-cu130 ran qwen3.5-fp8-b200-sglang-mtp alone (EAGLE, 35d4bb367); the gap-analysis
    # file repeats its B200 tp4 1024/1024 c4 run (338.34 ms / 6.33 ms) without an image, and repeats the
    # non-MTP tp8 1024/1024 c4 run (304.65 / 8.33; the 2026-03-24 v0.5.9-cu130-amd64 run) that runs its script.
    with open(sr.HERE / "data" / "serving_runs_newer.csv") as f:
        lines = f.readlines()
    ids = (
        "2026_03_25_qwen3_5_397b_b200_sxm_sglang_fp8_agg_1024x1024_c4_tp4_0_ep1_0_",
        "qwen3_5_397b_gap_analysis_qwen3_5_397b_gap_analysis_b200_sxm_sglang_fp8_agg_1024x1024_c4_tp4_ep1_16,",
        "2026_03_25_qwen3_5_397b_b200_sxm_sglang_fp8_agg_1024x1024_c4_tp8_0_ep1_0_",
        "qwen3_5_397b_gap_analysis_qwen3_5_397b_gap_analysis_b200_sxm_sglang_fp8_agg_1024x1024_c4_tp8_ep1_37,",
    )
    picked = [line for line in lines if line.startswith(ids)]
    path = tmp_path / "rows.csv"
    path.write_text(lines[0] + "".join(picked))
    skipped: list[str] = []
    rows = sr.load_rows(path, skipped)
    assert skipped == [f"ran MTP speculative decoding, which serve estimate does not price ({len(picked) - len(rows)} rows)"]
    launched = {(r.dep.engine.tp, r.dep.args.max_num_tokens, r.dep.args.max_batch_size, r.dep.kv_dtype) for r in rows}
    assert launched == {(8, 32768, 128, "fp8")}
    assert len(rows) == 2 and len(picked) == 4


def test_the_inferencex_sglang_tp2_ep2_entry_runs_on_two_gpus(tmp_path: Path) -> None:
    # config 736 is qwen3.5-fp4-b300-sglang's { tp: 2, ep: 2 } (8acbd08b7), listed tp4 expert-TP 2 ep 2
    with open(sr.HERE / "data" / "serving_runs_newer.csv") as f:
        lines = f.readlines()
    picked = [line for line in lines if line.startswith("qwen3_5_b300_sglang_fp4_agg_1024x1024_c64_cfg73")]
    path = tmp_path / "rows.csv"
    path.write_text(lines[0] + "".join(picked))
    got = sorted((r.source, r.dep.engine.tp, r.dep.engine.ep, r.dep.gpus) for r in sr.load_rows(path))
    assert got == [("config 736 run 765", 2, 2, 2), ("config 737 run 765", 4, 1, 4)]


def test_repeats_group_one_run_per_release_and_measure_their_spread() -> None:
    base = _row(tp=1, isl=1024, concurrency=16)
    same = [dataclasses.replace(base, release="0.16.0", ttft_ms=t, tpot_ms=p) for t, p in ((884.0, 64.0), (196.0, 16.0))]
    other_release = dataclasses.replace(base, release="0.17.0", ttft_ms=100.0)
    other_label = dataclasses.replace(base, release="0.16.0", label="other", ttft_ms=50.0)
    found = sa.repeats([*same, other_release, other_label])
    assert len(found) == 1  # one release, one label: the two 0.16.0 rows alone
    spread, rows = found[0]
    assert rows == same
    assert spread == pytest.approx(884.0 / 196.0)  # TTFT 4.51x apart; TPOT 64 / 16 = 4.0x
    twin = dataclasses.replace(same[1], tpot_ms=80.0)  # TPOT 5x apart, TTFT 1x
    assert sa.repeats([same[1], twin])[0][0] == pytest.approx(5.0)
