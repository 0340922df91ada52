"""Meters: saved tensors per block, collectives by kind, state bytes per rank.

- ``SavedTensorMeter``: a ``saved_tensors_hooks`` pack hook that adds up the
  distinct storages autograd keeps while a block's forward runs, per block and
  micro-batch. Parameters and buffers (whatever the module holds as such at
  that moment, FSDP's unsharded bf16 copies included) are not activations.
- ``CollectiveMeter``: a ``TorchDispatchMode`` that sees every c10d and
  functional collective (FSDP2's, DTensor's, the pipeline's send/recv) and adds
  up calls and the larger buffer of each, by kind.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

# c10d op (or functional collective) name -> kind, as cost/traffic.py names them
KINDS = {
    "all_gather_into_tensor": "all_gather",
    "_allgather_base_": "all_gather",
    "allgather_": "all_gather",
    "allgather_into_tensor_coalesced_": "all_gather",
    "all_gather_into_tensor_coalesced": "all_gather",
    "reduce_scatter_tensor": "reduce_scatter",
    "_reduce_scatter_base_": "reduce_scatter",
    "reduce_scatter_": "reduce_scatter",
    "reduce_scatter_tensor_coalesced_": "reduce_scatter",
    "reduce_scatter_tensor_coalesced": "reduce_scatter",
    "all_reduce": "all_reduce",
    "allreduce_": "all_reduce",
    "allreduce_coalesced_": "all_reduce",
    "all_reduce_coalesced": "all_reduce",
    "all_to_all_single": "all_to_all",
    "alltoall_base_": "all_to_all",
    "alltoall_": "all_to_all",
    "send": "send_recv",
    "recv_": "send_recv",
    "recv_any_source_": "send_recv",
    "broadcast_": "broadcast",
}
NOT_COLLECTIVES = {"wait_tensor", "barrier", "monitored_barrier", "_wrap_tensor_autograd"}


def local(t: torch.Tensor) -> torch.Tensor:
    """The local shard of a DTensor, the tensor itself otherwise."""
    to_local = getattr(t, "to_local", None)
    return to_local() if to_local is not None else t


def _ptr(t: torch.Tensor) -> int:
    return int(local(t).untyped_storage().data_ptr())


class SavedTensorMeter:
    """Bytes of the distinct storages autograd saves during each block's forward."""

    def __init__(self, chunks: list[nn.Module]) -> None:
        self._chunks = chunks
        self._block: str | None = None
        self._seen: set[int] = set()
        self._skip: set[int] = set()
        self.bytes: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()
        for chunk in chunks:
            layers: Any = chunk.layers
            for name, block in layers.items():
                block.register_forward_pre_hook(self._enter(name, chunk))
                block.register_forward_hook(self._leave)

    def _enter(self, name: str, chunk: nn.Module) -> Any:
        def hook(module: nn.Module, args: Any) -> None:
            self._block = name
            self.calls[name] += 1
            self._seen = set()
            self._skip = {_ptr(p) for p in module.parameters()} | {_ptr(b) for b in chunk.buffers()}

        return hook

    def _leave(self, module: nn.Module, args: Any, out: Any) -> None:
        self._block = None

    def _pack(self, t: torch.Tensor) -> torch.Tensor:
        if self._block is not None:
            storage = local(t).untyped_storage()
            ptr = storage.data_ptr()
            if ptr not in self._skip and ptr not in self._seen:
                self._seen.add(ptr)
                self.bytes[self._block] += storage.nbytes()
        return t

    def reset(self) -> None:
        self.bytes.clear()
        self.calls.clear()

    def per_block(self) -> tuple[float, int]:
        """(mean bytes per block and micro-batch, blocks seen)."""
        blocks = [b for b in self.calls if self.calls[b]]
        if not blocks:
            return 0.0, 0
        return sum(self.bytes[b] / self.calls[b] for b in blocks) / len(blocks), len(blocks)

    def hooks(self) -> Any:
        return torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)


def _nbytes(x: Any) -> int:
    if isinstance(x, torch.Tensor):
        return x.numel() * x.element_size()
    if isinstance(x, (list, tuple)):
        return sum(_nbytes(y) for y in x)
    return 0


class CollectiveMeter(TorchDispatchMode):
    """Calls and bytes (the larger buffer) of every collective, by kind."""

    def __init__(self) -> None:
        super().__init__()
        self.bytes: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()
        self.unknown: set[str] = set()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if func.namespace in ("c10d", "_c10d_functional"):
            name = func.__name__.split(".")[0]
            kind = KINDS.get(name)
            if kind is None:
                if name not in NOT_COLLECTIVES:
                    self.unknown.add(name)
                return out
            sizes = [_nbytes(a) for a in args]
            if func.namespace == "_c10d_functional":
                sizes.append(_nbytes(out))
            self.bytes[kind] += max(sizes, default=0)
            self.calls[kind] += 1
        return out


def state_bytes(chunks: list[nn.Module], opt: torch.optim.Optimizer) -> tuple[int, int, int, int]:
    """(parameter, gradient, optimizer-moment, optimizer-scalar) bytes held locally."""
    params = grads = moments = scalars = 0
    for chunk in chunks:
        for p in chunk.parameters():
            lp = local(p)
            params += lp.numel() * lp.element_size()
            if p.grad is not None:
                lg = local(p.grad)
                grads += lg.numel() * lg.element_size()
    for state in opt.state.values():
        for value in state.values():
            if isinstance(value, torch.Tensor):
                lv = local(value)
                size = lv.numel() * lv.element_size()
                if value.dim() > 0:
                    moments += size
                else:
                    scalars += size
    return params, grads, moments, scalars


def by_kind(counter: Counter[str], steps: int) -> dict[str, float]:
    return {k: v / steps for k, v in sorted(counter.items())}
