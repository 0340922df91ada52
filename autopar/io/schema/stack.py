"""An execution-stack YAML (autopar/io/stacks.py, autopar/spec/stack.py)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, Strict, StringConstraints

from autopar.io.schema.fields import (
    _I,
    Fraction,
    Memory,
    Text,
    Texts,
    Version,
    _choices,
    _int,
    _num,
    _rate,
    _Strict,
)
from autopar.spec import limits as lim
from autopar.spec.plan import CP_COMMS, RECOMPUTE_MODULES, ZERO_STAGES
from autopar.spec.stack import ACTIVATION_SAVES, ATTENTION_KERNELS, DP_GRANULARITY, LAUNCHERS, SELECTIVE_POLICIES

Bytes = Annotated[float, _num(lim.MAX_ELEMENT_BYTES)]
Bytes0 = Annotated[float, _num(lim.MAX_ELEMENT_BYTES, inclusive=True)]
HostUs = Annotated[float, _num(lim.MAX_HOST_US, inclusive=True)]
Ratio = Annotated[float, _rate(lim.MIN_ATTENTION_RATIO, lim.MAX_ATTENTION_RATIO)]
SeqX = Annotated[float, _num(lim.MAX_SEQ)]
RatioCurve = Annotated[
    list[Annotated[tuple[Annotated[SeqX, Strict()], Annotated[Ratio, Strict()]], Strict(False)]],
    Field(min_length=1, max_length=lim.MAX_HISTOGRAM_BINS),
]
Axis = Literal["dp", "tp", "pp", "cp", "ep"]
Zero = Literal[0, 1, 2, 3]
assert Zero.__args__ == ZERO_STAGES  # type: ignore[attr-defined]


class StackKernels(_Strict):
    attention: Literal["fa2", "fa3", "cudnn", "sdpa", "triton", "unfused"]
    attention_vs_fa3: RatioCurve  # [seq_len, throughput over FA3's] pairs
    compiled: bool = False
    elementwise_passes: Annotated[float, _num(lim.MAX_PASSES)]
    layer_overhead_us: HostUs
    fp8_cast_bytes: Bytes0
    logit_bytes: Bytes
    moe_host_us: HostUs = 0.0
    kv_repeated: bool = False  # K/V reach the attention op repeated to the query heads (repeat_kv)
    score_bytes: Annotated[tuple[Bytes0, Bytes0], Strict(False)] = (0.0, 0.0)  # [forward, backward], unfused only


class StackOverlap(_Strict):
    tp: Fraction
    cp: bool = False
    ep: bool = False
    dp: Fraction
    dp_gather: Fraction | None = None  # the parameter all-gather's share hidden, where it differs from dp's


class StackCollectives(_Strict):
    dp_granularity: Literal["bucket", "layer"]
    dp_bucket_params: Annotated[float, _num(lim.MAX_BUCKET_PARAMS, inclusive=True)] = 0.0
    grad_reduce_bytes: Bytes
    fp8_grad_reduce_bytes: Bytes
    cp_fp32_grads: bool = False  # CP backward: fp32 dQ/dK/dV, dK/dV rotated in fp32 (PyTorch context_parallel)
    tp_fp8_gather: bool = False  # under FP8, the TP (SP) all-gathers carry FP8 (torchao Float8 TP styles)


class StackMemory(_Strict):
    selective: Literal["attention", "op"]
    fp8_weight_copy_bytes: Bytes0
    fp8_weight_copy_sharded: bool = False
    fp8_saves_fp8_inputs: bool = False
    fp8_gather: bool = False
    pp_reshard: bool = True
    pp_stage_buffers: Annotated[int, _int(0, lim.MAX_STAGE_BUFFERS), _I] = 0
    fixed_overhead_gib: Memory
    allocator_fragmentation: Fraction
    activation_saves: Literal["fused", "eager-torch"] = "fused"
    fsdp_master: bool = False
    gather_bytes: Bytes = 2.0
    root_gathered: bool = False
    logit_peak_bytes: Bytes0 = 0.0
    logit_peak_bytes_tp: Bytes0 = 0.0
    tp_saves_gathered: bool = False
    moe_saves_expert_output: bool = True
    optimizer_bytes: Bytes = 12.0  # per parameter: fp32 master + Adam m, v (10: master as 16-bit remainders)
    fp8_optimizer_bytes: Bytes = 12.0  # the same under the FP8 recipe


class StackRules(_Strict):
    parallelisms: Annotated[list[Axis], Field(min_length=1, max_length=5)]  # must include dp (checked by the loader)
    cp_comms: Annotated[list[Literal["ring", "allgather"]], Field(min_length=1, max_length=2)]  # the first is the default
    zero_stages: Annotated[list[Zero], Field(min_length=1, max_length=4)]
    vpp: bool = False
    equal_stages: bool = False
    ep_over_tp: bool = False
    experts_whole_with_ep: bool = False  # experts split like the MLP (etp = tp) without EP, whole (etp 1) with EP
    pipeline_counts_embedding: bool = False
    pipeline_split: Literal["front", "middle"] = "front"  # how layers are cut into pipeline chunks
    recompute_modules: Annotated[
        list[Literal["core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts"]], Field(max_length=7)
    ] = []  # noqa: RUF012 (a pydantic model: each instance gets its own copy)


OptionValue = Annotated[str, StringConstraints(min_length=1, max_length=40, pattern=r"^[A-Za-z0-9_.+-]+$")]
StackField = Annotated[str, StringConstraints(pattern=r"^(kernels|overlap|collectives|memory|plan_rules)\.[a-z0-9_]+$")]


class StackOption(_Strict):
    """A recipe fact a user may set (--stack-opt KEY=VALUE): each choice sets stack fields, or a number sets one."""

    help: Text  # what it is, the framework's own flag, and its source
    choices: Annotated[dict[OptionValue, dict[StackField, Any]], Field(min_length=2, max_length=8)] | None = None
    number: StackField | None = None  # the field the value sets (bounded as that field is)


class StackFile(_Strict):
    """An execution-stack YAML (format in autopar/io/stacks.py)."""

    schema_version: Version
    name: Text
    version: OptionValue | None = None  # the framework version it describes (NAME@VERSION; the file name's)
    description: str = ""
    launcher: Literal["megatron", "torchtitan", "deepspeed", "none"]
    source: Text | None = None  # the framework version the numbers describe
    kernels: StackKernels
    overlap: StackOverlap
    collectives: StackCollectives
    memory: StackMemory
    plan_rules: StackRules
    options: Annotated[dict[OptionValue, StackOption], Field(max_length=32)] | None = None
    citations: Texts | None = None


assert _choices(StackKernels, "attention") == ATTENTION_KERNELS
assert _choices(StackCollectives, "dp_granularity") == DP_GRANULARITY
assert _choices(StackMemory, "selective") == SELECTIVE_POLICIES
assert _choices(StackMemory, "activation_saves") == ACTIVATION_SAVES
assert _choices(StackFile, "launcher") == LAUNCHERS
assert _choices(StackRules, "cp_comms") == CP_COMMS
assert _choices(StackRules, "recompute_modules") == RECOMPUTE_MODULES
