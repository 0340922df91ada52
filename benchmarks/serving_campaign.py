"""The launch settings each measured serving row ran with, where they differ from the framework's defaults.

The rows of benchmarks/data/serving_runs.csv were measured by a campaign that launched every
engine with its own settings (serving_runs.SOURCE.md). autopar prices a deployment as it is
launched (spec/serve.py EngineArgs, cost/serve_frameworks.py for_deployment), so the benchmark
gives each row the settings its engines ran with. Every value here names the file and commit
it is read from; a backend without a sourced setting runs at its framework's defaults.
"""

from __future__ import annotations

from autopar.spec.serve import DEFAULT_ARGS, EngineArgs


def launch_args(row: dict[str, str], role: str | None = None) -> EngineArgs:
    """The settings the row's engines ran with (role "prefill": a disaggregated row's prefill engines)."""
    backend = row["backend"]
    if backend == "trtllm":
        return _trtllm(row, role)
    if backend == "sglang":
        return _sglang(row, role)
    if backend == "vllm":
        return _vllm(row, role)
    return DEFAULT_ARGS


def _trtllm(row: dict[str, str], role: str | None) -> EngineArgs:
    return DEFAULT_ARGS


def _sglang(row: dict[str, str], role: str | None) -> EngineArgs:
    return DEFAULT_ARGS


def _vllm(row: dict[str, str], role: str | None) -> EngineArgs:
    return DEFAULT_ARGS
