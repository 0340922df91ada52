"""benchmarks/serving_campaign.py _vllm: vLLM's aggregated rows keep vLLM's defaults (no sourced launch)."""

from __future__ import annotations

from autopar.spec.serve import DEFAULT_ARGS
from benchmarks import serving_campaign as sc


def test_aggregated_vllm_rows_keep_vllms_defaults() -> None:
    h200 = {
        "backend": "vllm",
        "mode": "agg",
        "batch_size": "9",
        "silicon_data_source": "source_file=/x/data/h200_sxm/vllm/0.12.0/Qwen_Qwen3-235B-A22B-FP8.csv; silicon_concurrency=9",
    }
    assert sc.launch_args(h200) == DEFAULT_ARGS
    # a Dynamo 0.8.0 row's batch_size is the concurrency over workers the file does not count
    dynamo = {
        "backend": "vllm",
        "mode": "agg",
        "batch_size": "48",
        "silicon_data_source": "source_file=/x/data/h100_sxm/vllm/0.12.0/qwen3_32b.csv; measured=2026-01-23; dynamo_version=0.8.0",
    }
    assert sc.launch_args(dynamo) == DEFAULT_ARGS
