"""Job: what is being trained on what, independent of how it is split."""

from __future__ import annotations

from dataclasses import dataclass

from autopar.errors import SpecError
from autopar.spec.limits import MAX_BATCH, MAX_GPUS, MAX_GPUS_PER_NODE, MAX_SEQ

JOB_DTYPES = ("bf16", "fp16", "fp8")
# A plan fits when its predicted device peak is at most the GPU's memory; one that leaves less than
# the headroom free is warned about (--headroom). The memory model is a few percent off measured
# peaks (allocator slack alone varies 5-10% with the workload: cost/calibration.py
# ALLOCATOR_FRAGMENTATION), so a plan predicted at 79.5 of 79.7 GiB may not start; 5% of the GPU
# (4.0 of 79.7 GiB on an H100) is the default headroom.
DEFAULT_HEADROOM = "5%"
MAX_HEADROOM_SHARE = 0.5  # a headroom of half the GPU or more is a typo, not a margin
DEFAULT_TOKENS_PER_STEP = 4 * 2**20  # default global batch: about 4M tokens, as in Llama 3 pre-training


def headroom_bytes(text: str, gpu_bytes: float) -> float:
    """--headroom: GiB ("4", "4GiB") or a share of the GPU's memory ("5%"), in bytes; at least 0 and
    less than MAX_HEADROOM_SHARE of the GPU."""
    raw = text.strip()
    number = raw.removesuffix("%").removesuffix("GiB").removesuffix("gib").strip()
    try:
        value = float(number)
    except ValueError:
        value = float("nan")
    if not value >= 0:  # also refuses nan
        raise SpecError(f"`headroom` must be GiB (e.g. 4) or a share of the GPU's memory (e.g. 5%), got {text!r}")
    out = value / 100 * gpu_bytes if raw.endswith("%") else value * 2**30
    if out >= MAX_HEADROOM_SHARE * gpu_bytes:
        raise SpecError(f"`headroom` must be less than {MAX_HEADROOM_SHARE:.0%} of the GPU's {gpu_bytes / 2**30:.1f} GiB, got {text}")
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Job:
    """A training job: GPU count, node size, batch, sequence length, dtype."""

    gpus: int  # total GPUs
    gpus_per_node: int  # GPUs per node (from the hardware profile)
    global_batch: int  # sequences per optimizer step
    seq_len: int  # tokens per sequence
    dtype: str = "bf16"  # compute dtype of the GEMMs (fp8: Transformer Engine recipe, the rest stays bf16)
    # GPUs of one host where fewer than the node's NVLink domain (GB200 NVL72: a compute tray of 4 in a
    # domain of 72): a job takes whole hosts, not whole domains; 0: whole nodes
    gpus_per_host: int = 0

    def __post_init__(self) -> None:
        for name, limit in (("gpus", MAX_GPUS), ("gpus_per_node", MAX_GPUS_PER_NODE), ("global_batch", MAX_BATCH), ("seq_len", MAX_SEQ)):
            value = getattr(self, name)
            if value <= 0:
                raise SpecError(f"`{name}` must be positive, got {value}")
            if value > limit:
                raise SpecError(f"`{name}` must be at most {limit:,} (autopar's limit), got {value:,}")
        if self.gpus_per_host and self.gpus > self.gpus_per_host and self.gpus % self.gpus_per_host:
            h = self.gpus_per_host
            raise SpecError(
                f"`gpus` ({self.gpus}) must be a multiple of {h}, the GPUs of one host (a job takes whole "
                f"hosts of the {self.gpus_per_node}-GPU NVLink domain): {self.gpus - self.gpus % h} or "
                f"{self.gpus - self.gpus % h + h}"
            )
        if not self.gpus_per_host and self.gpus > self.gpus_per_node and self.gpus % self.gpus_per_node:
            raise SpecError(f"`gpus` ({self.gpus}) must be a multiple of the node size ({self.gpus_per_node} GPUs per node)")
        if self.dtype not in JOB_DTYPES:
            raise SpecError(f"`dtype` must be one of {', '.join(JOB_DTYPES)}, got {self.dtype!r}")

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch * self.seq_len


def default_global_batch(gpus: int, gpus_per_node: int, seq_len: int) -> int:
    """About 4M tokens per step, as a multiple of the largest data-parallel degree it can feed.

    dp x mbs must divide the batch (spec/plan.py), and the natural data-parallel degrees
    are the node count times a divisor of the node size (tp, cp inside a node): nodes x k
    for k | gpus per node. Their lcm is the GPU count, so when 4M tokens hold at least one
    sequence per GPU the batch is the multiple of the GPU count nearest 4M tokens and every
    dp that divides the GPUs divides it (24 GPUs at 8K tokens: 504 = 24 x 21, where the
    old node-count rounding gave 513, which only dp 1 and 3 divide). Beyond that it is a
    multiple of the largest such degree that fits in 4M tokens (1,000 GPUs: 500), and one
    sequence per node at least: 16,384 GPUs at 8K tokens get 2,048 sequences (16M tokens,
    as Llama 3 405B used, Dubey et al. 2024 section 3.4.1).
    """
    want = max(1, DEFAULT_TOKENS_PER_STEP // seq_len)
    nodes = max(1, gpus // gpus_per_node)
    per_node = gpus // nodes
    degrees = [nodes * k for k in range(1, per_node + 1) if per_node % k == 0 and nodes * k <= want]
    unit = max(degrees, default=nodes)
    return unit * max(1, (2 * want + unit) // (2 * unit))  # the nearest multiple, halves up
