"""Serving launches: the launch lines of an estimated deployment, or of the best one a framework can start."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from autopar.advise.serve import ServeContext
from autopar.cost.serve_load import ServeEstimate
from autopar.emit.serving import ServeLaunch
from autopar.errors import InfeasibleError, SpecError
from autopar.search.serve import ServeSweep
from autopar.spec.serve import Deployment, Engine, Workload


def unlaunchable(ctx: ServeContext, target: str, dep: Deployment, wl: Workload) -> str | None:
    """Why `target`'s launch lines cannot start `dep` (None: they can). A launch line starts on one host
    (one OS numbering its GPUs for CUDA_VISIBLE_DEVICES): the node, or fewer GPUs where the profile's
    node is a wider NVLink domain (gb200: 4 of 72; HardwareProfile.host_gpus); and the engine's own
    launcher may refuse the layout (emit/vllm.py, sglang.py, trtllm.py)."""
    from autopar.emit import sglang, trtllm, vllm

    node = ctx.hw.host_gpus
    where = "node" if node == ctx.hw.gpus_per_node else "host"
    if (big := max(e.gpus for e in (dep.engine, dep.prefill) if e is not None)) > node:
        return f"an engine of {big} GPUs (tp x pp x attention-dp) spans more than one {ctx.hw.name} {where} ({node} GPUs)"
    emitters = {"vllm": vllm.launch, "sglang": sglang.launch, "trtllm": trtllm.launch}
    try:
        emitters[target](dep, wl)
    except SpecError as exc:
        return str(exc)
    return None


def launch(ctx: ServeContext, target: str, est: ServeEstimate) -> ServeLaunch:
    """The launch lines and benchmark command of an estimated deployment on its framework."""
    from autopar.emit import sglang, trtllm, vllm

    if not est.fits:
        raise SpecError(
            f"`emit={target}`: the deployment does not fit (the weights and one request's KV cache "
            "exceed the memory the framework gives them), so there is no launch line; run without "
            "`emit` to see its memory, or use more GPUs per engine"
        )
    dep, node = est.deployment, ctx.hw.host_gpus
    where = "node" if node == ctx.hw.gpus_per_node else "host"
    if max(e.gpus for e in (dep.engine, dep.prefill) if e is not None) > node:
        raise SpecError(
            f"`emit={target}`: {unlaunchable(ctx, target, dep, est.workload)}; the launch lines autopar "
            f"writes start each engine on one {where} (CUDA_VISIBLE_DEVICES), so there is none for it: run "
            f"without `emit`, or `serve estimate` a layout of at most {node} GPUs per engine"
        )
    emitters = {"vllm": vllm.launch, "sglang": sglang.launch, "trtllm": trtllm.launch}
    if target not in emitters:
        raise SpecError(f"`emit` must be one of {', '.join(emitters)}, got {target!r}")
    if target != est.deployment.framework:
        raise SpecError(
            f"`emit={target}` with `framework={est.deployment.framework}`: the estimate is for "
            f"{est.deployment.framework}; pass `framework={target}`"
        )
    return emitters[target](dep, est.workload, host_gpus=node)


def launch_best(
    ctx: ServeContext, target: str, result: ServeSweep, rerun: Callable[[Callable[[Deployment], bool]], ServeSweep]
) -> ServeLaunch:
    """serve suggest --emit: the recommendation's launch lines or, when `target` cannot launch it, those of
    the best deployment it can launch (`rerun(keep)`: the same sweep over the deployments `keep` keeps,
    picked by the same rule), with one line first saying which one was skipped and why (as training's
    suggest --emit does, advise/launch.py)."""
    best = result.best
    if best is None:
        raise SpecError(f"`emit={target}`: nothing to launch")
    if target != best.deployment.framework:
        return launch(ctx, target, best)  # refused: the estimate is for another framework
    why = unlaunchable(ctx, target, best.deployment, best.workload)
    if why is None:
        return launch(ctx, target, best)
    try:
        other = rerun(lambda dep: unlaunchable(ctx, target, dep, best.workload) is None).best
    except InfeasibleError:
        other = None
    if other is None:
        raise SpecError(
            f"`emit={target}`: the recommended deployment has no launch line ({why}), and none of "
            f"those {target} can launch fits or meets the targets"
        )
    launched = launch(ctx, target, other)
    note = f"# --emit {target}: skipped the recommended {_layout(best)}: {why}; launching the best one {target} can start, {_layout(other)}"
    return replace(launched, servers=(note, *launched.servers))


def _layout(est: ServeEstimate) -> str:
    """A deployment in a few words, with its output tokens/s per GPU."""
    dep = est.deployment

    def one(e: Engine) -> str:
        return f"tp{e.tp} pp{e.pp} dp{e.dp} ep{e.ep}"

    pools = (
        one(dep.engine)
        if dep.prefill is None
        else (f"{dep.prefill_replicas} x prefill {one(dep.prefill)} + {dep.replicas} x decode {one(dep.engine)}")
    )
    if dep.prefill is None:
        pools = f"{dep.replicas} x {pools}"
    return f"{dep.mode} {pools} at concurrency {est.workload.concurrency} ({est.output_tokens_per_s / dep.gpus:,.0f} tok/s/GPU)"
