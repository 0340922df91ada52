"""The launch options the serve commands carry into the cost model: a pool's own caps, the prefix cache, the
Mamba state dtype. Values derived by hand from the preset (qwen3.5-397b-a17b.yaml) and the framework files."""

from __future__ import annotations

import pytest

from autopar.cost.serve import state_bytes_per_request
from autopar.errors import SpecError
from autopar.io.frameworks import load_framework
from autopar.io.models import load_model
from autopar.spec.serve import DEFAULT_ARGS, Deployment, Engine, EngineArgs, launched_model

QWEN35 = load_model("qwen3.5-397b-a17b")


def test_ssm_state_dtype_sets_the_state_bytes_of_a_request() -> None:
    """Qwen3.5's 45 DeltaNet layers: 64 heads (expand 2 x 4096 / head_dim 128) x 128 x state 128 = 1,048,576 SSM
    elements and a bf16 conv state of (8192 + 2 x 16 x 128) x (4 - 1) elements = 73,728 B, per layer and request.
    The config's float32 state: 45 x (73,728 + 4,194,304) B; --ssm-state-dtype bf16: 45 x (73,728 + 2,097,152) B."""
    assert state_bytes_per_request(QWEN35, Engine()) == 45 * (73_728 + 4 * 1_048_576)
    bf16 = launched_model(QWEN35, EngineArgs(ssm_state_dtype="bf16"))
    assert state_bytes_per_request(bf16, Engine()) == 45 * (73_728 + 2 * 1_048_576)
    assert state_bytes_per_request(bf16, Engine(tp=4)) == 45 * (73_728 + 2 * 1_048_576) / 4
    # the checkpoint's own dtype, or no state dtype given: the same object (caches keyed on the model still hit)
    assert launched_model(QWEN35, EngineArgs(ssm_state_dtype="fp32")) is QWEN35
    assert launched_model(QWEN35, DEFAULT_ARGS) is QWEN35
    with pytest.raises(SpecError, match="`ssm_state_dtype` must be one of bf16, fp32, got 'fp16'"):
        EngineArgs(ssm_state_dtype="fp16")


def test_prefix_cache_off_gives_a_hybrid_sglang_engine_its_overlap_scheduler() -> None:
    """SGLang turns the overlap scheduler off for a Mamba hybrid only while its radix cache is on (server_args.py
    _handle_mamba_radix_cache, no_buffer): the framework file's hybrid_overlap false; --disable-radix-cache keeps
    `overlap`. The other engines' hybrid_overlap is already true."""
    fw = load_framework("sglang")
    assert fw.overlap and not fw.hybrid_overlap
    dep = Deployment(fw=fw, mode="agg", engine=Engine(tp=4), replicas=1, args=EngineArgs(prefix_cache=False))
    assert dep.framework_for().hybrid_overlap is True
    assert Deployment(fw=fw, mode="agg", engine=Engine(tp=4), replicas=1).framework_for() is fw


def test_a_pools_own_settings_override_the_shared_ones() -> None:
    shared = EngineArgs(max_num_tokens=8192, memory_fraction=0.8, prefix_cache=False)
    own = EngineArgs(max_batch_size=16, memory_fraction=0.4)
    assert own.over(shared) == EngineArgs(max_num_tokens=8192, max_batch_size=16, memory_fraction=0.4, prefix_cache=False)
    assert DEFAULT_ARGS.over(shared) == shared
