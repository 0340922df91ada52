"""The kernels and host syncs of one eager Megatron-Core MoE layer, counted from its own source (issue 27).

Builds Megatron-Core's MoELayer (the installed megatron-core, 0.16.1 in the project's venv) with the
alltoall token dispatcher, dropless, the aux-loss router with forced load balancing (the Megatron-Bridge
benchmarks' setting), and runs one forward and one backward on the CPU under torch.profiler, world size 1.
A GPU-only call is stood in for (torch.cuda streams and events, current_device, TE's router GEMM, the
expert-parallel RNG fork): none of them launches a kernel of its own but the event's synchronize, which is
counted as the dispatcher's host sync (MoEAlltoAllTokenDispatcher._maybe_dtoh_and_synchronize at
cuda_sync_point). A kernel is an aten op that is not a view or metadata op (NO_KERNEL) and has no such op
below it; on a GPU each is one launch.

Experts are SequentialMLP (the local spec: Transformer Engine is not installed), one MLP per local expert,
so the per-expert count is that path's, not TE GroupedLinear's. Run:
    python benchmarks/moe_host_count.py [--experts 4 8 16] [--topk 4]
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

# aten ops that launch no kernel on a GPU: views, metadata, allocation, conjugate/negative views
# fmt: off
NO_KERNEL = frozenset({
    "view", "reshape", "t", "transpose", "expand", "as_strided", "select", "slice", "unsqueeze", "squeeze", "permute",
    "detach", "_unsafe_view", "empty", "empty_like", "empty_strided", "alias", "lift_fresh", "resize_", "split",
    "split_with_sizes", "chunk", "unbind", "narrow", "view_as", "expand_as", "_reshape_alias", "contiguous",
    "is_nonzero", "result_type", "size", "stride", "numpy_T", "flatten", "unflatten", "squeeze_", "unsqueeze_",
    "set_", "_local_scalar_dense", "item", "to", "_to_copy", "type_as", "movedim", "numel", "dim", "is_same_size",
    "new_empty", "new_empty_strided", "resolve_conj", "resolve_neg", "conj", "_conj", "_neg_view",
    "_has_compatible_shallow_copy_type",
})
# fmt: on
SYNC = "moe_host_count.sync"  # profiler label of the dispatcher's host sync


@dataclass(frozen=True, slots=True)
class Count:
    experts: int  # local experts (world size 1: all of them)
    forward: int  # kernels of the forward
    backward: int  # kernels of the backward
    syncs_forward: int  # host syncs in the forward
    syncs_backward: int  # host syncs in the backward
    before_sync: int  # forward kernels issued before the sync (router, preprocess, permutation)
    after_sync: tuple[str, ...]  # forward kernels after it, in order

    @property
    def to_first_expert(self) -> int:
        """Forward kernels from the host sync to the first expert GEMM: what the drained GPU waits on."""
        return self.after_sync.index("mm") if "mm" in self.after_sync else len(self.after_sync)


class _Event:
    def synchronize(self) -> None:
        with torch.profiler.record_function(SYNC):
            pass


class _Stream:
    def wait_stream(self, _s: Any) -> None:
        pass

    def record_event(self) -> _Event:
        return _Event()

    def __eq__(self, _o: object) -> bool:
        return True

    def __hash__(self) -> int:
        return 0


class _Tracker:
    def fork(self, *_a: Any, **_k: Any) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()


def _cpu_stand_ins() -> None:
    """torch.cuda's streams and device, TE's router GEMM and the expert RNG fork, on a CPU-only torch."""
    torch.cuda.current_device = lambda: "cpu"  # type: ignore[assignment,return-value]
    torch.cuda.Stream = lambda *a, **k: _Stream()  # type: ignore[assignment,misc]
    torch.cuda.current_stream = lambda *a, **k: _Stream()  # type: ignore[assignment]
    torch.cuda.stream = lambda s: contextlib.nullcontext()  # type: ignore[assignment,return-value]
    import megatron.core.transformer.moe.moe_utils as mu

    mu.te_general_gemm = None  # the router's torch.mm path
    mu.get_cuda_rng_tracker = lambda: _Tracker()


@contextlib.contextmanager
def _world() -> Iterator[None]:
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29541")
    torch.distributed.init_process_group("gloo", rank=0, world_size=1)
    try:
        from megatron.core import parallel_state

        parallel_state.initialize_model_parallel()
        yield
    finally:
        torch.distributed.destroy_process_group()


def _kernels(events: Any) -> list[Any]:
    def counts(e: Any) -> bool:
        return bool(e.name.startswith("aten::") and e.name[6:] not in NO_KERNEL)

    def below(e: Any) -> bool:
        return any(counts(c) or below(c) for c in e.cpu_children)

    return sorted((e for e in events if counts(e) and not below(e)), key=lambda e: e.time_range.start)


def _layer(experts: int, topk: int) -> Any:
    from megatron.core.models.gpt.moe_module_specs import get_moe_module_spec
    from megatron.core.process_groups_config import ProcessGroupCollection
    from megatron.core.transformer.spec_utils import build_module
    from megatron.core.transformer.transformer_config import TransformerConfig

    cfg = TransformerConfig(
        num_layers=1, hidden_size=128, ffn_hidden_size=64, num_attention_heads=4, num_moe_experts=experts,
        moe_router_topk=topk, moe_aux_loss_coeff=1e-3, moe_router_load_balancing_type="aux_loss",
        moe_router_force_load_balancing=True, moe_token_dispatcher_type="alltoall", use_cpu_initialization=True,
        add_bias_linear=False, gated_linear_unit=True, activation_func=torch.nn.functional.silu,
        bias_activation_fusion=False,
    )  # fmt: skip
    spec = get_moe_module_spec(use_te=False, num_experts=experts, moe_grouped_gemm=False)
    return build_module(spec, config=cfg, pg_collection=ProcessGroupCollection.use_mpu_process_groups())


def count(experts: int, *, topk: int = 4, tokens: int = 256) -> Count:
    """One forward and one backward of the MoE layer with `experts` local experts, after two warm-up steps."""
    from torch.profiler import ProfilerActivity, profile

    layer = _layer(experts, topk)
    x = torch.randn(tokens, 1, 128, requires_grad=True)
    for _ in range(2):
        layer(x)[0].sum().backward()
    with profile(activities=[ProfilerActivity.CPU]) as fwd:
        out = layer(x)[0]
    with profile(activities=[ProfilerActivity.CPU]) as bwd:
        out.sum().backward()
    syncs = [e.time_range.start for e in fwd.events() if e.name == SYNC]
    kf = _kernels(fwd.events())
    before = [e for e in kf if syncs and e.time_range.start < syncs[0]]
    return Count(
        experts=experts,
        forward=len(kf),
        backward=len(_kernels(bwd.events())),
        syncs_forward=len(syncs),
        syncs_backward=sum(e.name == SYNC for e in bwd.events()),
        before_sync=len(before),
        after_sync=tuple(e.name[6:] for e in kf[len(before) :]),
    )


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description="kernels and host syncs of one eager Megatron-Core MoE layer")
    ap.add_argument("--experts", type=int, nargs="+", default=[4, 8, 16], help="local experts")
    ap.add_argument("--topk", type=int, default=4, help="experts per token (at most the smallest --experts)")
    args = ap.parse_args(argv)
    _cpu_stand_ins()
    with _world():
        for e in args.experts:
            c = count(e, topk=args.topk)
            print(
                f"experts {e:3d}: forward {c.forward} kernels ({c.before_sync} before the host sync, "
                f"{len(c.after_sync)} after, {c.to_first_expert} of them before the first expert GEMM), "
                f"backward {c.backward}; host syncs forward {c.syncs_forward}, backward {c.syncs_backward}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
