"""Framework and Deployment hash a few of their fields (spec/framework.py, spec/serve.py): a cost
cache's key (cost/serve_memo.py) is hashed at each of a sweep's ~10^5 calls. Equal objects hash
alike; objects that differ only in a field left out hash alike too and are still told apart by
equality, so a cache keyed on them keeps one value for each."""

from __future__ import annotations

import dataclasses

from autopar.io.frameworks import load_framework
from autopar.spec.serve import DEFAULT_ARGS, Deployment, Engine, EngineArgs


def test_equal_frameworks_hash_alike_and_a_changed_constant_is_another_key() -> None:
    fw = load_framework("vllm")
    assert hash(dataclasses.replace(fw)) == hash(fw)
    slower = dataclasses.replace(fw, step_overhead_s=fw.step_overhead_s * 2)  # a field the hash leaves out
    assert hash(slower) == hash(fw) and slower != fw
    cache = {fw: 1, slower: 2}
    assert (cache[fw], cache[slower], len(cache)) == (1, 2, 2)
    # a launch setting changes a hashed field: Deployment.framework_for with --max-num-seqs 64
    dep = Deployment(fw=fw, mode="agg", engine=Engine(tp=8), replicas=1, args=EngineArgs(max_batch_size=64))
    launched = dep.framework_for()
    assert launched.max_seqs == 64 and launched != fw and hash(launched) != hash(fw)


def test_equal_deployments_hash_alike_and_other_settings_are_other_keys() -> None:
    fw = load_framework("sglang")
    one = Deployment(fw=fw, mode="disagg", engine=Engine(tp=8, dp=8, ep=64), replicas=2, prefill=Engine(tp=8), prefill_replicas=3)
    assert hash(dataclasses.replace(one)) == hash(one) and dataclasses.replace(one) == one
    launched = dataclasses.replace(one, args=EngineArgs(max_batch_size=32))  # the hash leaves the settings out
    assert hash(launched) == hash(one) and launched != one
    assert {one: 1, launched: 2}[launched] == 2
    assert one.args is DEFAULT_ARGS and one.framework_for() is fw  # no setting given: the framework itself
