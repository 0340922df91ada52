"""The Python API's training questions: suggest and estimate, as `autopar suggest` and `autopar estimate`.

Each calls the CLI's advise/ use case and builds its result from the --json document the CLI prints.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from autopar.api.results import EstimateResult, PlanResult, SuggestResult, build


def _plan(doc: Mapping[str, Any]) -> PlanResult:
    return build(PlanResult, doc)


def _context(
    model: str,
    *,
    gpus: int | None,
    nodes: int | None,
    hardware: str | None,
    stack: str | None,
    global_batch: int | None,
    seq_len: int | None,
    dtype: str,
    headroom: str | None,
    emit: str | None,
    stack_options: Mapping[str, str] | None = None,
) -> tuple[Any, Any]:
    from autopar.advise import launch
    from autopar.advise import train as advise
    from autopar.spec.job import DEFAULT_HEADROOM

    want = launch.request(emit, out=None, torchtitan_config=None)
    ctx = advise.context(
        model,
        hardware=hardware,
        gpus=gpus,
        nodes=nodes,
        global_batch=global_batch,
        seq_len=seq_len,
        dtype=dtype,
        stack=launch.stack_for(emit, stack),
        headroom=DEFAULT_HEADROOM if headroom is None else headroom,
        stack_options=[f"{k}={v}" for k, v in (stack_options or {}).items()],
    )
    return want, ctx


def suggest(
    model: str,
    *,
    gpus: int | None = None,
    nodes: int | None = None,
    hardware: str | None = None,
    stack: str | None = None,
    global_batch: int | None = None,
    seq_len: int | None = None,
    dtype: str = "bf16",
    top: int = 10,
    headroom: str | None = None,
    emit: str | None = None,
    stack_options: Mapping[str, str] | None = None,
) -> SuggestResult:
    """Search every parallel plan for a training job and rank them (`autopar suggest`; same options)."""
    from autopar.advise import launch
    from autopar.advise import train as advise
    from autopar.errors import SpecError
    from autopar.render.report import suggestion_dict

    if top < 1:
        raise SpecError(f"`top` must be at least 1, got {top}")
    want, ctx = _context(
        model,
        gpus=gpus,
        nodes=nodes,
        hardware=hardware,
        stack=stack,
        global_batch=global_batch,
        seq_len=seq_len,
        dtype=dtype,
        headroom=headroom,
        emit=emit,
        stack_options=stack_options,
    )
    result = advise.suggest(ctx)
    launched = launch.prepare(want, result.ctx, result.plan_order)
    doc = suggestion_dict(result, top, launch=launched)
    return build(SuggestResult, doc, recommended=_plan(doc), plans=tuple(_plan(p) for p in doc["plans"]), _json=json.dumps(doc, indent=2))


def estimate(
    model: str,
    *,
    gpus: int | None = None,
    nodes: int | None = None,
    tp: int = 1,
    pp: int = 1,
    vpp: int = 1,
    cp: int = 1,
    ep: int = 1,
    etp: int = 1,
    cp_comm: str | None = None,
    mbs: int = 1,
    recompute: str = "none",
    recompute_modules: str | Sequence[str] | None = None,
    zero: int | None = None,
    sp: bool = True,
    hardware: str | None = None,
    stack: str | None = None,
    global_batch: int | None = None,
    seq_len: int | None = None,
    dtype: str = "bf16",
    headroom: str | None = None,
    emit: str | None = None,
    stack_options: Mapping[str, str] | None = None,
) -> EstimateResult:
    """One plan, explained (`autopar estimate`; same options). dp = gpus / (tp * pp * cp)."""
    from autopar.advise import launch
    from autopar.advise import train as advise
    from autopar.render.report import explained_dict

    want, ctx = _context(
        model,
        gpus=gpus,
        nodes=nodes,
        hardware=hardware,
        stack=stack,
        global_batch=global_batch,
        seq_len=seq_len,
        dtype=dtype,
        headroom=headroom,
        emit=emit,
        stack_options=stack_options,
    )
    modules = recompute_modules if recompute_modules is None or isinstance(recompute_modules, str) else (",".join(recompute_modules))
    result = advise.explain(
        ctx,
        tp=tp,
        pp=pp,
        cp=cp,
        vpp=vpp,
        ep=ep,
        etp=etp,
        cp_comm=cp_comm,
        mbs=mbs,
        recompute=recompute,
        zero=zero,
        sp=sp,
        recompute_modules=modules,
    )
    launched = launch.prepare(want, result.ctx, result.estimate.plan)
    doc = explained_dict(result, launch=launched)
    return build(EstimateResult, doc, plan=_plan(doc), _json=json.dumps(doc, indent=2))
