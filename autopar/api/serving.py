"""The Python API's serving questions: serve_suggest and serve_estimate, as `autopar serve suggest` and `serve estimate`.

Each calls the CLI's advise/ use case and builds its result from the --json document the CLI prints.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from autopar.api.results import ServeEstimateResult, ServePoint, ServeSuggestResult, build


def _serve_estimate(doc: Mapping[str, Any]) -> ServeEstimateResult:
    return build(ServeEstimateResult, doc, _json=json.dumps(doc, indent=2))


def _launch(params: Mapping[str, Any]) -> dict[str, Any]:
    """options_context's launch settings of the serve functions' keyword arguments (advise/serve_options.py)."""
    from autopar.advise.serve_options import LAUNCH_PARAMS, launch_args

    shared, prefill, decode = launch_args({k: v for k, v in params.items() if k in LAUNCH_PARAMS})
    return {"engine_args": shared, "prefill_args": prefill, "decode_args": decode}


def serve_suggest(
    model: str,
    *,
    gpus: int,
    isl: int = 1024,
    osl: int = 1024,
    hardware: str | None = None,
    ttft_ms: float | None = None,
    tpot_ms: float | None = None,
    framework: str | None = None,
    weights: str = "bf16",
    kv_dtype: str | None = None,
    modes: str | Sequence[str] = "agg,disagg",
    max_num_tokens: int | None = None,
    max_batch_size: int | None = None,
    memory_fraction: float | None = None,
    mixed_chunk: bool = False,
    max_prefill_tokens: int | None = None,
    disable_prefix_cache: bool = False,
    ssm_state_dtype: str | None = None,
    prefill_max_num_tokens: int | None = None,
    prefill_max_batch_size: int | None = None,
    prefill_memory_fraction: float | None = None,
    decode_max_num_tokens: int | None = None,
    decode_max_batch_size: int | None = None,
    decode_memory_fraction: float | None = None,
    emit: str | None = None,
) -> ServeSuggestResult:
    """Search serving deployments (`autopar serve suggest`; same options)."""
    launch = _launch(locals())
    from autopar.advise import serve as advise
    from autopar.advise import serve_launch
    from autopar.render.serve import suggestion_dict

    ctx = advise.options_context(
        model,
        hardware=hardware,
        gpus=gpus,
        framework=framework,
        emit=emit,
        weights=weights,
        kv_dtype="auto" if kv_dtype is None else kv_dtype,
        **launch,
    )
    result = advise.suggest(
        ctx, isl=isl, osl=osl, ttft_ms=ttft_ms, tpot_ms=tpot_ms, modes=advise.parse_modes(modes), kv_dtypes=advise.kv_dtypes(kv_dtype)
    )
    launched = serve_launch.launch(ctx, emit, result.best) if emit and result.best is not None else None
    doc = suggestion_dict(ctx, result, launched)
    return build(
        ServeSuggestResult,
        doc,
        recommended=_serve_estimate(doc["recommended"]),
        pareto=tuple(build(ServePoint, p) for p in doc["pareto"]),
        _json=json.dumps(doc, indent=2),
    )


def serve_estimate(
    model: str,
    *,
    gpus: int,
    tp: int | None = None,
    pp: int | None = None,
    dp: int | None = None,
    ep: int | None = None,
    attention_dp: bool = False,
    concurrency: int = 1,
    isl: int = 1024,
    osl: int = 1024,
    random_range_ratio: float = 1.0,
    hardware: str | None = None,
    framework: str | None = None,
    weights: str = "bf16",
    kv_dtype: str = "auto",
    mode: str = "agg",
    prefill_workers: int | None = None,
    prefill_tp: int | None = None,
    prefill_pp: int | None = None,
    prefill_dp: int | None = None,
    prefill_ep: int | None = None,
    prefill_attention_dp: bool = False,
    decode_workers: int | None = None,
    decode_tp: int | None = None,
    decode_pp: int | None = None,
    decode_dp: int | None = None,
    decode_ep: int | None = None,
    decode_attention_dp: bool = False,
    max_num_tokens: int | None = None,
    max_batch_size: int | None = None,
    memory_fraction: float | None = None,
    mixed_chunk: bool = False,
    max_prefill_tokens: int | None = None,
    recv_interval: int | None = None,
    disable_prefix_cache: bool = False,
    ssm_state_dtype: str | None = None,
    prefill_max_num_tokens: int | None = None,
    prefill_max_batch_size: int | None = None,
    prefill_memory_fraction: float | None = None,
    decode_max_num_tokens: int | None = None,
    decode_max_batch_size: int | None = None,
    decode_memory_fraction: float | None = None,
    emit: str | None = None,
) -> ServeEstimateResult:
    """One serving deployment, explained (`autopar serve estimate`; same options)."""
    launch = _launch(locals())
    from autopar.advise import serve as advise
    from autopar.advise import serve_launch
    from autopar.render.serve import estimate_dict, launch_dict
    from autopar.spec.serve import Workload

    ctx = advise.options_context(
        model,
        hardware=hardware,
        gpus=gpus,
        framework=framework,
        emit=emit,
        weights=weights,
        kv_dtype=kv_dtype,
        **launch,
    )
    dep = advise.deployment(
        ctx,
        mode=mode,
        agg=advise.PoolArgs(tp=tp, pp=pp, dp=dp, ep=ep, attention_dp=attention_dp),
        prefill=advise.PoolArgs(
            tp=prefill_tp, pp=prefill_pp, dp=prefill_dp, ep=prefill_ep, attention_dp=prefill_attention_dp, workers=prefill_workers
        ),
        decode=advise.PoolArgs(
            tp=decode_tp, pp=decode_pp, dp=decode_dp, ep=decode_ep, attention_dp=decode_attention_dp, workers=decode_workers
        ),
    )
    est = advise.explain(ctx, dep, Workload(isl=isl, osl=osl, concurrency=concurrency, random_range_ratio=random_range_ratio))
    launched = serve_launch.launch(ctx, emit, est) if emit else None
    return _serve_estimate({**estimate_dict(ctx, est), **launch_dict(launched)})
