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
             recompute_modules: []}   # optional: the modules --recompute-modules may name (Megatron's)
citations: {kernels.attention: "...", ...}   # dotted field -> source; every number is cited
```
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from autopar.errors import SpecError
from autopar.io.strict import Fields, did_you_mean, load_mapping
from autopar.spec.hardware import Curve
from autopar.spec.plan import CP_COMMS, RECOMPUTE_MODULES, ZERO_STAGES
from autopar.spec.stack import (
    ACTIVATION_SAVES,
    ATTENTION_KERNELS,
    DP_GRANULARITY,
    LAUNCHERS,
    SELECTIVE_POLICIES,
    StackProfile,
)

SCHEMA_VERSION = 1
DEFAULT_STACK = "megatron"  # the stack of the published Megatron-Core runs the cost model was first checked on
AXES = ("dp", "tp", "pp", "cp", "ep")


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
    top = Fields(data, f"{where}: ")
    version = top.integer("schema_version")
    if version > SCHEMA_VERSION:
        raise top.fail("schema_version", f"stack is from a newer autopar (schema {version}, this one reads {SCHEMA_VERSION})")
    k, o, c, m, r = (Fields(top.mapping(key) or {}, top.prefix(key))
                     for key in ("kernels", "overlap", "collectives", "memory", "plan_rules"))
    stack = StackProfile(
        name=top.text("name"), description=top.text("description", ""), launcher=top.text("launcher", choices=LAUNCHERS),
        attention_kernel=k.text("attention", choices=ATTENTION_KERNELS),
        attention_vs_fa3=_ratio_curve(k, "attention_vs_fa3"), compiled=k.flag("compiled", False),
        elementwise_passes=k.number("elementwise_passes"), layer_overhead_us=k.number("layer_overhead_us", positive=False),
        fp8_cast_bytes=k.number("fp8_cast_bytes", positive=False), logit_bytes=k.number("logit_bytes"),
        tp_overlap=_fraction(o, "tp"), cp_overlap=o.flag("cp", False), ep_overlap=o.flag("ep", False),
        dp_overlap=_fraction(o, "dp"),
        dp_granularity=c.text("dp_granularity", choices=DP_GRANULARITY),
        dp_bucket_params=c.number("dp_bucket_params", 0.0, positive=False),
        grad_reduce_bytes=c.number("grad_reduce_bytes"), fp8_grad_reduce_bytes=c.number("fp8_grad_reduce_bytes"),
        selective=m.text("selective", choices=SELECTIVE_POLICIES),
        fp8_weight_copy_bytes=m.number("fp8_weight_copy_bytes", positive=False),
        fp8_weight_copy_sharded=m.flag("fp8_weight_copy_sharded", False),
        fp8_saves_fp8_inputs=m.flag("fp8_saves_fp8_inputs", False), fp8_gather=m.flag("fp8_gather", False),
        pp_reshard=m.flag("pp_reshard", True), pp_stage_buffers=m.integer("pp_stage_buffers", 0, minimum=0),
        fixed_overhead_gib=m.number("fixed_overhead_gib"), allocator_fragmentation=_fraction(m, "allocator_fragmentation"),
        activation_saves=m.text("activation_saves", "fused", choices=ACTIVATION_SAVES),
        fsdp_master=m.flag("fsdp_master", False), gather_bytes=m.number("gather_bytes", 2.0),
        root_gathered=m.flag("root_gathered", False),
        logit_peak_bytes=m.number("logit_peak_bytes", 0.0, positive=False),
        logit_peak_bytes_tp=m.number("logit_peak_bytes_tp", 0.0, positive=False),
        tp_saves_gathered=m.flag("tp_saves_gathered", False),
        moe_host_us=k.number("moe_host_us", 0.0, positive=False),
        parallelisms=_choices(r, "parallelisms", AXES), cp_comms=_choices(r, "cp_comms", CP_COMMS),
        zero_stages=tuple(int(z) for z in _choices(r, "zero_stages", ZERO_STAGES)),
        vpp=r.flag("vpp", False), equal_stages=r.flag("equal_stages", False), ep_over_tp=r.flag("ep_over_tp", False),
        pipeline_counts_embedding=r.flag("pipeline_counts_embedding", False),
        recompute_modules=_choices(r, "recompute_modules", RECOMPUTE_MODULES, required=False),
        citations=tuple((str(a), str(b)) for a, b in (top.mapping("citations") or {}).items()),
        path=where,
    )
    top.ignore("source")
    for f in (top, k, o, c, m, r):
        f.finish()
    if "dp" not in stack.parallelisms:
        raise r.fail("parallelisms", "must include dp")
    if not stack.zero_stages:
        raise r.fail("zero_stages", "must give at least one stage")
    return stack


def _fraction(f: Fields, key: str) -> float:
    value = f.number(key, positive=False)
    if not 0 <= value <= 1:
        raise f.fail(key, f"must be a fraction in [0, 1], got {value}")
    return value


def _choices(f: Fields, key: str, allowed: tuple[Any, ...], *, required: bool = True) -> tuple[Any, ...]:
    items = f.sequence(key, required=required) or []
    for item in items:
        if item not in allowed:
            raise f.fail(key, f"unknown value {item!r}; expected some of {', '.join(map(str, allowed))}")
    return tuple(items)


def _ratio_curve(f: Fields, key: str) -> Curve:
    points = f.sequence(key) or []
    pairs = []
    for p in points:
        ok = isinstance(p, list) and len(p) == 2 and all(isinstance(v, int | float) and not isinstance(v, bool) for v in p)
        if not ok or not (p[0] > 0 and 0 < p[1] <= 2):
            raise f.fail(key, f"bad point {p!r}: expected [seq_len > 0, 0 < ratio <= 2]")
        pairs.append((float(p[0]), float(p[1])))
    if not pairs or len({x for x, _ in pairs}) != len(pairs):
        raise f.fail(key, "expected distinct [seq_len, ratio] pairs")
    pairs.sort()
    return Curve(xs=tuple(x for x, _ in pairs), ys=tuple(y for _, y in pairs))
