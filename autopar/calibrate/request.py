"""What to calibrate: the plan string, the (shrunk) model, the run's shape. No torch here.

``--plan dp1,tp2,pp1`` names the degrees; more tokens: ``vpp2``, ``mbs2``,
``gb8`` (global batch, sequences), ``zero2``/``zero3``, ``sp``/``nosp``,
``seq256``, ``cp2`` (all-gather context parallelism). Degrees not named are 1;
ZeRO defaults to 3 (FSDP2 ``fully_shard``).

``--scale-to-fit`` shrinks the model so that a run takes seconds on this node,
keeping its family and proportions, and says exactly how (``Scaling.lines``):
layers to the fewest that give each pipeline chunk ``MIN_LAYERS_PER_CHUNK``
(at least ``MIN_LAYERS``); heads and KV heads halved together (the GQA ratio
kept) while at least max(2, tp) KV heads stay, a multiple of tp (so tp 1 and 2
build the same model), then the head width halved, to
``width`` hidden units at most; the FFN width by the same factor as the hidden
width, rounded to a multiple of 64 * tp; the vocabulary to ``vocab`` entries;
the sequence to ``seq`` tokens.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from autopar.errors import SpecError
from autopar.spec.job import Job
from autopar.spec.model import ModelSpec
from autopar.spec.plan import Plan, validate

MIN_LAYERS = 4
MIN_LAYERS_PER_CHUNK = 1
_TOKEN = re.compile(r"^(dp|tp|pp|vpp|cp|mbs|gb|zero|seq)(\d+)$")


@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    """How small --scale-to-fit makes the model on a device."""

    width: int  # largest hidden size
    vocab: int  # largest vocabulary
    seq: int  # longest sequence, tokens


BUDGETS = {"cpu": Budget(width=256, vocab=2048, seq=256), "cuda": Budget(width=2048, vocab=32768, seq=2048)}


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanRequest:
    """A parsed --plan: the Plan, the global batch and the sequence length (None: defaults)."""

    plan: Plan  # degrees and knobs
    global_batch: int | None  # sequences per step
    seq_len: int | None  # tokens per sequence


def parse_plan(text: str) -> PlanRequest:
    """``dp2,tp2,pp1,...`` -> PlanRequest; one-line SpecError naming the bad token."""
    values: dict[str, int] = {}
    sp = True
    for raw in text.split(","):
        token = raw.strip().lower()
        if not token:
            continue
        if token in ("sp", "nosp"):
            sp = token == "sp"
            continue
        match = _TOKEN.match(token)
        if match is None:
            raise SpecError(f"`plan`: unknown token {raw.strip()!r}; expected dpN, tpN, ppN, vppN, cpN, mbsN, gbN, zeroN, seqN, sp or nosp")
        key, value = match.group(1), int(match.group(2))
        if key in values:
            raise SpecError(f"`plan`: {key} given twice")
        if value < 1 and key != "zero":
            raise SpecError(f"`plan`: {key} must be >= 1, got {value}")
        values[key] = value
    zero = values.get("zero", 3)
    if zero not in (2, 3) and values.get("dp", 1) > 1:
        raise SpecError(
            f"`plan`: zero{zero} with dp > 1 is not run by calibrate: it shards with FSDP2 "
            "(zero3: fully_shard; zero2: reshard_after_forward=False)"
        )
    cp = values.get("cp", 1)
    plan = Plan(
        dp=values.get("dp", 1),
        tp=values.get("tp", 1),
        pp=values.get("pp", 1),
        cp=cp,
        vpp=values.get("vpp", 1),
        mbs=values.get("mbs", 1),
        zero=zero,
        sp=sp,
        cp_comm="allgather",
    )  # the form calibrate builds (torch's ring has no CPU path)
    return PlanRequest(plan=plan, global_batch=values.get("gb"), seq_len=values.get("seq"))


@dataclass(frozen=True, slots=True, kw_only=True)
class Scaling:
    """The model as run, and the sentences that say how it was shrunk."""

    model: ModelSpec  # what is built
    lines: tuple[str, ...]  # one per changed dimension; empty when unchanged


def _halve_heads(heads: int, kv: int, head_dim: int, tp: int) -> tuple[int, int, int]:
    if kv % 2 == 0 and kv // 2 >= max(2, tp) and (kv // 2) % tp == 0 and heads % 2 == 0:
        return heads // 2, kv // 2, head_dim
    if head_dim > 16 and head_dim % 2 == 0:
        return heads, kv, head_dim // 2
    raise SpecError(f"`scale_to_fit`: cannot shrink {heads} heads of width {head_dim} (kv heads {kv}) further for tp {tp}")


def scale_to_fit(model: ModelSpec, plan: Plan, budget: Budget) -> Scaling:
    """The model shrunk to ``budget`` for ``plan`` (see the module docstring)."""
    chunks = plan.pp * plan.vpp
    layers = min(model.layers, max(MIN_LAYERS, chunks * MIN_LAYERS_PER_CHUNK))
    layers = max(layers, chunks)
    heads, kv, d = model.num_attention_heads, model.num_kv_heads, model.head_dim
    hidden = model.hidden_size
    while hidden > budget.width:
        heads, kv, d = _halve_heads(heads, kv, d, plan.tp)
        hidden = max(1, model.hidden_size * heads * d // model.q_width)
    factor = model.hidden_size / hidden
    quantum = 64 * plan.tp
    ffn = max(quantum, round(model.ffn_hidden_size / factor / quantum) * quantum) if factor > 1 else model.ffn_hidden_size
    vocab = min(model.vocab_size, budget.vocab)
    vocab -= vocab % (plan.tp * plan.dp) if vocab > plan.tp * plan.dp else 0
    seq = min(model.seq_len, budget.seq)
    scaled = replace(
        model,
        name=f"{model.name} (scaled)",
        layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_kv_heads=kv,
        head_dim=d,
        ffn_hidden_size=ffn,
        vocab_size=vocab,
        seq_len=seq,
        max_seq_len=max(seq, min(model.max_seq_len, seq)),
    )
    lines = []
    for label, old, new in (
        ("layers", model.layers, layers),
        ("hidden", model.hidden_size, hidden),
        ("heads", model.num_attention_heads, heads),
        ("kv heads", model.num_kv_heads, kv),
        ("head dim", model.head_dim, d),
        ("ffn", model.ffn_hidden_size, ffn),
        ("vocab", model.vocab_size, vocab),
        ("seq", model.seq_len, seq),
    ):
        if old != new:
            lines.append(f"{label} {old} -> {new}")
    if lines:
        lines.append(f"parameters {model.total_params() / 1e9:.2f}B -> {scaled.total_params() / 1e6:.2f}M")
    return Scaling(model=scaled if lines else model, lines=tuple(lines))


def cp_positions(seq_len: int, cp: int, rank: int) -> list[int]:
    """Token positions context-parallel rank `rank` holds: chunks rank and 2cp-1-rank of 2cp
    (the causal load balance of Megatron CP and torchtitan)."""
    size = seq_len // (2 * cp)
    return [*range(rank * size, (rank + 1) * size), *range((2 * cp - 1 - rank) * size, (2 * cp - rank) * size)]


def check_family(model: ModelSpec) -> None:
    """calibrate builds dense Llama-style decoders; refuse the rest with the reason."""
    if model.moe is not None:
        raise SpecError(f"{model.name}: MoE layers are not built by calibrate yet (no expert-parallel all-to-all); calibrate a dense model")
    if model.mamba is not None or model.mla is not None:
        kind = "Mamba" if model.mamba is not None else "MLA"
        raise SpecError(f"{model.name}: {kind} layers are not built by calibrate; calibrate a dense model")


def make_job(model: ModelSpec, req: PlanRequest, *, gpus: int) -> Job:
    """The job of one calibration run: default global batch dp * mbs * (2 pp micro-batches under pp > 1)."""
    plan = req.plan
    microbatches = 2 * plan.pp if plan.pp > 1 else 1
    batch = req.global_batch or plan.dp * plan.mbs * microbatches
    seq = req.seq_len or model.seq_len
    job = Job(gpus=gpus, gpus_per_node=gpus, global_batch=batch, seq_len=seq, dtype="bf16")
    validate(plan, model, job)
    m = plan.microbatches(job)
    if plan.pp > 1 and m < plan.pp:
        raise SpecError(
            f"`plan`: torch's pipeline schedules need at least pp ({plan.pp}) micro-batches per step; "
            f"gb / (dp * mbs) = {batch} / ({plan.dp} * {plan.mbs}) = {m}"
        )
    return job
