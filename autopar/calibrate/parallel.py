"""A plan applied with torch-native pieces: DTensor TP/SP, FSDP2, pipelining.

- mesh (pp, dp, tp), tp innermost as in Megatron's rank order;
- the layers are cut into pp * vpp chunks as cost/layout.py cuts them; this
  rank builds chunks r, r + pp, ... (embedding on chunk 0, final norm and
  output on the last);
- tensor parallel in torchtitan's layout (``parallelize_module``): Q/K/V and
  w1/w3 column-parallel, wo and w2 row-parallel, norms ``SequenceParallel``
  under SP, the embedding row-parallel, the output column-parallel gathered
  to full logits;
- FSDP2 ``fully_shard`` on every block and on the chunk's root with bf16
  compute and fp32 gradient reduction; ZeRO-3 reshards blocks after forward,
  ZeRO-2 keeps them (``reshard_after_forward=False``); the root never does;
- pipeline: ``Schedule1F1B`` for vpp 1, ``ScheduleInterleaved1F1B`` above;
- context parallel, all-gather form (torch's ``context_parallel`` has no CPU
  path): rank r of the cp group holds sequence chunks r and 2cp-1-r, every
  attention gathers K and V (``all_gather_tensor_autograd``) and applies a
  causal mask of its positions against the gathered ones; FSDP shards over
  dp x cp.
"""

from __future__ import annotations

from typing import Any, cast

import torch
from torch import nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)

from autopar.calibrate.llama import Block, Llama
from autopar.calibrate.request import cp_positions
from autopar.cost.traffic import rank_chunks
from autopar.spec.layout import chunk_sizes
from autopar.spec.model import ModelSpec
from autopar.spec.plan import Plan


def make_mesh(device: str, plan: Plan) -> DeviceMesh:
    """(pp, dp, cp, tp): Megatron's rank order, tp innermost."""
    return init_device_mesh(device, (plan.pp, plan.dp, plan.cp, plan.tp), mesh_dim_names=("pp", "dp", "cp", "tp"))


def shard_mesh(mesh: DeviceMesh, plan: Plan) -> DeviceMesh:
    """FSDP shards over dp x cp (CP ranks hold the same weights), as Megatron's optimizer and torchtitan do."""
    return mesh["dp", "cp"]._flatten("dp_cp") if plan.cp > 1 else mesh["dp"]


def build_chunks(model: ModelSpec, plan: Plan, pp_rank: int, device: torch.device) -> list[tuple[int, Llama]]:
    """(chunk index, module) for every chunk this pipeline rank holds, same seed on every rank."""
    sizes = chunk_sizes(model.layers, plan.pp * plan.vpp)
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    last = len(sizes) - 1
    out = []
    for c in rank_chunks(plan, pp_rank):
        torch.manual_seed(1234)
        with torch.device(device):
            m = Llama(
                layers=model.layers,
                hidden=model.hidden_size,
                heads=model.num_attention_heads,
                kv_heads=model.num_kv_heads,
                head_dim=model.head_dim,
                ffn=model.ffn_hidden_size,
                activation=model.ffn_activation,
                vocab=model.vocab_size,
                seq_len=model.seq_len,
            )
        keep = range(starts[c], starts[c] + sizes[c])
        for i in range(model.layers):
            if i not in keep:
                del m.layers[str(i)]
        if c != 0:
            m.tok_embeddings = None
        if c != last:
            m.norm = None
            m.output = None
        out.append((c, m))
    return out


def apply_tp(m: Llama, mesh: DeviceMesh, *, sp: bool) -> None:
    seq: Any = Shard(1) if sp else Replicate()
    top: dict[str, Any] = {}
    if m.tok_embeddings is not None:
        top["tok_embeddings"] = RowwiseParallel(input_layouts=Replicate(), output_layouts=seq)
    if m.output is not None:
        if sp:
            top["norm"] = SequenceParallel()
        top["output"] = ColwiseParallel(input_layouts=seq, output_layouts=Replicate())
    if top:
        parallelize_module(m, mesh, top)
    for module in m.layers.values():
        block = cast(Block, module)
        plan: dict[str, Any] = {
            "attention": PrepareModuleInput(input_layouts=(seq, None, None), desired_input_layouts=(Replicate(), None, None)),
            "attention.wq": ColwiseParallel(),
            "attention.wk": ColwiseParallel(),
            "attention.wv": ColwiseParallel(),
            "attention.wo": RowwiseParallel(output_layouts=seq),
            "feed_forward": PrepareModuleInput(input_layouts=(seq,), desired_input_layouts=(Replicate(),)),
            "feed_forward.w1": ColwiseParallel(),
            "feed_forward.w2": RowwiseParallel(output_layouts=seq),
        }
        if block.feed_forward.w3 is not None:
            plan["feed_forward.w3"] = ColwiseParallel()
        if sp:
            plan["attention_norm"] = SequenceParallel()
            plan["ffn_norm"] = SequenceParallel()
        parallelize_module(block, mesh, plan)


def apply_fsdp(m: Llama, mesh: DeviceMesh, *, zero: int) -> None:
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in m.layers.values():
        fully_shard(block, mesh=mesh, mp_policy=policy, reshard_after_forward=zero >= 3)
    fully_shard(m, mesh=mesh, mp_policy=policy, reshard_after_forward=False)


def parallelize(model: ModelSpec, plan: Plan, mesh: DeviceMesh, device: torch.device) -> list[tuple[int, nn.Module]]:
    pp_rank = mesh["pp"].get_local_rank()
    chunks = build_chunks(model, plan, pp_rank, device)
    sharding = shard_mesh(mesh, plan)
    for _, m in chunks:
        if plan.cp > 1:
            rank = mesh["cp"].get_local_rank()
            positions = torch.tensor(cp_positions(model.seq_len, plan.cp, rank), device=device)
            gathered = torch.tensor([p for r in range(plan.cp) for p in cp_positions(model.seq_len, plan.cp, r)], device=device)
            m.enable_context_parallel(mesh["cp"].get_group(), positions, gathered)
        if plan.tp > 1:
            apply_tp(m, mesh["tp"], sp=plan.sp)
        apply_fsdp(m, sharding, zero=plan.zero)
    return [(c, m) for c, m in chunks]
