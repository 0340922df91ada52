"""The serving sweep's caching and pruning change no answer (cost/serve_memo.py, search/serve.py)."""

from __future__ import annotations

import dataclasses

from autopar.cost.serve import decode_step, prefill_time
from autopar.cost.serve_frameworks import constants
from autopar.io.models import load_model
from autopar.io.profiles import load_hardware
from autopar.spec.serve import Engine

MODEL = load_model("qwen3-30b-a3b")
HW = load_hardware("h100-sxm")
FW = constants("vllm", "")


def test_a_cached_step_is_the_step_of_those_objects() -> None:
    kw = {"weights": "bf16", "kv_bytes": 2.0, "batch": 12.5, "context": 1536.0, "fw": FW}
    first = decode_step(MODEL, HW, Engine(tp=2), **kw)  # type: ignore[arg-type]
    again = decode_step(MODEL, HW, Engine(tp=2), **kw)  # type: ignore[arg-type]
    assert again is first
    # an equal profile with twice the memory bandwidth is another object: priced afresh, faster
    fast = dataclasses.replace(HW, hbm_bytes_per_s=2 * HW.hbm_bytes_per_s)
    assert decode_step(MODEL, fast, Engine(tp=2), **kw).weights < first.weights  # type: ignore[arg-type]
    # keyword values are part of the key: a swapped pair of equal-typed arguments is not a hit
    a = prefill_time(MODEL, HW, Engine(tp=2), weights="bf16", tokens=512, seq_len=1024, fw=FW)
    b = prefill_time(MODEL, HW, Engine(tp=2), weights="bf16", tokens=1024, seq_len=512, fw=FW)
    assert a.total != b.total
