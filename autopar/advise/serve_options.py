"""The serve commands' launch options as EngineArgs: every engine's, and a disaggregated pool's own.

One reading for the CLI (autopar/cli/serve.py), the Python API (autopar/api/serving.py) and the serving
benchmark (cli/serve.py parse_launch): a flag not given keeps the framework's default, a pool's own flag
overrides the shared one (EngineArgs.over, ServeContext.pool_args)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autopar.errors import SpecError
from autopar.spec.serve import POOL_ARGS, EngineArgs

# the options' parameter names, shared and per pool (prefill_max_batch_size, ...)
LAUNCH_PARAMS = (
    *POOL_ARGS,
    "mixed_chunk",
    "max_prefill_tokens",
    "recv_interval",
    "disable_prefix_cache",
    "ssm_state_dtype",
    *(f"{pool}_{name}" for pool in ("prefill", "decode") for name in POOL_ARGS),
)


def launch_args(params: Mapping[str, Any]) -> tuple[EngineArgs, EngineArgs, EngineArgs]:
    """(every engine's, the prefill pool's own, the decode pool's own) launch settings of the options in `params`."""
    shared = EngineArgs(
        max_num_tokens=params.get("max_num_tokens"),
        max_batch_size=params.get("max_batch_size"),
        memory_fraction=params.get("memory_fraction"),
        mixed_chunk=params.get("mixed_chunk") or None,
        max_prefill_tokens=params.get("max_prefill_tokens"),
        recv_interval=params.get("recv_interval"),
        prefix_cache=False if params.get("disable_prefix_cache") else None,
        ssm_state_dtype=params.get("ssm_state_dtype"),
    )
    pools = []
    for pool in ("prefill_", "decode_"):
        try:
            pools.append(EngineArgs(**{name: params.get(pool + name) for name in POOL_ARGS}))
        except SpecError as exc:  # name the pool's own parameter (EngineArgs names its field)
            raise SpecError(str(exc).replace("`", f"`{pool}", 1)) from None
    return shared, pools[0], pools[1]
