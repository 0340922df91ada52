"""Execution-stack profiles: built-in names (``autopar/data/stacks/*.yaml``) or a stack YAML file.

The schema (version 1) groups the fields of :class:`autopar.spec.stack.StackProfile`:

```yaml
schema_version: 1
name: torchtitan
description: one line
launcher: torchtitan                 # what --emit writes: megatron | torchtitan | deepspeed | none
source: pytorch/torchtitan @ 9dec370 # the framework version the numbers describe
kernels: {attention: fa2, attention_vs_fa3: [[512, 0.67], ...], compiled: true, elementwise_passes: 1,
          layer_overhead_us: 0, fp8_cast_bytes: 6, logit_bytes: 10, moe_host_us: 0}  # moe_host_us optional
overlap: {tp: 0.6, cp: false, ep: false, dp: 0.9}
collectives: {dp_granularity: layer, dp_bucket_params: 0, grad_reduce_bytes: 4, fp8_grad_reduce_bytes: 4}
memory: {selective: op, fp8_weight_copy_bytes: 0, fp8_weight_copy_sharded: false, fp8_saves_fp8_inputs: false,
         fp8_gather: true, pp_reshard: false, pp_stage_buffers: 2, fixed_overhead_gib: 2,
         allocator_fragmentation: 0.07, activation_saves: fused,   # activation_saves optional: fused | eager-torch
         fsdp_master: true, gather_bytes: 2, root_gathered: true,  # optional (false, 2, false)
         logit_peak_bytes: 14, logit_peak_bytes_tp: 18,            # optional (0: logit_bytes)
         tp_saves_gathered: true}                                   # optional (false)
plan_rules: {parallelisms: [dp, tp, pp, cp], cp_comms: [allgather], zero_stages: [2, 3], vpp: true,
             equal_stages: false, ep_over_tp: false, pipeline_counts_embedding: false,
             experts_whole_with_ep: false,  # optional: etp = tp without EP, 1 with EP (torchtitan)
             recompute_modules: []}   # optional: the modules --recompute-modules may name (Megatron's)
citations: {kernels.attention: "...", ...}   # dotted field -> source; every number is cited
```

Every number has a physical range (:class:`autopar.io.schema.StackFile`, bounds from
:mod:`autopar.spec.limits`, listed in docs/limits.md); a value outside it is a
one-line error naming the file, the field and the bound.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from autopar.errors import SpecError
from autopar.io.strict import did_you_mean, load_mapping
from autopar.spec.hardware import Curve
from autopar.spec.stack import StackProfile

SCHEMA_VERSION = 1
DEFAULT_STACK = "megatron"  # the stack of the published Megatron-Core runs the cost model was first checked on


def builtin_stacks() -> list[str]:
    root = resources.files("autopar") / "data" / "stacks"
    return sorted(p.name[:-5] for p in root.iterdir() if p.name.endswith(".yaml"))


def load_stack(ref: str | None) -> StackProfile:
    """A built-in stack name, a stack YAML path, or None for the default stack."""
    if ref is not None and not ref.strip():
        raise SpecError("--stack is empty: give a built-in name (see `autopar stacks`) or a stack .yaml")
    ref = DEFAULT_STACK if ref is None else ref
    path = Path(ref)
    if path.suffix.lower() in (".yaml", ".yml"):
        return parse_stack(load_mapping(path), where=str(path))
    names = builtin_stacks()
    if ref not in names:
        raise SpecError(f"--stack: unknown stack '{ref}'{did_you_mean(ref, names)}: one of {', '.join(names)} "
                        "(see `autopar stacks`) or a stack .yaml")
    with resources.as_file(resources.files("autopar") / "data" / "stacks" / f"{ref}.yaml") as p:
        return parse_stack(load_mapping(p), where=str(p))


def parse_stack(data: dict[str, Any], *, where: str) -> StackProfile:
    """A stack mapping (autopar.io.schema.StackFile, every number bounded) as a StackProfile."""
    from autopar.io.schema import StackFile, validate  # pydantic: only once a file is read

    version = data.get("schema_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        raise SpecError(f"{where}: schema_version: stack is from a newer autopar (schema {version}, this one reads "
                        f"{SCHEMA_VERSION})")
    s = validate(StackFile, data, where=where, err=SpecError)
    k, o, c, m, r = s.kernels, s.overlap, s.collectives, s.memory, s.plan_rules
    if "dp" not in r.parallelisms:
        raise SpecError(f"{where}: plan_rules.parallelisms: must include dp")
    xs = [x for x, _ in k.attention_vs_fa3]
    if len(set(xs)) != len(xs):
        raise SpecError(f"{where}: kernels.attention_vs_fa3: expected distinct [seq_len, ratio] pairs")
    pairs = sorted(k.attention_vs_fa3)
    return StackProfile(
        name=s.name, description=s.description, launcher=s.launcher,
        attention_kernel=k.attention, attention_vs_fa3=Curve(xs=tuple(x for x, _ in pairs), ys=tuple(y for _, y in pairs)),
        compiled=k.compiled, elementwise_passes=k.elementwise_passes, layer_overhead_us=k.layer_overhead_us,
        fp8_cast_bytes=k.fp8_cast_bytes, logit_bytes=k.logit_bytes, moe_host_us=k.moe_host_us,
        tp_overlap=o.tp, cp_overlap=o.cp, ep_overlap=o.ep, dp_overlap=o.dp,
        dp_granularity=c.dp_granularity, dp_bucket_params=c.dp_bucket_params, grad_reduce_bytes=c.grad_reduce_bytes,
        fp8_grad_reduce_bytes=c.fp8_grad_reduce_bytes,
        selective=m.selective, fp8_weight_copy_bytes=m.fp8_weight_copy_bytes,
        fp8_weight_copy_sharded=m.fp8_weight_copy_sharded, fp8_saves_fp8_inputs=m.fp8_saves_fp8_inputs,
        fp8_gather=m.fp8_gather, pp_reshard=m.pp_reshard, pp_stage_buffers=m.pp_stage_buffers,
        fixed_overhead_gib=m.fixed_overhead_gib, allocator_fragmentation=m.allocator_fragmentation,
        activation_saves=m.activation_saves, fsdp_master=m.fsdp_master, gather_bytes=m.gather_bytes,
        root_gathered=m.root_gathered, logit_peak_bytes=m.logit_peak_bytes, logit_peak_bytes_tp=m.logit_peak_bytes_tp,
        tp_saves_gathered=m.tp_saves_gathered,
        parallelisms=tuple(r.parallelisms), cp_comms=tuple(r.cp_comms), zero_stages=tuple(r.zero_stages),
        vpp=r.vpp, equal_stages=r.equal_stages, ep_over_tp=r.ep_over_tp, experts_whole_with_ep=r.experts_whole_with_ep,
        pipeline_counts_embedding=r.pipeline_counts_embedding, recompute_modules=tuple(r.recompute_modules),
        citations=tuple((s.citations or {}).items()), path=where,
    )
