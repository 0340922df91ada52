"""The tool commands: profile, calibrate (these two run torch), models, hardware, stacks, schema."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from autopar.cli.options import JsonOpt, path_option
from autopar.cli.run import console
from autopar.completions import complete_hardware, complete_model, complete_schema
from autopar.errors import SpecError


def profile(
    out: Annotated[
        Path | None,
        path_option("Where to write the profile (default: the saved-profile path; profile-cpu.yaml beside it for a CPU run)."),
    ] = None,
    quick: Annotated[bool, typer.Option(help="Fewer sizes and repetitions: about 30 s on an 8-GPU node.")] = False,
    device: Annotated[str, typer.Option(help="auto | cuda | cpu")] = "auto",
    nproc: Annotated[int | None, typer.Option(help="Processes to start (default: one per local GPU; 2 gloo processes on CPU).")] = None,
    compare: Annotated[str | None, typer.Option(help="Built-in profile to print the measured numbers against.")] = None,
) -> None:
    """Measure this node (or, under torchrun, these nodes) and save a hardware profile."""
    from autopar.probe.command import run_profile

    run_profile(out=out, quick=quick, device=device, nproc=nproc, compare=compare, console=console())


def calibrate(
    model: Annotated[
        str, typer.Argument(help="Preset name, model .yaml, or Hugging Face config.json (dense models).", autocompletion=complete_model)
    ],
    plan: Annotated[
        list[str] | None,
        typer.Option(
            help="A plan to run, e.g. dp2,tp2,pp1, with any of vppN, cpN, mbsN, "
            "gbN, zeroN, seqN, sp or nosp after a comma; repeat for several (one "
            "process group runs them in turn)."
        ),
    ] = None,
    top: Annotated[int | None, typer.Option(help="Instead of --plan: suggest's best K plans for the processes.")] = None,
    scale_to_fit: Annotated[bool, typer.Option("--scale-to-fit", help="Shrink the model to run in seconds here (says how).")] = False,
    nproc: Annotated[int | None, typer.Option(help="Processes to start (default: one per GPU; 2 on CPU).")] = None,
    device: Annotated[str, typer.Option(help="auto | cuda | cpu")] = "auto",
    steps: Annotated[int, typer.Option(help="Measured steps.")] = 10,
    warmup: Annotated[int, typer.Option(help="Untimed steps first.")] = 2,
    hardware: Annotated[
        str | None,
        typer.Option(
            "--hardware",
            help="Profile for the step-time prediction (default: the saved one, if measured on this device).",
            autocompletion=complete_hardware,
        ),
    ] = None,
    json_out: JsonOpt = False,
    save: Annotated[
        bool,
        typer.Option(
            "--save",
            help="Write the measured corrections into the saved profile; "
            "suggest and estimate then apply them to eager stacks (deepspeed, "
            "llm-foundry) and say so.",
        ),
    ] = False,
) -> None:
    """Run a few real steps of a plan with torch-native parallelism; print predicted vs measured."""
    from autopar.calibrate.command import check_run, run_calibrate
    from autopar.calibrate.save import target

    check_run(steps=steps, warmup=warmup, nproc=nproc, device=device, top=top, plans=len(plan or []))  # every check before any work
    where = target() if save else None
    plans, note = list(plan or []), None
    if top is not None:
        texts, note = top_plans_for(model, top, nproc=nproc, device=device, hardware=hardware, scale=scale_to_fit)
        plans += texts
    done = run_calibrate(
        model,
        plan_texts=plans,
        scale=scale_to_fit,
        nproc=nproc,
        device=device,
        steps=steps,
        warmup=warmup,
        hardware=hardware,
        before_run=note,
    )
    if done is None:
        return
    from autopar.calibrate.save import save as save_corrections
    from autopar.render.calibrate import as_json, lines, saved_line

    saved = save_corrections(done, where) if where is not None else None
    if json_out:
        print(as_json(done, saved))
    else:
        print("\n\n".join("\n".join(lines(c)) for c in done))
        if saved is not None:
            print("\n" + saved_line(saved))


def top_plans_for(
    model: str, k: int, *, nproc: int | None, device: str, hardware: str | None, scale: bool
) -> tuple[list[str], Callable[[], None]]:
    """--top K: suggest's best plans for this many processes, and what says them on stderr (once all is checked)."""
    from autopar.calibrate.command import top_plans, world_size
    from autopar.io.models import load_model
    from autopar.probe.runtime import require_torch, resolve_device

    kind = resolve_device(require_torch("autopar calibrate"), device)
    world = world_size(kind, nproc)
    texts, hw = top_plans(load_model(model), k, world=world, hardware=hardware, scale=scale, kind=kind)

    def note() -> None:
        from autopar.render.text import console as stderr_console
        from autopar.render.text import say

        say(stderr_console(stderr=True), f"--top {k}: suggest's best plans for {world} processes on {hw}: {'; '.join(texts)}", markup=False)

    return texts, note


def models_cmd() -> None:
    """List the built-in model presets."""
    from autopar.io.models import load_model, preset_names
    from autopar.render.text import say, table

    t = table(
        "name",
        "family",
        "params (active)",
        "layers",
        "hidden",
        "heads/kv",
        "seq/max",
        left=("name", "family", "params (active)"),
        wrap=("family", "params (active)"),
    )
    for name in preset_names():
        m = load_model(name)
        params = f"{m.total_params() / 1e9:.1f}B" + (f" ({m.active_params() / 1e9:.1f}B)" if m.moe else "")
        t.add_row(
            name,
            m.family(),
            params,
            str(m.layers),
            str(m.hidden_size),
            f"{m.num_attention_heads}/{m.num_kv_heads}",
            f"{m.seq_len}/{m.max_seq_len}",
        )
    out = console()
    out.print(t)
    say(out, "sources and citations: the `source:` field of each preset in autopar/data/presets/", markup=False)


def hardware_cmd() -> None:
    """List the built-in hardware profiles."""
    from autopar.io.profiles import builtin_names, load_hardware
    from autopar.render.text import say, table
    from autopar.spec.hardware import DEFAULT_HARDWARE

    t = table("name", "GPU", "GiB", "bf16 TFLOP/s", "GPUs/node", left=("name", "GPU"), wrap=("GPU",))
    described = []
    for name in builtin_names():
        hw = load_hardware(name)
        t.add_row(name, hw.gpu_name, f"{hw.memory_bytes / 2**30:.1f}", f"{hw.peak('bf16') / 1e12:.0f}", str(hw.gpus_per_node))
        described.append(f"{name}: {hw.description}")
    out = console()
    out.print(t)
    for line in described:
        say(out, line, markup=False)
    say(out, f"default when no --hardware and no saved profile: {DEFAULT_HARDWARE}")


def stacks_cmd() -> None:
    """List the execution stacks, their versions and recipe options, and what each one assumes."""
    from autopar.io.stacks import DEFAULT_STACK, builtin_stacks, load_stack, option_lines, stack_versions
    from autopar.render.text import say, table

    t = table(
        "stack",
        "kernels",
        "overlap",
        "DP sync",
        "ZeRO",
        "axes",
        left=("stack", "kernels", "overlap", "DP sync", "ZeRO", "axes"),
        wrap=("kernels", "DP sync"),
    )
    options = []
    for name in builtin_stacks():
        for version in stack_versions(name):
            s = load_stack(f"{name}@{version}")
            overlaps = f"{s.tp_overlap:.2f}/{'y' if s.cp_overlap else 'n'}/{'y' if s.ep_overlap else 'n'}"
            sync = (
                "per block"
                if s.dp_granularity == "layer"
                else (f"{s.dp_bucket_params / 1e6:.0f}M bucket" if s.dp_bucket_params else "one pass")
            )
            t.add_row(
                s.label,
                s.attention_kernel + ("" if s.compiled else " eager"),
                overlaps,
                sync,
                ",".join(map(str, s.zero_stages)),
                ",".join(s.parallelisms) + ("+vpp" if s.vpp else ""),
            )
            options.append(f"{s.label}: {option_lines(s.label)}")
    launchers = ", ".join(f"{n}: {load_stack(n).launcher}" for n in builtin_stacks())
    newest = ", ".join(f"{n}@{stack_versions(n)[-1]}" for n in builtin_stacks())
    out = console()
    out.print(t)
    say(out, "overlap: share of TP communication hidden / CP ring hidden / MoE all-to-all hidden (y/n)")
    say(out, f"--stack NAME is its newest version: {newest}", markup=False)
    say(out, "--stack-opt KEY=VALUE (or --recipe FILE) sets a recipe fact; the options of each:", markup=False)
    for line in options:
        say(out, f"  {line}", markup=False)
    say(out, f"--emit follows the stack: {launchers}", markup=False)
    say(out, f"default when no --stack: {DEFAULT_STACK}")
    say(out, "what each assumes, cited: autopar/data/stacks/NAME-VERSION.yaml; options: docs/stacks.md", markup=False)


def frameworks_cmd() -> None:
    """List the serving frameworks and versions whose data autopar has, and what each one is."""
    from autopar.io.frameworks import DEFAULT_FRAMEWORK, builtin_frameworks, load_framework
    from autopar.render.text import say, table

    t = table(
        "name",
        "version",
        "what it is",
        "source",
        left=("name", "version", "what it is", "source"),
        wrap=("what it is", "source"),
    )
    newest: dict[str, str] = {}
    for name, version in builtin_frameworks():
        fw = load_framework(f"{name}@{version}")
        t.add_row(name, version, fw.description, fw.source)
        newest[name] = load_framework(name).version
    out = console()
    out.print(t)
    say(
        out,
        "--framework NAME uses its newest version ("
        + ", ".join(f"{n} {v}" for n, v in newest.items())
        + "); NAME@VERSION picks one, and a version "
        "without its own file uses the newest one before it (the output says so)",
        markup=False,
    )
    say(out, f"default when no --framework and no --emit: {DEFAULT_FRAMEWORK}")
    say(
        out,
        "each value, its mechanism and source (or the rows and command that fitted it): autopar/data/frameworks/NAME-VERSION.yaml",
        markup=False,
    )


def schema_cmd(
    kind: Annotated[str, typer.Argument(help="model | hardware | distribution | stack | framework", autocompletion=complete_schema)],
) -> None:
    """Print the JSON Schema of a model spec, hardware profile, length-distribution, stack or serving-framework
    file (for editors)."""
    import json

    from autopar.io.schema import schemas

    found = schemas()
    if kind not in found:
        raise SpecError(f"schema: expected one of {', '.join(found)}, got {kind!r}")
    print(json.dumps(found[kind], indent=2))
