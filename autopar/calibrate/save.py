"""``calibrate --save``: the measured corrections into the saved profile, atomically.

One correction today, ``activation_bytes_per_block``: the bytes a block saved
for backward on this node's stack (the meter) over the fused formula that
`suggest` and `estimate` use (cost/memory.py), averaged over the plans run,
clipped to ``spec.hardware.CORRECTIONS``. The run is eager PyTorch, so the cost
model applies it only to stacks that run eagerly with the fused formula
(spec/stack.py ``takes_eager_corrections``: deepspeed, llm-foundry), never to
Megatron's fused kernels or torchtitan's compiled ones. Parameter, gradient, optimizer and
collective bytes need no correction: the models match them exactly.

The profile's other sections stay as written: any earlier top-level
``corrections:`` block is cut out of the text and the new one appended; the
whole document is then validated with ``parse_profile`` before it replaces the
file (``write_atomic``), so a failed save leaves the profile as it was.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import yaml

from autopar.calibrate.command import Calibration
from autopar.errors import ProfileError
from autopar.io.files import output_target, write_atomic
from autopar.io.profiles import load_hardware, parse_profile, saved_profile_path
from autopar.io.reading import read_text
from autopar.spec.hardware import CORRECTIONS, Correction

NAME = "activation_bytes_per_block"


@dataclass(frozen=True, slots=True, kw_only=True)
class Saved:
    """What --save wrote."""

    path: Path  # the profile
    correction: Correction  # the factor as written
    raw_factor: float  # before clipping to the bounds


def target(path: Path | None = None) -> Path:
    """The profile --save writes: the saved one; refused before any run when it does not exist."""
    path = path or saved_profile_path()
    if not path.is_file():
        raise ProfileError(f"`save`: no saved profile at {path}: run `autopar profile` first (corrections are kept in the node's profile)")
    output_target(path, option="calibrate `save`", err=ProfileError, updates_input=True)
    load_hardware(str(path))  # a profile that will not validate is refused now, not after the run
    return path


def correction_of(runs: tuple[Calibration, ...]) -> tuple[Correction, float]:
    """The activation correction of these runs, clipped, and its unclipped value."""
    ratios = [c.run.ranks[0].block_activation_bytes / c.prediction.block_activation_fused for c in runs]
    raw = statistics.fmean(ratios)
    low, high = CORRECTIONS[NAME]
    first = runs[0]
    plans = "; ".join(c.plan.label() for c in runs)
    date = datetime.now(timezone.utc).date().isoformat()
    source = (
        f"autopar calibrate {first.model_name} ({first.model.total_params() / 1e6:.2f}M parameters as built), "
        f"{plans}, {first.run.device} {first.run.device_name}, torch {first.run.torch_version}, {date}"
    )
    stack = f"{first.prediction.stack_saves} (FSDP2, DTensor TP/SP, torch pipelining)"
    return Correction(name=NAME, factor=round(min(high, max(low, raw)), 4), stack=stack, source=source), raw


MARK = "# written by `autopar calibrate --save`; factors within spec/hardware.py CORRECTIONS\n"


def _without_corrections(text: str) -> str:
    """The profile text without its top-level ``corrections:`` block and the line --save puts above it."""
    out, skipping = [], False
    for line in text.splitlines(keepends=True):
        if line.strip() and not line[0].isspace():  # a top-level key or comment ends a block
            skipping = line.startswith("corrections:")
        if not skipping and line.rstrip("\n") != MARK.rstrip("\n"):
            out.append(line)
    return "".join(out)


def save(runs: tuple[Calibration, ...], path: Path) -> Saved:
    corr, raw = correction_of(runs)
    text = _without_corrections(read_text(path, err=ProfileError))
    if not text.endswith("\n"):
        text += "\n"
    block = {"corrections": {corr.name: {"factor": corr.factor, "stack": corr.stack, "source": corr.source}}}
    text += MARK
    text += yaml.safe_dump(block, sort_keys=False, width=1000)
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ProfileError(f"`save` {path}: the profile does not parse as YAML ({exc}); it was left unchanged") from None
    if not isinstance(doc, dict):
        raise ProfileError(f"`save` {path}: not a profile mapping; it was left unchanged")
    parse_profile(doc, where=str(path))
    write_atomic(path, text, option="calibrate `save`", err=ProfileError, updates_input=True)
    return Saved(path=path, correction=corr, raw_factor=raw)
