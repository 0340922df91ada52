"""Serving formulas against hand derivations on the toy profile (tests/conftest.py).

Toy profile: 1000 TFLOP/s bf16, GEMM efficiency 0.5 from 1 GFLOP up (below it
proportional to size, so a small GEMM costs 1e9 / (1e15 x 0.5 x 0.75) = 2.67 us),
HBM 2000 GB/s x 0.5 = 1e12 B/s, 80 GiB. Sustained tensor efficiency 0.75
(cost/calibration.py).
"""

from __future__ import annotations

import dataclasses

import pytest

from autopar.cost.serve import (
    decode_step,
    kv_bytes_per_token,
    kv_pool_bytes,
    prefill_in_step,
    prefill_time,
    weight_bytes_per_gpu,
)
from autopar.cost.serve_load import estimate
from autopar.cost.serve_loop import others_prompt_s
from autopar.errors import SpecError
from autopar.io.frameworks import load_framework
from autopar.io.models import load_model
from autopar.io.profiles import parse_profile
from autopar.spec.families import MoESpec
from autopar.spec.hardware import HardwareProfile
from autopar.spec.serve import Deployment, Engine, Workload
from tests.conftest import gpt_like, toy_profile_dict

BW = 1e12  # effective toy HBM bandwidth, B/s
RATE = 1e15 * 0.5 * 0.75  # toy sustained GEMM rate, FLOP/s
PLAIN = dataclasses.replace(load_framework("vllm@0.12"), step_overhead_s=0.0, moe_decode_slowdown=1.0, kv_decode_slowdown=1.0)


def test_kv_bytes_per_token_gqa_mla_and_replication() -> None:
    llama = load_model("llama3.1-8b")  # 32 layers, 8 KV heads of 128
    assert kv_bytes_per_token(llama, Engine(tp=1), 2.0) == 32 * 2 * 8 * 128 * 2  # 131,072 B
    assert kv_bytes_per_token(llama, Engine(tp=8), 2.0) == 32 * 2 * 1 * 128 * 2
    # TP 16 > 8 KV heads: each rank still keeps one whole head (replicated)
    assert kv_bytes_per_token(llama, Engine(tp=16), 2.0) == 32 * 2 * 1 * 128 * 2
    assert kv_bytes_per_token(llama, Engine(tp=1, pp=2), 1.0) == 16 * 2 * 8 * 128 * 1  # fp8, half the layers
    ds = load_model("deepseek-v3")  # MLA: 61 layers, latent 512 + rope 64, the same on every TP rank
    assert kv_bytes_per_token(ds, Engine(tp=1), 2.0) == 61 * (512 + 64) * 2
    assert kv_bytes_per_token(ds, Engine(tp=8), 2.0) == 61 * (512 + 64) * 2


def test_weight_bytes_toy() -> None:
    m = gpt_like()  # 4 layers: attention 4h^2, MLP 2*h*4h (GELU), tied 32000 x 1024 embedding
    per_layer = 4 * 1024**2 + 2 * 1024 * 4096
    ends = 32000 * 1024 + 1024  # embedding + final norm
    assert weight_bytes_per_gpu(m, Engine(tp=1), "bf16") == 4 * per_layer * 2 + ends * 2
    assert weight_bytes_per_gpu(m, Engine(tp=2), "fp8") == 4 * per_layer / 2 * 1 + ends * 2 / 2


def test_decode_step_is_weights_plus_kv_at_batch_one(toy_hw: HardwareProfile) -> None:
    m = gpt_like()
    step = decode_step(m, toy_hw, Engine(tp=1), weights="bf16", kv_bytes=2.0, batch=1, context=1000, fw=PLAIN)
    layer_weights = (4 * 1024**2 + 2 * 1024 * 4096) * 2
    lm_head = 32000 * 1024 * 2
    assert step.weights == pytest.approx((4 * layer_weights + lm_head) / BW)
    assert step.kv == pytest.approx(4 * 1000 * (2 * 16 * 64 * 2) / BW)  # 4 layers x 1000 tokens x K and V
    assert step.compute == 0.0  # every GEMM (2.67 us each) hides under its weight read
    assert step.tp_comm == 0.0 and step.ep_comm == 0.0


def test_decode_tp_all_reduce_is_latency_bound(toy_hw: HardwareProfile) -> None:
    # two all-reduces per layer of batch x h x 2 bytes: 10 us + 2(n-1)/n x 2048 B / 100 GB/s
    step = decode_step(gpt_like(), toy_hw, Engine(tp=2), weights="bf16", kv_bytes=2.0, batch=1, context=10, fw=PLAIN)
    one = 10e-6 + 2 * 1 / 2 * 2048 / 100e9
    assert step.tp_comm == pytest.approx(4 * 2 * one)


def test_moe_decode_reads_only_touched_experts(toy_hw: HardwareProfile) -> None:
    moe = MoESpec(num_experts=8, top_k=2, expert_ffn_hidden_size=512)
    m = gpt_like(moe=moe, ffn_activation="swiglu")
    fw = dataclasses.replace(PLAIN, moe_decode_reads="touched")
    step = decode_step(m, toy_hw, Engine(tp=1), weights="bf16", kv_bytes=2.0, batch=1, context=1, fw=fw)
    expert = 3 * 1024 * 512 * 2  # SwiGLU: three h x f matrices, bf16
    router = 1024 * 8 * 2
    attn = 4 * 1024**2 * 2
    lm_head = 32000 * 1024 * 2
    # a token routes to top_k = 2 distinct experts: one token reads exactly 2 of the 8
    assert step.weights == pytest.approx((4 * (attn + router + 2 * expert) + lm_head) / BW)
    # 3 tokens: an expert is missed by a token with probability 1 - k / E = 3/4 (uniform routing), so
    # E (1 - (1 - k/E)^tokens) = 8 (1 - 27/64) = 4.625 experts are read
    step = decode_step(m, toy_hw, Engine(tp=1), weights="bf16", kv_bytes=2.0, batch=3, context=1, fw=fw)
    assert step.weights == pytest.approx((4 * (attn + router + 4.625 * expert) + lm_head) / BW)
    # vLLM 0.12 (moe_decode_reads "local", data/frameworks/vllm-0.12.yaml): all 8 experts, and with ep 2 the 4 a GPU holds
    step = decode_step(m, toy_hw, Engine(tp=1), weights="bf16", kv_bytes=2.0, batch=1, context=1, fw=PLAIN)
    assert step.weights == pytest.approx((4 * (attn + router + 8 * expert) + lm_head) / BW)
    step = decode_step(m, toy_hw, Engine(tp=1, dp=2, ep=2), weights="bf16", kv_bytes=2.0, batch=1, context=1, fw=PLAIN)
    assert step.weights == pytest.approx((4 * (attn + router + 4 * expert) + lm_head) / BW)


def test_moe_decode_slowdown_stretches_the_expert_read_only(toy_hw: HardwareProfile) -> None:
    # vLLM 0.12 (data/frameworks/vllm-0.12.yaml moe_decode_slowdown 1.5): a decode step's fused-MoE kernels stream
    # the experts at 1 / 1.5 of the profile's copy rate; attention, router and LM head weights keep it,
    # and no time is added per MoE layer or to a prefill (compute-bound, cost/serve.py prefill_time).
    moe = MoESpec(num_experts=8, top_k=2, expert_ffn_hidden_size=512)
    m = gpt_like(moe=moe, ffn_activation="swiglu")
    slow = dataclasses.replace(PLAIN, moe_decode_slowdown=1.5)
    expert = 3 * 1024 * 512 * 2  # SwiGLU: three h x f matrices, bf16
    router = 1024 * 8 * 2
    attn = 4 * 1024**2 * 2
    lm_head = 32000 * 1024 * 2
    step = decode_step(m, toy_hw, Engine(tp=1), weights="bf16", kv_bytes=2.0, batch=1, context=1, fw=slow)
    assert step.weights == pytest.approx((4 * (attn + router + 1.5 * 8 * expert) + lm_head) / BW)  # 250.2 us
    assert step.overhead == 0.0
    # ep 2: the 4 experts a GPU holds, stretched alike
    step = decode_step(m, toy_hw, Engine(tp=1, dp=2, ep=2), weights="bf16", kv_bytes=2.0, batch=1, context=1, fw=slow)
    assert step.weights == pytest.approx((4 * (attn + router + 1.5 * 4 * expert) + lm_head) / BW)
    kw = dict(weights="bf16", tokens=1024, seq_len=1024)
    assert prefill_time(m, toy_hw, Engine(tp=1), fw=slow, **kw) == prefill_time(m, toy_hw, Engine(tp=1), fw=PLAIN, **kw)  # type: ignore[arg-type]


def test_kv_decode_slowdown_stretches_the_kv_read_only(toy_hw: HardwareProfile) -> None:
    # vLLM 0.12 (data/frameworks/vllm-0.12.yaml kv_decode_slowdown 1.5): a decode step's attention reads the
    # cached K and V at 1 / 1.5 of the profile's copy rate. gpt_like: 4 layers x K and V x 16 heads x 64 x 2 B
    # = 16 KiB a token; one request of 1024 cached tokens reads 16 MiB: 16.8 us at 1e12 B/s, 25.2 us stretched.
    m = gpt_like()
    kw = dict(weights="bf16", kv_bytes=2.0, batch=1, context=1024)
    plain = decode_step(m, toy_hw, Engine(tp=1), fw=PLAIN, **kw)  # type: ignore[arg-type]
    slow = decode_step(m, toy_hw, Engine(tp=1), fw=dataclasses.replace(PLAIN, kv_decode_slowdown=1.5), **kw)  # type: ignore[arg-type]
    assert plain.kv == pytest.approx(4 * 2 * 16 * 64 * 2 * 1024 / BW)
    assert slow.kv == pytest.approx(1.5 * 4 * 2 * 16 * 64 * 2 * 1024 / BW)
    assert (slow.weights, slow.tp_comm, slow.overhead) == (plain.weights, plain.tp_comm, plain.overhead)


def test_prefill_is_compute_bound_with_causal_attention_halved(toy_hw: HardwareProfile) -> None:
    m = gpt_like()
    t = prefill_time(m, toy_hw, Engine(tp=1), weights="bf16", tokens=1024, seq_len=1024, fw=PLAIN)
    gemm = 2 * 1024 * (4 * 1024**2 + 2 * 1024 * 4096)  # QKV, output, MLP in and out
    attn = 2 * 1024 * 1024 * 16 * 128 / 2  # QK^T + AV over d_qk + d_v = 128 per head, causal half
    lm_head = 32000 * 1024 * 2 / BW  # one logits row per sequence: weight read dominates
    assert t.total == pytest.approx(4 * (gemm + attn) / RATE + lm_head)


def test_prefill_in_a_decode_step_shares_the_weight_read(toy_hw: HardwareProfile) -> None:
    m = gpt_like()
    step = decode_step(m, toy_hw, Engine(tp=1), weights="bf16", kv_bytes=2.0, batch=1, context=1000, fw=PLAIN)
    layer_weights = (4 * 1024**2 + 2 * 1024 * 4096) * 2
    lm_head = 32000 * 1024 * 2
    # 1024 tokens are compute-bound: the shared read is the decode step's whole weight read
    long = prefill_time(m, toy_hw, Engine(tp=1), weights="bf16", tokens=1024, seq_len=1024, fw=PLAIN)
    gemm = 2 * 1024 * (4 * 1024**2 + 2 * 1024 * 4096)
    attn = 2 * 1024 * 1024 * 16 * 128 / 2
    assert step.weights == pytest.approx((4 * layer_weights + lm_head) / BW)
    assert prefill_in_step(long, step, chunks=1) == pytest.approx(4 * (gemm + attn) / RATE - 4 * layer_weights / BW)
    # 8 tokens are weight-bound (every GEMM 2.67 us < its 25 us read): only the attention core is left
    short = prefill_time(m, toy_hw, Engine(tp=1), weights="bf16", tokens=8, seq_len=8, fw=PLAIN)
    assert short.weights == pytest.approx(step.weights)
    assert prefill_in_step(short, step, chunks=1) == pytest.approx(short.total - short.weights)
    assert prefill_in_step(short, step, chunks=1) < 0.01 * short.total


def test_ep_exchanges_tokens_only_with_attention_dp(toy_hw: HardwareProfile) -> None:
    # tp2 ep2: both ranks hold every token after the attention all-reduce, the MoE all-reduce
    # (in tp_comm) combines the experts; dp2 ep2: each rank's tokens travel to the other's experts
    m = gpt_like(moe=MoESpec(num_experts=8, top_k=2, expert_ffn_hidden_size=512), ffn_activation="swiglu")

    def ep_comm(engine: Engine) -> float:
        return decode_step(m, toy_hw, engine, weights="bf16", kv_bytes=2.0, batch=4, context=100, fw=PLAIN).ep_comm

    assert ep_comm(Engine(tp=2, ep=2)) == 0.0
    assert ep_comm(Engine(tp=1, dp=2, ep=2)) > 0.0


def test_each_engine_sends_the_moe_tokens_one_way(toy_hw: HardwareProfile) -> None:
    # tp2 x attention-DP 2, ep4, 4 requests a rank: the MoE layer sees 8 tokens, 2 x 8 x 1024 = 16,384 B.
    # Toy collectives: 10 us + (n - 1)/n x bytes / 100 GB/s on one node; 4 MoE layers (gpt_like).
    m = gpt_like(moe=MoESpec(num_experts=8, top_k=2, expert_ffn_hidden_size=512), ffn_activation="swiglu")
    eng, us = Engine(tp=2, dp=2, ep=4), 1e-6

    def ep_comm(exchange: str, hw: HardwareProfile = toy_hw) -> float:
        fw = dataclasses.replace(PLAIN, moe_exchange=exchange)
        return decode_step(m, hw, eng, weights="bf16", kv_bytes=2.0, batch=4, context=100, fw=fw).ep_comm

    # vLLM: all_gatherv + reduce_scatterv over the DP group (2 ranks), nothing else
    assert ep_comm("gather_dp") == pytest.approx(4 * 2 * (10 * us + 1 / 2 * 16384 / 1e11))
    # SGLang: the same over every tp x dp rank (4)
    assert ep_comm("gather_tp") == pytest.approx(4 * 2 * (10 * us + 3 / 4 * 16384 / 1e11))
    # all-to-all: each rank's 4 tokens x top_k 2 routed copies over ep 4, x 1.2 imbalance, dispatch and combine
    a2a = 2 * 8 / 4 * 2 * 1024 * 1.2
    assert ep_comm("all_to_all") == pytest.approx(4 * 2 * (10 * us + 3 / 4 * a2a / 1e11))
    # TensorRT-LLM: the all-to-all only on a multi-node NVLink domain (the toy node is one host): gathers here
    assert ep_comm("all_to_all_mnnvl") == ep_comm("gather_tp")
    data = toy_profile_dict()
    data["node"]["gpus_per_host"] = 4  # a domain of 8 GPUs over two hosts, as GB200 NVL72's 72 over 18
    nvl = parse_profile(data, where="toy-nvl.yaml")
    assert nvl.gpus_per_node == 8  # the collectives see the whole NVLink domain
    assert ep_comm("all_to_all_mnnvl", nvl) == pytest.approx(ep_comm("all_to_all"))
    few = dataclasses.replace(eng, ep=2, dp=2, tp=1)  # ep 2 <= top_k 2: TensorRT-LLM gathers even there
    fw = dataclasses.replace(PLAIN, moe_exchange="all_to_all_mnnvl")
    step = decode_step(m, nvl, few, weights="bf16", kv_bytes=2.0, batch=4, context=100, fw=fw)
    assert step.ep_comm == pytest.approx(4 * 2 * (10 * us + 1 / 2 * 16384 / 1e11))


def test_kv_pool_memory_rules(toy_hw: HardwareProfile) -> None:
    m = gpt_like()
    total_rule = dataclasses.replace(PLAIN, memory_rule="total", memory_fraction=0.9)
    free_rule = dataclasses.replace(PLAIN, memory_rule="free", memory_fraction=0.9)
    gib80 = 80 * 2**30
    total = kv_pool_bytes(m, toy_hw, Engine(), weights="bf16", fw=total_rule)
    free = kv_pool_bytes(m, toy_hw, Engine(), weights="bf16", fw=free_rule)
    used = 0.9 * gib80 - total  # weights + activations + reserve
    assert free == pytest.approx(0.9 * (gib80 - used))  # TensorRT-LLM: a fraction of what is left
    assert free - total == pytest.approx(0.1 * used)


def test_agg_closed_loop_identities(toy_hw: HardwareProfile) -> None:
    m = gpt_like()
    dep = Deployment(fw=load_framework("vllm"), mode="agg", engine=Engine(tp=1), replicas=2)
    wl = Workload(isl=512, osl=64, concurrency=16)
    est = estimate(m, toy_hw, dep, wl)
    assert est.tpot_s == pytest.approx(sum(est.tpot_parts.values()))
    assert est.ttft_s == pytest.approx(sum(est.ttft_parts.values()))
    assert est.latency_s == pytest.approx(est.ttft_s + 63 * est.tpot_s)
    assert est.requests_per_s == pytest.approx(16 / est.latency_s)  # Little's law over the closed loop


def test_agg_one_request_per_rank(toy_hw: HardwareProfile) -> None:
    # one request per engine: it finds the engine idle, its prefill step costs the decode step (the weight
    # read, host time) plus its prefill less that weight read (prefill_in_step); then osl - 1 decode steps
    m, eng = gpt_like(), Engine(tp=1)
    dep = Deployment(fw=load_framework("vllm"), mode="agg", engine=eng, replicas=2)
    est = estimate(m, toy_hw, dep, Workload(isl=512, osl=64, concurrency=2))
    fw, step = load_framework("vllm"), est.pools[0].step
    alone = prefill_time(m, toy_hw, eng, weights="bf16", tokens=512, seq_len=512, fw=fw)
    riding = prefill_in_step(alone, step, chunks=1)  # 512 tokens fit one 8192-token chunk
    own = (fw.prefill_slowdown - 1) * alone.total  # the fitted serving slowdown of a request's own prompt
    assert est.ttft_s == pytest.approx(step.total + riding + own + fw.ttft_overhead_s)
    assert est.tpot_s == pytest.approx(step.total) and est.tpot_parts["prefill_mix"] == 0.0


def test_agg_ttft_of_a_prefill_first_framework_is_a_wave(toy_hw: HardwareProfile) -> None:
    # SGLang 0.5.1 runs waiting prompts before decodes and keeps decode tokens out of prefill steps: the 16
    # prompts of 1024 arrive together, 8 fill each 8192-token step, the first 8 get their token with step 1
    # and the rest with step 2 (mean 1.5 steps); they decode together, end together, and the next wave does
    # the same. A prefill step costs the step's fixed part plus 8 prompts riding (cost/serve_loop.closed_loop).
    m, eng = gpt_like(), Engine(tp=1)
    fw = load_framework("sglang@0.5.1")
    assert fw.policy == "prefill_first" and fw.prefill_slowdown == 1.0
    dep = Deployment(fw=load_framework("sglang@0.5.1"), mode="agg", engine=eng, replicas=1)
    est = estimate(m, toy_hw, dep, Workload(isl=1024, osl=64, concurrency=16))
    step = est.pools[0].step
    one = decode_step(m, toy_hw, eng, weights="bf16", kv_bytes=2.0, batch=1, context=1024 + 32, fw=fw).total
    fixed = one - (step.total - one) / 15
    alone = prefill_time(m, toy_hw, eng, weights="bf16", tokens=1024, seq_len=1024, fw=fw)
    prompts = 8 * prefill_in_step(alone, step, chunks=1)
    assert est.ttft_s == pytest.approx(1.5 * (fixed + prompts) + fw.ttft_overhead_s)


def test_saturation_when_kv_cannot_hold_the_concurrency(toy_hw: HardwareProfile) -> None:
    m = gpt_like()
    dep = Deployment(fw=load_framework("vllm"), mode="agg", engine=Engine(tp=1), replicas=1)
    held = estimate(m, toy_hw, dep, Workload(isl=1024, osl=1024, concurrency=1)).pools[0].max_concurrency
    fine = estimate(m, toy_hw, dep, Workload(isl=1024, osl=1024, concurrency=held))
    over = estimate(m, toy_hw, dep, Workload(isl=1024, osl=1024, concurrency=2 * held))
    assert not fine.saturated and over.saturated
    assert over.ttft_s > fine.latency_s  # the surplus waits about one request latency for a slot


def test_engine_rules() -> None:
    with pytest.raises(SpecError, match="ep"):
        Engine(tp=2, dp=1, ep=4)
    with pytest.raises(SpecError, match="num_attention_heads"):
        Engine(tp=3).check(gpt_like())
    with pytest.raises(SpecError, match="MoE"):
        Engine(tp=2, ep=2).check(gpt_like())
    assert Engine(tp=1, dp=8, ep=8).etp == 1 and Engine(tp=4, dp=2, ep=2).etp == 4


def test_for_deployment_applies_each_pools_launch_settings() -> None:
    """spec/serve.py for_deployment: the framework's values with Deployment.args (decode or agg engines)
    or prefill_args (a disaggregated deployment's prefill engines); unset settings keep the defaults."""
    from autopar.spec.serve import Deployment, Engine, EngineArgs, for_deployment

    dep = Deployment(
        fw=load_framework("sglang"),
        mode="disagg",
        engine=Engine(),
        replicas=1,
        prefill=Engine(),
        prefill_replicas=1,
        args=EngineArgs(max_batch_size=64),
        prefill_args=EngineArgs(max_num_tokens=2524, memory_fraction=0.7),
    )
    base = load_framework("sglang")
    dec, pre = for_deployment(dep), for_deployment(dep, "prefill")
    assert (dec.max_seqs, dec.chunk_tokens, dec.memory_fraction) == (64, base.chunk_tokens, base.memory_fraction)
    assert (pre.max_seqs, pre.chunk_tokens, pre.memory_fraction) == (base.max_seqs, 2524, 0.7)
    assert (dec.mixed_chunk, dec.max_prefill_tokens) == (False, 0)  # SGLang's defaults: off, its own 16384
    mixed = Deployment(
        fw=load_framework("sglang"), mode="agg", engine=Engine(), replicas=1, args=EngineArgs(mixed_chunk=True, max_prefill_tokens=2500)
    )
    assert (for_deployment(mixed).mixed_chunk, for_deployment(mixed).max_prefill_tokens) == (True, 2500)


def test_vllm_attention_dp_pads_the_moe_to_every_rank(toy_hw: HardwareProfile) -> None:
    # vLLM 0.12 with --data-parallel-size 2 (Framework.dp_padding): the idle rank runs the step padded to the
    # prompt rank's 4096 tokens and the MoE layer gathers both, so the experts compute 8192 tokens, not 4096
    m = gpt_like(moe=MoESpec(num_experts=8, top_k=2, expert_ffn_hidden_size=512), ffn_activation="swiglu")
    eng = Engine(tp=1, dp=2)  # expert TP 2: each GPU holds half of every expert's 512 columns

    def prefill(padding: bool) -> float:
        fw = dataclasses.replace(PLAIN, dp_padding=padding)
        return prefill_time(m, toy_hw, eng, weights="bf16", tokens=4096, seq_len=4096, fw=fw).compute

    # the other rank's 4096 tokens x 2 routes x 3 matrices x 2 FLOP x 1024 x 256: 12.9 GFLOP a layer, above
    # 1 GFLOP so at the flat 0.5 efficiency; both sizes are past the 12.6 us read of the 8 experts
    extra = 4096 * 2 * 3 * 2 * 1024 * 256
    assert prefill(True) - prefill(False) == pytest.approx(4 * extra / RATE)
    assert [load_framework(n).dp_padding for n in ("vllm", "sglang", "trtllm")] == [True, False, False]


def test_tensorrt_llm_sends_its_all_to_all_on_the_gb200_nvlink_domain_only() -> None:
    # Kimi-K2 (top-8 of 384 experts) on 16 GPUs, tp1 x attention-DP 16, ep16: TensorRT-LLM's MNNVL all-to-all
    # on GB200 (a 72-GPU NVLink domain of 4-GPU hosts: the EP group of 16 is on one "node"), its allgather and
    # reducescatter on B200 (8-GPU nodes, no multi-node NVLink: the group spans two)
    from autopar.cost.serve_experts import exchange_time as _exchange
    from autopar.io.profiles import load_hardware
    from autopar.spec.topology import span

    kimi, eng = load_model("kimi-k2"), Engine(tp=1, dp=16, ep=16)
    gb200, b200 = load_hardware("gb200"), load_hardware("b200")
    assert (gb200.gpus_per_node, gb200.host_gpus, b200.gpus_per_node, b200.host_gpus) == (72, 4, 8, 8)
    # the engine's 16 ranks lie in one domain; only among more ranks (a fifth engine of 16 at ranks 64-79)
    # would a group straddle two domains, 8 and 8
    assert span(size=16, stride=1, gpus_per_node=gb200.gpus_per_node, ranks=eng.gpus).intra
    assert span(size=16, stride=1, gpus_per_node=gb200.gpus_per_node, ranks=80).per_node == 8
    assert span(size=16, stride=1, gpus_per_node=b200.gpus_per_node, ranks=eng.gpus).nodes == 2
    for hw, same_as in ((gb200, "all_to_all"), (b200, "gather_tp")):
        got = _exchange(kimi, hw, eng, tokens=256, exchange="all_to_all_mnnvl")
        assert got == _exchange(kimi, hw, eng, tokens=256, exchange=same_as)
    # dispatch and combine on NVLink: 256 tokens / 16 ranks x top-8 x 7168 x 2 B x 1.2 = 2,201,190 B each, the
    # profile's intra all-to-all fit nearest 16 ranks (8: 25.2 us, 487.8 GB/s), 15/16 of the bytes on the wire
    a2a = 2 * 256 / 16 * 8 * 7168 * 1.2
    assert _exchange(kimi, gb200, eng, tokens=256, exchange="all_to_all") == pytest.approx(2 * (25.2e-6 + 15 / 16 * a2a / 487.8e9))
    # ep 8 is not above top-8: TensorRT-LLM gathers on GB200 as well
    eight = Engine(tp=1, dp=8, ep=8)
    assert _exchange(kimi, gb200, eight, tokens=256, exchange="all_to_all_mnnvl") == _exchange(
        kimi, gb200, eight, tokens=256, exchange="gather_tp"
    )


def test_attention_dp_ranks_wait_for_each_others_prompts(toy_hw: HardwareProfile, monkeypatch: pytest.MonkeyPatch) -> None:
    # vLLM's DP ranks step together (Framework.dp_padding): each of the 3 other ranks of a dp4 engine takes
    # 64 / 1024 new prompts a step, each 20 ms of the step it joins, so every step of this rank lasts
    # 3 x 0.02 x 64 / 1024 = 3.75 ms longer; one rank waits for nobody
    assert others_prompt_s(0.02, dp=4, concurrency=64, osl=1024) == pytest.approx(3 * 0.02 * 64 / 1024)
    assert others_prompt_s(0.02, dp=1, concurrency=64, osl=1024) == 0.0
    # in the loop: a dp2 MoE engine's TPOT carries the other rank's prompts, one term a step
    m = gpt_like(moe=MoESpec(num_experts=8, top_k=2, expert_ffn_hidden_size=512), ffn_activation="swiglu")
    eng = Engine(tp=1, dp=2)
    dep = Deployment(fw=PLAIN, mode="agg", engine=eng, replicas=1)
    wl = Workload(isl=1024, osl=128, concurrency=32, warmed=True)
    with_them = estimate(m, toy_hw, dep, wl)
    step = decode_step(m, toy_hw, eng, weights="bf16", kv_bytes=2.0, batch=16, context=1024 + 64, fw=PLAIN)
    alone = prefill_time(m, toy_hw, eng, weights="bf16", tokens=1024, seq_len=1024, fw=PLAIN)
    term = others_prompt_s(prefill_in_step(alone, step, chunks=1), dp=2, concurrency=16, osl=128)
    monkeypatch.setattr("autopar.cost.serve_loop.others_prompt_s", lambda *a, **k: 0.0)
    without = estimate(m, toy_hw, dep, wl)
    assert term > 0 and with_them.tpot_s - without.tpot_s == pytest.approx(term, rel=0.25)
