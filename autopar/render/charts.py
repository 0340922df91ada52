"""Terminal pictures of one plan: its pipeline schedule, where a step's time goes, where memory goes.

Pure rendering with rich: each function turns numbers into ``rich.text.Text`` lines and never
computes a cost. Colour marks the parts on a terminal; every part also has its own character,
so the pictures read the same when piped or with ``NO_COLOR``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.console import Console
from rich.text import Text

from autopar.advise.train import Explained
from autopar.render.schedule import Slot, timeline_ends
from autopar.render.text import wrap
from autopar.spec.units import GIB

# key in TimeBreakdown -> (legend name, fill character, colour); other keys get a fallback look
TIME_PARTS = {
    "compute": ("compute", "█", "green"),
    "tp_comm": ("TP comm", "▓", "magenta"),
    "cp_comm": ("CP comm", "▒", "bright_magenta"),
    "ep_comm": ("EP all-to-all", "%", "bright_blue"),
    "pp_comm": ("PP p2p", "░", "blue"),
    "dp_comm": ("DP sync", "#", "cyan"),
    "bubble": ("bubble", "·", "red"),
    "optimizer": ("optimizer", "=", "yellow"),
    "overlap": ("overlap slowdown", "~", "bright_black"),
}
# key in MemoryBreakdown -> (legend name, fill character, colour)
MEMORY_PARTS = {
    "weights": ("weights", "█", "blue"),
    "grads": ("grads", "▓", "cyan"),
    "optimizer": ("optimizer", "▒", "yellow"),
    "activations": ("activations", "░", "green"),
    "logits": ("logits", "#", "bright_green"),
    "buffers": ("buffers", "=", "magenta"),
    "fragmentation": ("fragmentation", "~", "bright_black"),
}
_FALLBACK = ("?", "white")
FREE_CHAR = "·"
CAPACITY_MARK = "┃"
IDLE_CHAR = "·"
_F_STYLES = ("black on cyan", "black on bright_cyan")
_B_STYLES = ("black on green", "black on bright_green")


def proportional_widths(values: Sequence[float], width: int) -> list[int]:
    """Integer widths summing to `width`, proportional to `values` (largest-remainder rounding)."""
    total = sum(values)
    if width <= 0 or total <= 0:
        return [0] * len(values)
    exact = [v / total * width for v in values]
    widths = [int(x) for x in exact]
    by_remainder = sorted(range(len(values)), key=lambda i: (exact[i] - widths[i], values[i]), reverse=True)
    for i in by_remainder[: width - sum(widths)]:
        widths[i] += 1
    return widths


@dataclass(frozen=True, slots=True, kw_only=True)
class CapacityBar:
    """A memory bar's layout in characters: used parts, free space, where the capacity mark goes."""

    parts: tuple[int, ...]  # characters per memory part
    free: int  # characters of unused capacity after the parts
    capacity_col: int  # the capacity mark goes before this character


def capacity_bar(values: Sequence[float], *, capacity: float, width: int) -> CapacityBar:
    """The longer of (total, capacity) spans `width`; the mark sits at capacity on that scale."""
    total = sum(values)
    scale = max(total, capacity)
    used = round(width * total / scale) if scale > 0 else 0
    cap_col = round(width * capacity / scale) if scale > 0 else 0
    return CapacityBar(parts=tuple(proportional_widths(values, used)), free=max(0, cap_col - used), capacity_col=cap_col)


def _legend(items: Sequence[Text], width: int) -> list[Text]:
    """Legend entries packed into lines of at most `width` characters."""
    lines: list[Text] = []
    line = Text()
    for item in items:
        if line.cell_len and line.cell_len + 3 + item.cell_len > width:
            lines.append(line)
            line = Text()
        if line.cell_len:
            line.append("   ")
        line.append_text(item)
    if line.cell_len:
        lines.append(line)
    return lines


def time_bar(x: Explained, width: int) -> list[Text]:
    """The step time as one stacked bar, then a legend with seconds and shares."""
    e = x.estimate
    values = e.time.as_dict()
    widths = proportional_widths(list(values.values()), width)
    bar = Text()
    legend = []
    for (key, value), n in zip(values.items(), widths, strict=True):
        name, char, colour = TIME_PARTS.get(key, (key, *_FALLBACK))
        bar.append(char * n, style=colour)
        if value > 0:
            legend.append(Text.assemble((char, colour), f" {name} {value:.3f} s {value / e.step_time_s:.1%}"))
    return [Text(f"step time {e.step_time_s:.3f} s"), bar, *_legend(legend, width)]


def memory_bar(x: Explained, width: int) -> list[Text]:
    """Memory per GPU as a stacked bar against the GPU's capacity (┃), then a legend in GiB."""
    e = x.estimate
    gib = e.memory.as_gib()
    total = gib.pop("total")
    cap = e.memory_capacity_bytes / GIB
    layout = capacity_bar(list(gib.values()), capacity=cap, width=width)
    cells: list[tuple[str, str]] = []
    legend = []
    for (key, value), n in zip(gib.items(), layout.parts, strict=True):
        name, char, colour = MEMORY_PARTS.get(key, (key, *_FALLBACK))
        cells += [(char, colour)] * n
        if value > 0:
            legend.append(Text.assemble((char, colour), f" {name} {value:.2f} GiB"))
    cells += [(FREE_CHAR, "dim")] * layout.free
    cells.insert(layout.capacity_col, (CAPACITY_MARK, "bold red" if total > cap else "bold"))
    bar = Text()
    for char, style in cells:
        bar.append(char, style=style)
    if total <= cap:
        verdict = f"{total:.1f} of {cap:.1f} GiB ({total / cap:.0%})"
        legend.append(Text(f"{FREE_CHAR} free {cap - total:.2f} GiB"))
    else:
        verdict = f"{total:.1f} GiB, {total - cap:.1f} GiB over the {cap:.1f} GiB capacity"
    title = Text(f"memory per GPU (worst stage): {verdict}; {CAPACITY_MARK} = capacity")
    return [title, bar, *_legend(legend, width)]


# --- pipeline schedule ---------------------------------------------------------------------


def op_label(slot: Slot, chunks: int) -> str:
    """F3 = forward of micro-batch 3; B3.2 = backward of micro-batch 3 on model chunk 2 (1-based)."""
    label = f"{slot.op.kind}{slot.op.microbatch + 1}"
    return f"{label}.{slot.op.chunk + 1}" if chunks > 1 else label


def _cells(row: Sequence[Slot], *, unit_chars: int, chunks: int, lo: int, hi: int) -> Text:
    """Characters for time units [lo, hi) of one stage: ops as labelled cells, idle time as dots."""
    chars = [(IDLE_CHAR, "dim")] * ((hi - lo) * unit_chars)
    for slot in row:
        if slot.end <= lo or slot.start >= hi:
            continue
        first = max(slot.start, lo)  # an op cut by the window's left edge is labelled where it shows
        width = (slot.end - first) * unit_chars
        text = op_label(slot, chunks)[: width - 1].ljust(width - 1)
        styles = _F_STYLES if slot.op.kind == "F" else _B_STYLES
        style = styles[slot.op.chunk % 2]
        for j, char in enumerate(text):
            pos = (first - lo) * unit_chars + j
            if 0 <= pos < len(chars):
                chars[pos] = (char, style)
        end = (slot.end - lo) * unit_chars - 1
        if 0 <= end < len(chars):
            chars[end] = (" ", "")
    out = Text()
    for char, style in chars:
        out.append(char, style=style)
    return out


def schedule_lines(*, stages: int, microbatches: int, chunks: int, bwd_units: int, width: int) -> list[Text]:
    """One line per stage: the schedule's ops in time. When it does not fit in `width` characters,
    its first and last time units with an ellipsis between (the middle is steady 1F1B)."""
    unit = 1 + len(str(microbatches)) + (1 + len(str(chunks)) if chunks > 1 else 0) + 1
    name_w = len(f"stage {stages - 1}")
    room = max(2 * unit + 3, width - name_w - 1)
    full_units = (microbatches * chunks + stages - 1) * (1 + bwd_units)  # the schedule's length in op units
    if full_units * unit <= room:
        head, tail = room // unit, 0
    else:
        head = tail = max(1, (room - 3) // 2 // unit)
    tl, _ = timeline_ends(
        stages=stages, microbatches=microbatches, chunks=chunks, fwd_units=1, bwd_units=bwd_units, head_units=head, tail_units=tail
    )
    cut = head + tail < tl.total_units
    lines = []
    for i, row in enumerate(tl.stages):
        line = Text(f"stage {i}".ljust(name_w) + " ")
        if cut:
            line.append_text(_cells(row, unit_chars=unit, chunks=chunks, lo=0, hi=head))
            line.append(" … ", style="bold")
            line.append_text(_cells(row, unit_chars=unit, chunks=chunks, lo=tl.total_units - tail, hi=tl.total_units))
        else:
            line.append_text(_cells(row, unit_chars=unit, chunks=chunks, lo=0, hi=tl.total_units))
        lines.append(line)
    return lines


def schedule_picture(x: Explained, width: int) -> list[Text]:
    """The plan's pipeline schedule with a caption naming it and its bubble."""
    p = x.estimate.plan
    m = p.microbatches(x.ctx.job)
    if p.pp == 1:
        return [Text("pipeline: none (pp 1): every GPU holds all layers, no schedule and no bubble")]
    bwd = 3 if p.recompute == "full" else 2
    name = f"interleaved 1F1B, {p.vpp} model chunks per stage" if p.vpp > 1 else "1F1B"
    label = "F3.2 = forward of micro-batch 3 through model chunk 2" if p.vpp > 1 else "F3 = forward of micro-batch 3"
    ideal = (p.pp - 1) / (p.vpp * m)
    e = x.estimate
    return [
        Text(f"pipeline schedule: {name}, {p.pp} stages, {m} micro-batches"),
        Text(f"{label}, B = backward, {IDLE_CHAR} = idle", style="dim"),
        *schedule_lines(stages=p.pp, microbatches=m, chunks=p.vpp, bwd_units=bwd, width=width),
        Text(
            f"bubble: (p-1)/(v·m) = {p.pp - 1}/{p.vpp * m} = {ideal:.2%} of the busy time; estimated "
            f"{e.time.bubble:.3f} s of a {e.step_time_s:.3f} s step (uneven stages and the loss layer included)"
        ),
        Text(
            f"(schematic: equal stages, a backward {bwd}x a forward{' with full recompute' if bwd == 3 else ''}, no transfer time)",
            style="dim",
        ),
    ]


def render_explain(console: Console, x: Explained) -> None:
    """Schedule, step-time bar and memory bar, fitted to the console's width."""
    width = console.width
    bar_width = max(20, min(width - 2, 100))
    for block in (schedule_picture(x, width), time_bar(x, bar_width), memory_bar(x, bar_width)):
        console.print()
        for line in block:  # bars and stage rows are drawn to the width; captions wrap
            for piece in wrap(line, width=width) if line.cell_len > width else [line]:
                console.print(piece, soft_wrap=True)
