"""Published variable-length results, re-run through autopar: the setups of examples/seqlen/papers.yaml.

Each setup names a model, a profile, a GPU count, the fixed plan, a length
distribution and the speed-ups the paper measured over its naive baseline.
``reproduce`` builds the job as ``autopar estimate --seq-len-dist`` does (the
same context, plan estimate, token room and per-sequence cost), simulates
``steps`` steps and returns autopar's speed-up for each strategy the paper
reports, beside the paper's. The tests hold them within 30%; the README's
variable-length table prints them. It reads the repository's examples/, so it
lives here and not in the package (an installed wheel has no examples/).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from autopar.advise import train
from autopar.advise import varlen as advise_varlen
from autopar.errors import SpecError
from autopar.io.reading import load_mapping, named, one_line
from autopar.io.schema import validate
from autopar.io.tables import PaperSetupFile

PAPERS = Path(__file__).resolve().parents[1] / "examples" / "seqlen" / "papers.yaml"


@dataclass(frozen=True, slots=True, kw_only=True)
class Comparison:
    setup: str  # key in papers.yaml
    title: str  # what the paper ran
    source: str  # where its figures are
    paper: dict[str, float]  # strategy -> the paper's speed-up over naive
    autopar: dict[str, float]  # strategy -> autopar's
    naive_tokens_per_s: float  # autopar's naive baseline, tokens/s
    steps: int  # steps simulated


def setups(path: Path = PAPERS) -> dict[str, PaperSetupFile]:
    """Every setup of papers.yaml, by name, each checked by its file model (SpecError naming the field)."""
    out = {}
    for name, entry in load_mapping(path).items():
        where = f"{named(path)}: {one_line(str(name), 60)}"
        if not isinstance(entry, dict):
            raise SpecError(f"{where}: expected a mapping, got {type(entry).__name__}")
        out[str(name)] = validate(PaperSetupFile, entry, where=where, err=SpecError)
    return out


def reproduce(name: str, *, steps: int = 32, path: Path = PAPERS) -> Comparison:
    """Simulate one setup of papers.yaml; paths in it are relative to the repository root."""
    root = path.resolve().parents[2]
    s = setups(path)[name]
    ctx = train.context(str(root / s.model), hardware=s.hardware, gpus=s.gpus, nodes=None, global_batch=None, seq_len=None, dtype="bf16")
    dist = advise_varlen.load(str(root / s.lengths), ctx.model.max_seq_len, ctx.model.name)
    packed, _ = advise_varlen.packed_context(ctx, dist, s.sequences_per_step)
    est = train.explain(
        packed, tp=s.plan.tp, pp=s.plan.pp, cp=s.plan.cp, vpp=1, ep=1, mbs=1, recompute=s.plan.recompute, zero=1, sp=True
    ).estimate
    cand = advise_varlen.simulate_plan(packed, dist, est, sequences=s.sequences_per_step, steps=steps, rel_sem=0.0)
    naive = cand.results["naive"].tokens_per_s
    return Comparison(
        setup=name,
        title=s.title,
        source=s.source,
        paper=dict(s.speedups),
        autopar={k: cand.results[k].tokens_per_s / naive for k in s.speedups},
        naive_tokens_per_s=naive,
        steps=steps,
    )
