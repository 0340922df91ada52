"""Published speed-ups on setups shaped like the papers' (examples/seqlen/papers.yaml): within 30%.

The figures (each number's source is in papers.yaml and the distribution files):
- ByteScale (arXiv 2502.21231) sec. 8.3, LLaMA-7B at 2M on 1,024 GPUs over a static CP-256 mesh:
  HDP without its balance strategy 1.91x, with it 3.31x.
- WLB-LLM (OSDI'25) sec. 7, 7B at 128K on 64 H100s (TP8 CP2 PP4) over Plain-4D: fixed-length packing
  1.03x, WLB-LLM 1.33x.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from autopar.errors import SpecError
from benchmarks.papers import PAPERS, reproduce, setups

TOLERANCE = 0.30  # the bar: within +-30% of the paper's speed-up


@pytest.mark.parametrize(("name", "steps"), [("bytescale_7b_2m", 8), ("wlb_7b_128k", 64)])
def test_speedups_within_30_percent_of_the_papers(name: str, steps: int) -> None:
    c = reproduce(name, steps=steps)
    assert set(c.autopar) == set(c.paper) and c.paper
    for strategy, paper in c.paper.items():
        got = c.autopar[strategy]
        assert abs(got / paper - 1.0) <= TOLERANCE, f"{name} {strategy}: autopar {got:.2f}x, paper {paper:.2f}x"


def test_the_papers_orderings_hold() -> None:
    b = reproduce("bytescale_7b_2m", steps=8).autopar
    assert 1.0 < b["hdp_no_balance"] < b["hdp"]  # balancing is worth more than the dynamic mesh alone
    w = reproduce("wlb_7b_128k", steps=64).autopar
    assert w["balanced"] < w["wlb"] and w["balanced"] < 1.1  # fixed-length packing gains little


def test_every_setup_names_its_sources() -> None:
    for name, setup in setups().items():
        assert setup.title.strip() and setup.source.strip() and setup.speedups, name  # each checked by PaperSetupFile


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"source": None}, "papers.yaml: wlb_7b_128k: source: missing required field"),
        ({"gpus": "64"}, "papers.yaml: wlb_7b_128k: gpus: expected an integer, got '64'"),
        ({"plan": {"tp": 8, "pp": 0, "cp": 2, "recompute": "none"}}, "wlb_7b_128k: plan.pp: must be >= 1, got 0"),
        ({"speedups": {"wlb": -1}}, "wlb_7b_128k: speedups.wlb: must be a positive number, got -1.0"),
        ({"speedup": {}}, "wlb_7b_128k: speedup: unknown field (did you mean 'speedups'?)"),
    ],
)
def test_a_bad_setup_names_file_setup_and_field(tmp_path: Path, change: dict[str, object], fragment: str) -> None:
    import yaml

    doc = yaml.safe_load(PAPERS.read_text())
    doc["wlb_7b_128k"] = {k: v for k, v in {**doc["wlb_7b_128k"], **change}.items() if v is not None}
    path = tmp_path / "papers.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(SpecError) as info:
        setups(path)
    assert fragment in str(info.value)
