"""Read an emitted Megatron-LM command back into megatron-core's own objects (test helper).

The flag of each ``TransformerConfig`` field is what Megatron-LM's ``ArgumentGroupFactory`` derives
from the dataclass in the installed megatron-core: ``argparse_meta["arg_names"]`` when the field
declares it, else ``--`` + the name with dashes, and ``--no-``/``--disable-`` for a bool that
defaults to True. The few flags Megatron-LM translates by hand (``core_transformer_config_from_args``
and the GPT builder at core_v0.16.1) are handled in ``HAND``; every other emitted word must be one
of the training-loop flags in ``TRAINING`` or the test fails, so a misspelt model flag cannot pass.
"""

from __future__ import annotations

import dataclasses
import shlex
import types
import typing
from typing import Any

# Flags that configure training, data or parallelism, not the network (arguments.py at the pin).
TRAINING = frozenset(
    {
        "--micro-batch-size",
        "--global-batch-size",
        "--use-distributed-optimizer",
        "--overlap-grad-reduce",
        "--overlap-param-gather",
        "--use-megatron-fsdp",
        "--data-parallel-sharding-strategy",
        "--ckpt-format",
        "--num-virtual-stages-per-pipeline-rank",
        "--pipeline-model-parallel-layout",
        "--decoder-first-pipeline-num-layers",
        "--decoder-last-pipeline-num-layers",
        "--seq-length",
        "--mock-data",
        "--data-path",
        "--tokenizer-type",
        "--tokenizer-model",
        "--vocab-size",
        "--train-iters",
        "--lr",
        "--no-bias-gelu-fusion",
        "--group-query-attention",
        "--spec",
        "--dataloader-type",
        "--max-seqlen-per-dp-cp-rank",
        "--hybrid-context-parallel",
        "--calculate-per-token-loss",
    }
)
# Parallel degrees: the test builds the whole model on one rank, so these are read and then reset.
PARALLEL = (
    "tensor_model_parallel_size",
    "pipeline_model_parallel_size",
    "context_parallel_size",
    "expert_model_parallel_size",
    "expert_tensor_parallel_size",
    "sequence_parallel",
    "tp_comm_overlap",
    "overlap_moe_expert_parallel_comm",
    "cp_comm_type",
    "recompute_granularity",
    "recompute_method",
    "recompute_num_layers",
    "pipeline_model_parallel_layout",
    "virtual_pipeline_model_parallel_size",
    "num_layers_in_first_pipeline_stage",
    "num_layers_in_last_pipeline_stage",
    "hybrid_context_parallel",
    "max_seqlen_per_dp_cp_rank",
)
# Flags Megatron-LM maps by hand, and where they go (GPT/Mamba model arguments or config fields).
HAND = frozenset(
    {
        "--swiglu",
        "--squared-relu",
        "--num-experts",
        "--moe-layer-freq",
        "--untie-embeddings-and-output-weights",
        "--position-embedding-type",
        "--rotary-base",
        "--max-position-embeddings",
        "--padded-vocab-size",
        "--hybrid-override-pattern",
        "--multi-latent-attention",
        "--use-rope-scaling",
        "--rope-scaling-factor",
    }
)


def split_command(line: str, script: str) -> dict[str, list[str]]:
    """The words after ``script``, as flag -> its values (empty for a switch); a repeated flag fails."""
    words = shlex.split(line)
    words = words[words.index(script) + 1 :]
    out: dict[str, list[str]] = {}
    flag = None
    for w in words:
        if w.startswith("--"):
            assert w not in out, f"{w} given twice"
            flag = w
            out[w] = []
        else:
            assert flag is not None, f"value {w!r} before any flag"
            out[flag].append(w)
    return out


def _convert(tp: Any, values: list[str]) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        return _convert(inner[0], values)
    if origin is typing.Literal:
        return _convert(type(typing.get_args(tp)[0]), values)
    if origin is list:
        return [_convert(typing.get_args(tp)[0], [v]) for v in values]
    assert len(values) == 1, values
    return tp(values[0]) if tp in (int, float, str) else values[0]


def field_flags(cls: type) -> dict[str, tuple[str, bool | None]]:
    """flag -> (field name, value a switch sets, or None for a flag taking a value)."""
    out: dict[str, tuple[str, bool | None]] = {}
    for f in dataclasses.fields(cls):
        meta = f.metadata.get("argparse_meta", {}) if f.metadata else {}
        dashed = f.name.replace("_", "-")
        if f.type is bool:
            sets = not f.default if isinstance(f.default, bool) else True
            names = meta.get("arg_names") or ([f"--{dashed}"] if sets else [f"--no-{dashed}", f"--disable-{dashed}"])
            out.update(dict.fromkeys(names, (f.name, sets)))
        else:
            for name in meta.get("arg_names") or [f"--{dashed}"]:
                out[name] = (f.name, None)
    return out


def config_kwargs(args: dict[str, list[str]], cls: type) -> tuple[dict[str, Any], set[str]]:
    """TransformerConfig keyword arguments from the emitted flags, and the flags used."""
    import torch.nn.functional as F
    from megatron.core.activations import squared_relu

    flags = field_flags(cls)
    types_ = {f.name: f.type for f in dataclasses.fields(cls)}
    kw: dict[str, Any] = {}
    used = set()
    for flag, values in args.items():
        if flag in flags and flag not in HAND:
            name, sets = flags[flag]
            kw[name] = sets if sets is not None else _convert(types_[name], values)
            used.add(flag)
    if "--swiglu" in args:
        kw.update(gated_linear_unit=True, activation_func=F.silu)
    if "--squared-relu" in args:
        kw["activation_func"] = squared_relu
    if "--num-experts" in args:
        kw["num_moe_experts"] = int(args["--num-experts"][0])
    if "--moe-layer-freq" in args:  # Megatron's moe_freq_type evaluates a list expression
        kw["moe_layer_freq"] = eval(args["--moe-layer-freq"][0], {"__builtins__": {}})
    used |= HAND & set(args)
    return kw, used
