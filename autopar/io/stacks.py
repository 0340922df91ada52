"""Execution-stack profiles: built-in names (``autopar/data/stacks/*.yaml``) or a stack YAML file.

The schema (version 1) groups the fields of :class:`autopar.spec.stack.StackProfile`:

```yaml
schema_version: 1
name: torchtitan
description: one line
launcher: torchtitan                 # what --emit writes: megatron | torchtitan | deepspeed | none
source: pytorch/torchtitan @ 9dec370 # the framework version the numbers describe
kernels: {attention: fa2, attention_vs_fa3: [[512, 0.67], ...], compiled: true, elementwise_passes: 1,
          layer_overhead_us: 0, fp8_cast_bytes: 6, logit_bytes: 10, moe_host_us: 0,
          kv_repeated: true}  # moe_host_us, kv_repeated optional (0, false)
overlap: {tp: 0.6, cp: false, ep: false, dp: 0.9}
collectives: {dp_granularity: layer, dp_bucket_params: 0, grad_reduce_bytes: 4, fp8_grad_reduce_bytes: 4,
              cp_fp32_grads: true, tp_fp8_gather: true}  # cp_fp32_grads, tp_fp8_gather optional (false)
memory: {selective: op, fp8_weight_copy_bytes: 0, fp8_weight_copy_sharded: false, fp8_saves_fp8_inputs: false,
         fp8_gather: true, pp_reshard: false, pp_stage_buffers: 2, fixed_overhead_gib: 2,
         allocator_fragmentation: 0.07, activation_saves: fused,   # activation_saves optional: fused | eager-torch
         fsdp_master: true, gather_bytes: 2, root_gathered: true,  # optional (false, 2, false)
         logit_peak_bytes: 14, logit_peak_bytes_tp: 18,            # optional (0: logit_bytes)
         tp_saves_gathered: true, moe_saves_expert_output: true}    # optional (false, true)
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

from collections.abc import Mapping, Sequence
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

from autopar.errors import SpecError
from autopar.io.cache import builtin
from autopar.io.files import exists
from autopar.io.reading import did_you_mean, load_mapping, shown
from autopar.spec.hardware import Curve
from autopar.spec.stack import StackProfile

SCHEMA_VERSION = 1
DEFAULT_STACK = "megatron"  # the stack of the published Megatron-Core runs the cost model was first checked on
SECTIONS = ("kernels", "overlap", "collectives", "memory", "plan_rules")  # where an option may set a field


def _files() -> dict[str, dict[str, str]]:
    """Built-in stack files: name -> {version: file name}, from data/stacks/<name>-<version>.yaml."""
    out: dict[str, dict[str, str]] = {}
    for p in (resources.files("autopar") / "data" / "stacks").iterdir():
        stem = p.name[:-5] if p.name.endswith(".yaml") else ""
        name, _, version = stem.rpartition("-")
        if name and version[:1].isdigit():
            out.setdefault(name, {})[version] = p.name
    return out


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(x) if x.isdigit() else -1 for x in version.split("."))


def builtin_stacks() -> list[str]:
    """The built-in stack names (each with one or more versions)."""
    return sorted(_files())


def stack_versions(name: str) -> list[str]:
    """The versions of built-in stack `name`, oldest first (the last is the default)."""
    return sorted(_files().get(name, {}), key=_version_key)


def _builtin(ref: str) -> tuple[dict[str, Any], str]:
    """NAME or NAME@VERSION: its mapping (with `extends:` resolved) and its file."""
    name, at, version = ref.partition("@")
    files = _files()
    if name not in files:
        names = sorted(files)
        folder = " (that is a folder)" if exists(Path(ref), folder=True) else ""
        raise SpecError(
            f"`stack`: unknown stack '{name}'{folder}{did_you_mean(name, names)}: one of {', '.join(names)} (see `autopar stacks`) "
            "or a stack .yaml"
        )
    known = stack_versions(name)
    version = version if at else known[-1]
    if version not in files[name]:
        raise SpecError(f"`stack` {ref}: {name} has no version '{version}'; it has {', '.join(known)} (default {known[-1]})")
    with resources.as_file(resources.files("autopar") / "data" / "stacks" / files[name][version]) as p:
        data, where = load_mapping(p), str(p)
    base = data.pop("extends", None)
    if base is not None:  # an older version: the newer file with only what its source says differs
        parent, _ = _builtin(str(base))
        data = _merged(parent, data)
    data.setdefault("version", version)
    return data, where


def _merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`over` laid on `base`: mappings merge key by key, null removes a key, anything else replaces."""
    out = dict(base)
    for key, value in over.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merged(out[key], value)
        else:
            out[key] = value
    return out


def load_stack(ref: str | None, options: Mapping[str, str] | None = None) -> StackProfile:
    """A built-in stack (NAME, NAME@VERSION), a stack YAML path, or None for the default stack, with the
    recipe `options` (KEY -> VALUE, as --stack-opt gives them) applied."""
    if ref is not None and not ref.strip():
        raise SpecError("`stack` is empty: give a built-in name (see `autopar stacks`) or a stack .yaml")
    ref = DEFAULT_STACK if ref is None else ref
    path = Path(ref)
    if path.suffix.lower() in (".yaml", ".yml"):
        data, where = load_mapping(path), str(path)
        if data.get("extends") is not None:  # your own file may extend a built-in version too
            data = _merged(_builtin(str(data.pop("extends")))[0], data)
    elif not options:
        return builtin("stack", ref, StackProfile, lambda: _builtin_stack(ref))
    else:
        data, where = _builtin(ref)
    data = _keys_as_text(data)
    if not options:
        return parse_stack(data, where=where)
    applied = stack = parse_stack(data, where=where)  # the file itself first: its errors name the file
    for key, value in options.items():  # then each option, so that an error names it and what it sets
        data = _with_option(data, key, value, stack=stack)
        try:
            applied = parse_stack(data, where=where)
        except SpecError as exc:
            text = str(exc).removeprefix(f"{where}: ")
            field, _, reason = text.partition(": ")
            said = f"{reason} (it sets {field} of stack {stack.label})" if reason else text
            raise SpecError(f"`stack_opt` {key}={value}: {said}") from None
    return replace(applied, applied=tuple(options.items()))


def _builtin_stack(ref: str) -> StackProfile:
    """A built-in stack without options, read from its files (io/cache.py keeps the value between runs)."""
    data, where = _builtin(ref)
    return parse_stack(_keys_as_text(data), where=where)


def _keys_as_text(data: dict[str, Any]) -> dict[str, Any]:
    """YAML reads `true:` and `2:` as a bool and an int; option values are text (--stack-opt KEY=true)."""
    opts = data.get("options")
    if not isinstance(opts, dict):
        return data
    fixed = {
        k: (
            {**o, "choices": {_text(c): v for c, v in o["choices"].items()}}
            if isinstance(o, dict) and isinstance(o.get("choices"), dict)
            else o
        )
        for k, o in opts.items()
    }
    return {**data, "options": fixed}


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def stack_options(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The options a stack mapping offers: name -> {help, choices | number}."""
    return dict(data.get("options") or {})


def option_lines(ref: str) -> str:
    """A built-in stack's options as one line: KEY (a|b) or KEY (number)."""
    offered = stack_options(_keys_as_text(_builtin(ref)[0]))
    return (
        ", ".join(f"{k} ({'|'.join(sorted(o['choices'])) if o.get('choices') else 'number'})" for k, o in sorted(offered.items())) or "none"
    )


def _with_option(data: dict[str, Any], key: str, value: str, *, stack: StackProfile) -> dict[str, Any]:
    """`data` with option `key` set to `value`, or a one-line error naming the option and what it takes."""
    offered = stack_options(data)
    if key not in offered:
        names = ", ".join(sorted(offered)) or "none"
        raise SpecError(
            f"`stack_opt` {key}: stack {stack.label} has no option '{key}'{did_you_mean(key, list(offered))}"
            f"; its options: {names} (see `autopar stacks`)"
        )
    spec = offered[key]
    if spec.get("choices"):
        choices = spec["choices"]
        if value not in choices:
            ordered = sorted(choices)
            allowed = f"{', '.join(ordered[:-1])} or {ordered[-1]}"
            raise SpecError(f"`stack_opt` {key}: must be {allowed}, got '{value}'")
        sets = dict(choices[value])
    else:
        try:
            number = float(value)
        except ValueError:
            raise SpecError(f"`stack_opt` {key}: must be a number, got '{value}'") from None
        sets = {spec["number"]: number}
    out = dict(data)
    for dotted, v in sets.items():
        section, _, field = dotted.partition(".")
        out[section] = {**out.get(section, {}), field: v}
    return out


def read_options(texts: Sequence[str], recipe: str | None) -> dict[str, str]:
    """--recipe FILE (a YAML mapping of option -> value) and then --stack-opt KEY=VALUE (later wins), as text."""
    out: dict[str, str] = {}
    if recipe is not None:
        if not recipe.strip():
            raise SpecError("`recipe` is empty: give a recipe .yaml")
        doc = load_mapping(Path(recipe))
        for key, value in doc.items():
            if isinstance(value, (dict, list)) or value is None:
                raise SpecError(f"{recipe}: {key}: expected a value (text, number or true/false), got {shown(value)}")
            out[str(key)] = _text(value)
    for text in texts:
        key, eq, value = text.partition("=")
        if not eq or not key.strip() or not value.strip():
            raise SpecError(f"`stack_opt` {text}: expected KEY=VALUE (e.g. grad_reduce=bf16)")
        out[key.strip()] = value.strip()
    return out


def parse_stack(data: dict[str, Any], *, where: str) -> StackProfile:
    """A stack mapping (autopar.io.schema.StackFile, every number bounded) as a StackProfile."""
    from autopar.io.schema import StackFile, validate  # pydantic: only once a file is read

    version = data.get("schema_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        raise SpecError(f"{where}: schema_version: stack is from a newer autopar (schema {version}, this one reads {SCHEMA_VERSION})")
    s = validate(StackFile, data, where=where, err=SpecError)
    k, o, c, m, r = s.kernels, s.overlap, s.collectives, s.memory, s.plan_rules
    if "dp" not in r.parallelisms:
        raise SpecError(f"{where}: plan_rules.parallelisms: must include dp")
    xs = [x for x, _ in k.attention_vs_fa3]
    if len(set(xs)) != len(xs):
        raise SpecError(f"{where}: kernels.attention_vs_fa3: expected distinct [seq_len, ratio] pairs")
    pairs = sorted(k.attention_vs_fa3)
    if (k.attention == "unfused") != any(k.score_bytes):
        raise SpecError(f"{where}: kernels.score_bytes: give them (forward, backward) with attention unfused, and only then")
    for key, opt in (s.options or {}).items():
        _check_option(key, opt, s, where=where)
    return StackProfile(
        name=s.name,
        description=s.description,
        launcher=s.launcher,
        attention_kernel=k.attention,
        attention_vs_fa3=Curve(xs=tuple(x for x, _ in pairs), ys=tuple(y for _, y in pairs)),
        compiled=k.compiled,
        elementwise_passes=k.elementwise_passes,
        layer_overhead_us=k.layer_overhead_us,
        fp8_cast_bytes=k.fp8_cast_bytes,
        logit_bytes=k.logit_bytes,
        moe_host_us=k.moe_host_us,
        attention_kv_repeated=k.kv_repeated,
        score_bytes=(k.score_bytes[0], k.score_bytes[1]),
        tp_overlap=o.tp,
        cp_overlap=o.cp,
        ep_overlap=o.ep,
        dp_overlap=o.dp,
        dp_gather_overlap=o.dp_gather,
        dp_granularity=c.dp_granularity,
        dp_bucket_params=c.dp_bucket_params,
        grad_reduce_bytes=c.grad_reduce_bytes,
        fp8_grad_reduce_bytes=c.fp8_grad_reduce_bytes,
        cp_fp32_grads=c.cp_fp32_grads,
        tp_fp8_gather=c.tp_fp8_gather,
        selective=m.selective,
        fp8_weight_copy_bytes=m.fp8_weight_copy_bytes,
        fp8_weight_copy_sharded=m.fp8_weight_copy_sharded,
        fp8_saves_fp8_inputs=m.fp8_saves_fp8_inputs,
        fp8_gather=m.fp8_gather,
        pp_reshard=m.pp_reshard,
        pp_stage_buffers=m.pp_stage_buffers,
        fixed_overhead_gib=m.fixed_overhead_gib,
        allocator_fragmentation=m.allocator_fragmentation,
        activation_saves=m.activation_saves,
        fsdp_master=m.fsdp_master,
        gather_bytes=m.gather_bytes,
        root_gathered=m.root_gathered,
        logit_peak_bytes=m.logit_peak_bytes,
        logit_peak_bytes_tp=m.logit_peak_bytes_tp,
        tp_saves_gathered=m.tp_saves_gathered,
        moe_saves_expert_output=m.moe_saves_expert_output,
        optimizer_bytes=m.optimizer_bytes,
        fp8_optimizer_bytes=m.fp8_optimizer_bytes,
        parallelisms=tuple(r.parallelisms),
        cp_comms=tuple(r.cp_comms),
        zero_stages=tuple(r.zero_stages),
        vpp=r.vpp,
        equal_stages=r.equal_stages,
        ep_over_tp=r.ep_over_tp,
        experts_whole_with_ep=r.experts_whole_with_ep,
        pipeline_counts_embedding=r.pipeline_counts_embedding,
        pipeline_split=r.pipeline_split,
        recompute_modules=tuple(r.recompute_modules),
        citations=tuple((s.citations or {}).items()),
        path=where,
        version=s.version or "",
    )


def _check_option(key: str, opt: Any, s: Any, *, where: str) -> None:
    """An option names one way to set it (choices or a number) and only fields the stack file has."""
    if (opt.choices is None) == (opt.number is None):
        raise SpecError(f"{where}: options.{key}: give choices or number, not both or neither")
    targets = [opt.number] if opt.number else [f for sets in (opt.choices or {}).values() for f in sets]
    for dotted in targets:
        section, _, name = dotted.partition(".")
        if name not in type(getattr(s, section)).model_fields:
            raise SpecError(f"{where}: options.{key}: {dotted} is not a stack field")
