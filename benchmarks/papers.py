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
from autopar.io.strict import Fields, load_mapping

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


def setups(path: Path = PAPERS) -> dict[str, dict[str, object]]:
    return load_mapping(path)


def reproduce(name: str, *, steps: int = 32, path: Path = PAPERS) -> Comparison:
    """Simulate one setup of papers.yaml; paths in it are relative to the repository root."""
    root = path.resolve().parents[2]
    f = Fields(setups(path)[name], f"{path}: {name}.")
    plan = Fields(f.mapping("plan") or {}, f"{path}: {name}.plan.")
    paper = {str(k): float(v) for k, v in (f.mapping("speedups") or {}).items()}
    seqs = f.integer("sequences_per_step")
    ctx = train.context(str(root / f.text("model")), hardware=f.text("hardware"), gpus=f.integer("gpus"), nodes=None,
                        global_batch=None, seq_len=None, dtype="bf16")
    dist = advise_varlen.load(str(root / f.text("lengths")), ctx.model.max_seq_len, ctx.model.name)
    packed, _ = advise_varlen.packed_context(ctx, dist, seqs)
    est = train.explain(packed, tp=plan.integer("tp"), pp=plan.integer("pp"), cp=plan.integer("cp"), vpp=1, ep=1,
                        mbs=1, recompute=plan.text("recompute"), zero=1, sp=True).estimate
    cand = advise_varlen.simulate_plan(packed, dist, est, sequences=seqs, steps=steps, rel_sem=0.0)
    naive = cand.results["naive"].tokens_per_s
    return Comparison(setup=name, title=f.text("title"), source=f.text("source"), paper=paper,
                      autopar={k: cand.results[k].tokens_per_s / naive for k in paper}, naive_tokens_per_s=naive,
                      steps=steps)
