"""The step simulation gives, bit for bit, what it gave before it was made cheaper.

`serve_sim_frozen.json` holds the LoopResult of `simulate` at 522afbe (before the i23sim speed-up)
on CASES random closed loops drawn below with seed 23, every branch of the scheduler among them
(both policies, chunking, admission by room and by blocks with preemption, the overlap scheduler,
mixed chunks, the prefill-token cap, a serving process that falls behind, CUDA graphs, staggered
starts and warm-up). It was written once by the frozen copy of that code, not by the code it checks;
a change that moves any result is a change of answers and needs its own golden and reason.

Changed once since (issue 23): vLLM's FCFS waiting queue, where a preempted request it cannot resume
stops the new prompts behind it (serve_sim.py _with_resumed; vllm/v1/core/sched/scheduler.py breaks at
the first waiting request allocate_slots refuses). The golden was rewritten by the same frozen 522afbe
copy with that one line patched in; 23 of the 600 cases moved, all admission by blocks.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from autopar.cost.serve_admit import Scheduler
from autopar.cost.serve_sim import simulate
from autopar.cost.serve_step import StepCost

GOLDEN = Path(__file__).with_name("serve_sim_frozen.json")
CASES = 600


def draw(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """One closed loop: StepCost fields, Scheduler fields, simulate's keywords."""
    conc = rng.choice([1, 2, 3, 7, 16, 50, 128, 300])
    isl, osl = rng.choice([1, 3, 16, 100, 512, 1024, 3000]), rng.choice([1, 2, 5, 64, 300, 1024])
    kv = rng.choice([0, 0, conc * (isl + osl) // rng.choice([1, 2, 4, 8]) + rng.randint(0, 50), isl + osl + 5])
    sched = {
        "policy": rng.choice(["decode_first", "prefill_first"]),
        "budget": rng.choice([64, 512, 2048, 8192]),
        "chunked": rng.random() < 0.7,
        "max_seqs": rng.choice([1, 4, 32, 256, 1024]),
        "kv_tokens": kv,
        "overlap": rng.random() < 0.3,
        "mixed": rng.random() < 0.3,
        "prefill_tokens": rng.choice([0, 0, 1024, 16384]),
        "host_token_s": rng.choice([0.0, 0.0, 1e-5, 2e-4, 3e-3]),
        "admission": rng.choice(["room", "blocks"]),
        "retract_steps": rng.choice([1, 20]),
        "ratio_decay_steps": rng.choice([600, 50]),
        "clip_new_tokens": rng.choice([4096, 100]),
    }
    cost = {
        "fixed": rng.choice([0.0, 0.005, 0.0118]),
        "per_decode": rng.choice([0.0, 1.3e-5, 2e-4]),
        "per_token": rng.choice([0.0, 6.5e-5, 1e-6]),
        "eager_s": rng.choice([0.0, 0.0, 0.02]),
        "graph_sizes": sorted(rng.sample([1, 2, 4, 8, 16, 32, 64, 128, 256], rng.randint(0, 5))),
        "host_per_decode": rng.choice([0.0, 0.0, 4e-5]),
    }
    staggered = rng.random() < 0.5
    prompts = conc * rng.choice([1, 1, 3]) if rng.random() < 0.8 else conc * 10
    warmup = rng.choice([0, 0, conc]) if staggered else 0
    loop = {"concurrency": conc, "isl": isl, "osl": osl, "prompts": prompts + warmup, "staggered": staggered, "warmup": warmup}
    return cost, sched, loop


def result(cost: dict[str, Any], sched: dict[str, Any], loop: dict[str, Any]) -> list[Any]:
    """simulate's LoopResult as a list (floats as their repr), or the error a stalled loop raises."""
    try:
        r = simulate(StepCost(**{**cost, "graph_sizes": frozenset(cost["graph_sizes"])}), Scheduler(**sched), **loop)
    except RuntimeError as err:
        return ["error", str(err)]
    return [repr(r.ttft_s), repr(r.tpot_s), repr(r.seconds), r.steps, repr(r.late_s), r.preempted, r.refused]


def test_the_golden_covers_every_kind_of_loop() -> None:
    rng = random.Random(23)
    drawn = [draw(rng) for _ in range(CASES)]
    golden = json.loads(GOLDEN.read_text())
    assert len(golden) == CASES
    assert sum(g[5] > 0 for g in golden if g[0] != "error") > 20  # preemptions
    assert sum(g[6] > 0 for g in golden if g[0] != "error") > 20  # refusals
    assert sum(g[4] != "0.0" for g in golden if g[0] != "error") > 20  # a serving process that lags
    assert sum(loop["staggered"] for _, _, loop in drawn) > CASES // 3


@pytest.mark.parametrize("part", range(6))
def test_simulate_gives_what_it_gave_before(part: int) -> None:
    rng = random.Random(23)
    drawn = [draw(rng) for _ in range(CASES)]
    golden = json.loads(GOLDEN.read_text())
    for i in range(part, CASES, 6):
        assert result(*drawn[i]) == golden[i], (i, drawn[i])
