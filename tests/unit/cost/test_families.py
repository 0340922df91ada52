"""MoE, MLA, Mamba-2, FP8 and long context: each formula against a hand-derived case.

Uses the toy profile of conftest.py (1e15 FLOP/s bf16, 2e15 fp8, efficiency 0.5,
sustained 0.75, HBM 1e12 B/s effective, intra 10 us + 100 GB/s).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from autopar.cost.compute import layer_time
from autopar.cost.flops import attention_fwd_flops, expert_gemms, model_flops_per_token, ssd_scan_flops
from autopar.cost.memory import layer_activation_bytes, memory_breakdown
from autopar.cost.shape import Dims, Shape
from autopar.cost.step import estimate
from autopar.errors import SpecError
from autopar.search.planner import enumerate_plans, search
from autopar.spec.families import MambaSpec, MLASpec, MoESpec
from autopar.spec.hardware import HardwareProfile
from autopar.spec.job import Job
from autopar.spec.layout import chunk_sizes, rank_kinds
from autopar.spec.model import ModelSpec
from autopar.spec.plan import Plan, validate
from tests.conftest import llama70b

TENSOR = 1e15 * 0.5 * 0.75  # toy bf16 GEMM rate


def moe_model(**moe: object) -> ModelSpec:
    spec = dict(num_experts=8, top_k=2, expert_ffn_hidden_size=2048)
    spec.update(moe)
    return ModelSpec(
        name="moe-toy",
        layers=4,
        hidden_size=1024,
        num_attention_heads=16,
        num_kv_heads=4,
        head_dim=64,
        ffn_hidden_size=2048,
        ffn_activation="swiglu",
        vocab_size=32000,
        seq_len=4096,
        max_seq_len=4096,
        tie_embeddings=False,
        moe=MoESpec(**spec),
    )  # type: ignore[arg-type]


def mamba_model(pattern: str = "M*M-", groups: int = 8) -> ModelSpec:
    return ModelSpec(
        name="hybrid-toy",
        layers=len(pattern),
        hidden_size=2560,
        num_attention_heads=40,
        num_kv_heads=8,
        head_dim=64,
        ffn_hidden_size=10240,
        ffn_activation="relu2",
        vocab_size=32000,
        seq_len=4096,
        max_seq_len=4096,
        tie_embeddings=True,
        mamba=MambaSpec(state_size=128, head_dim=64, expand=2, layer_pattern=pattern, num_groups=groups, chunk_size=256),
    )


# --- MoE ---------------------------------------------------------------------------


def test_moe_params_total_and_active() -> None:
    # router h*E = 8,192; experts 3*h*(E*f) = 3*1024*16384 = 50,331,648; active 3*1024*(2*2048) = 12,582,912
    m = moe_model()
    assert m.part_params("moe") == 8_192 + 50_331_648
    assert m.part_params("moe", active=True) == 8_192 + 12_582_912
    shared = moe_model(shared_experts=2, shared_expert_ffn_hidden_size=1024)
    assert shared.part_params("moe") - m.part_params("moe") == 3 * 1024 * 2048  # 2 shared x 1024 wide


def test_expert_gemms_split_by_ep_same_total_bigger_experts() -> None:
    # per rank: T*k*cf copies of 2*h*3*f FLOPs whatever ep is: 4096*2*2*1024*3*2048 = 1.031e11
    m = moe_model()
    for ep in (1, 2, 4, 8):
        gemms = expert_gemms(m, tokens=4096, ep=ep, etp=1)
        assert sum(g.flops * g.count for g in gemms) == pytest.approx(4096 * 2 * 2 * 1024 * 3 * 2048)
        assert gemms[0].count == 8 // ep and gemms[0].m == pytest.approx(ep * 4096 * 2 / 8)
    # capacity factor 1.25: the busiest expert does 25% more
    busy = expert_gemms(moe_model(capacity_factor=1.25), tokens=4096, ep=4, etp=1)
    assert busy[0].m == pytest.approx(1.25 * 4 * 4096 * 2 / 8)


def test_ep_all_to_all_hand_derived(toy_hw: HardwareProfile) -> None:
    # tp=1, 4096 tokens, top-2: 8192 copies x 1024 x 2 B = 16.78 MB per all-to-all on 4 ranks in a node:
    # 10 us + 3/4 * 16,777,216 / 1e11 = 135.8 us; dispatch + combine, forward + backward = 4 of them.
    m = moe_model()
    plan = Plan(dp=4, tp=1, pp=1, ep=4)
    t = layer_time(m, toy_hw, Shape(dtype="bf16", seq_len=4096, mbs=1), plan, "moe")
    assert t.ep_exposed == pytest.approx(4 * (10e-6 + 0.75 * 16_777_216 / 1e11))
    assert layer_time(m, toy_hw, Shape(dtype="bf16", seq_len=4096, mbs=1), replace(plan, ep=1, dp=4), "moe").ep_exposed == 0


def test_moe_plan_rules() -> None:
    m = moe_model()
    job = Job(gpus=16, gpus_per_node=8, global_batch=64, seq_len=4096)
    with pytest.raises(SpecError, match="must be divisible by ep"):
        validate(Plan(dp=16, tp=1, pp=1, ep=3), m, job)
    with pytest.raises(SpecError, match=r"ep \(8\) must divide dp\*cp \(4\*1\)"):
        validate(Plan(dp=4, tp=4, pp=1, ep=8), m, job)
    plans = list(enumerate_plans(m, job))
    assert {p.ep for p in plans} == {1, 2, 4, 8}
    assert {p.etp for p in plans if p.tp == 4} == {1, 4}
    for p in plans[:: max(1, len(plans) // 200)]:
        validate(p, m, job)


def test_expert_state_sharded_by_ep(toy_hw: HardwareProfile) -> None:
    m = moe_model(num_experts=64, expert_ffn_hidden_size=4096)
    job = Job(gpus=8, gpus_per_node=8, global_batch=64, seq_len=4096)
    one = memory_breakdown(m, job, Plan(dp=8, tp=1, pp=1, ep=1, zero=0))
    eight = memory_breakdown(m, job, Plan(dp=8, tp=1, pp=1, ep=8, zero=0))
    experts = 4 * 64 * 3 * 1024 * 4096  # routed weights of 4 layers
    assert one.weights - eight.weights == pytest.approx(2 * experts * 7 / 8)  # bf16 weights, 7/8 now elsewhere


# --- MLA -----------------------------------------------------------------------------


def mla_model() -> ModelSpec:
    return ModelSpec(
        name="mla-toy",
        layers=2,
        hidden_size=7168,
        num_attention_heads=128,
        num_kv_heads=128,
        head_dim=56,
        ffn_hidden_size=18432,
        ffn_activation="swiglu",
        vocab_size=129280,
        seq_len=4096,
        max_seq_len=4096,
        tie_embeddings=False,
        mla=MLASpec(q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128),
    )


def test_mla_params_deepseek_v3_shapes() -> None:
    # q: 7168*1536 + 1536*128*192 + 1536 (norm); kv: 7168*576 + 512 (norm) + 512*128*256; o: 128*128*7168
    q = 11_010_048 + 37_748_736 + 1_536
    kv = 4_128_768 + 512 + 16_777_216
    o = 117_440_512
    assert mla_model().attention_params() == q + kv + o == 187_107_328


def test_mla_attention_flops_use_qk_and_v_widths() -> None:
    # 2*b*s*s*a*(d_qk + d_v)/2 = 2*4096*4096*128*320/2
    assert attention_fwd_flops(mla_model(), seq_len=4096, batch=1, tp=1, cp=1) == 4096 * 4096 * 128 * 320
    # GQA/MHA reduces to 4*b*s^2*a*d/2
    gqa = llama70b()
    assert attention_fwd_flops(gqa, seq_len=8192, batch=1, tp=8, cp=2) == 4 * 8192 * 8192 * 8 * 128 / 2 / 2


# --- Mamba-2 and hybrids ----------------------------------------------------------------


def test_mamba_params_and_scan_flops() -> None:
    m = mamba_model(groups=1)
    # in_proj 2560 x (2*5120 + 2*128 + 80) = 27,074,560; conv (5120 + 256) x 5 = 26,880; A, D, dt 3*80;
    # norm 5120; out_proj 5120 x 2560 = 13,107,200
    assert m.part_params("mamba") == 27_074_560 + 26_880 + 240 + 5_120 + 13_107_200
    # SSD per token: H*(2Q(N+P) + 4NP) = 80*(2*256*192 + 4*128*64) = 10,485,760
    assert ssd_scan_flops(m, tokens=1, tp=1) == 10_485_760
    assert ssd_scan_flops(m, tokens=1, tp=2) == 10_485_760 / 2


def test_hybrid_layout_and_kinds() -> None:
    m = mamba_model("MM*-MM*-")
    assert m.layer_kinds() == ("mamba", "mamba", "attention", "mlp") * 2
    assert chunk_sizes(8, 3) == [3, 3, 2]
    ranks = rank_kinds(m.layer_kinds(), 2, 1)
    assert ranks[0] == {"mamba": 2, "attention": 1, "mlp": 1} == ranks[1]
    interleaved = rank_kinds(m.layer_kinds(), 2, 2)  # chunks MM | *- | MM | *-: rank 0 gets chunks 0 and 2
    assert interleaved[0] == {"mamba": 4} and interleaved[1] == {"attention": 2, "mlp": 2}


def test_mamba_cp_is_all_to_all_and_needs_heads(toy_hw: HardwareProfile) -> None:
    m = mamba_model()
    shape = Shape(dtype="bf16", seq_len=4096, mbs=1)
    no_cp = layer_time(m, toy_hw, shape, Plan(dp=1, tp=1, pp=1), "mamba")
    cp2 = layer_time(m, toy_hw, shape, Plan(dp=1, tp=1, pp=1, cp=2), "mamba")
    assert no_cp.cp_exposed == 0 and cp2.cp_exposed > 0
    assert cp2.fwd < no_cp.fwd  # each rank scans half the tokens' worth of heads
    job = Job(gpus=8, gpus_per_node=8, global_batch=8, seq_len=4096)
    with pytest.raises(SpecError, match=r"Mamba heads .* and groups .* must be divisible by tp"):
        validate(Plan(dp=1, tp=8, pp=1), mamba_model(groups=1), job)


# --- FP8 -------------------------------------------------------------------------------


def test_fp8_gemms_faster_weights_copied_mfu_against_fp8(toy_hw: HardwareProfile) -> None:
    m = llama70b()
    plan = Plan(dp=1, tp=8, pp=8)
    bf16 = estimate(m, toy_hw, Job(gpus=64, gpus_per_node=8, global_batch=64, seq_len=8192), plan)
    fp8 = estimate(m, toy_hw, Job(gpus=64, gpus_per_node=8, global_batch=64, seq_len=8192, dtype="fp8"), plan)
    assert fp8.step_time_s < bf16.step_time_s
    # toy fp8 curve falls back to bf16 efficiency at twice the peak: GEMMs take half the time, attention the same
    assert fp8.time.compute > bf16.time.compute / 2
    # bf16 weight (2 B) plus the fp8 copy and its transpose (2 B)
    assert fp8.memory.weights == pytest.approx(bf16.memory.weights * 2)
    # MFU against the peak the GEMMs run at (toy: fp8 2,000 TFLOP/s, bf16 1,000)
    assert fp8.mfu == pytest.approx(fp8.model_tflops_per_gpu * 1e12 / toy_hw.peak("fp8"))
    assert bf16.mfu == pytest.approx(bf16.model_tflops_per_gpu * 1e12 / toy_hw.peak("bf16"))


# --- long context ----------------------------------------------------------------------------


@pytest.mark.parametrize("seq", [4096, 32768, 262144, 1048576])
def test_long_context_scaling(toy_hw: HardwareProfile, seq: int) -> None:
    # with flat efficiencies: attention time grows as s^2, MLP time and activation memory as s
    m = llama70b()
    plan = Plan(dp=1, tp=8, pp=1, cp=1)
    base, big = Shape(dtype="bf16", seq_len=4096, mbs=1), Shape(dtype="bf16", seq_len=seq, mbs=1)
    r = seq / 4096
    attn0, attn1 = (layer_time(m, toy_hw, s, plan, "attention") for s in (base, big))
    mlp0, mlp1 = (layer_time(m, toy_hw, s, plan, "mlp") for s in (base, big))
    assert mlp1.fwd == pytest.approx(r * mlp0.fwd, rel=1e-9)
    core = attention_fwd_flops(m, seq_len=seq, batch=1, tp=8, cp=1) / (1e15 * 0.5 * 0.75)
    core0 = attention_fwd_flops(m, seq_len=4096, batch=1, tp=8, cp=1) / (1e15 * 0.5 * 0.75)
    assert core == pytest.approx(r * r * core0)
    assert attn1.fwd - core == pytest.approx(r * (attn0.fwd - core0), rel=1e-9)  # projections, rope, norms: linear
    acts0, acts1 = (layer_activation_bytes(m, "dense", tokens=t, plan=plan) for t in (4096, seq))
    assert acts1 == pytest.approx(r * acts0)


def test_cp_variants_ring_hides_allgather_does_not(toy_hw: HardwareProfile) -> None:
    m = llama70b()
    shape = Shape(dtype="bf16", seq_len=131072, mbs=1)
    ring = layer_time(m, toy_hw, shape, Plan(dp=1, tp=8, pp=1, cp=4), "attention")
    gather = layer_time(m, toy_hw, shape, Plan(dp=1, tp=8, pp=1, cp=4, cp_comm="allgather"), "attention")
    # 128K tokens: attention per chunk dwarfs the K/V transfer, the ring hides it completely
    assert ring.cp_exposed == 0.0 and gather.cp_exposed > 0
    # all-gather then reduce-scatter of the whole sequence's K/V: 131072 * 2*1024/8 * 2 B = 67.1 MB, across nodes
    # (cp4 over tp8 = 1 rank per node): 2 x (20 us + 3/4 * 67,108,864 / 1e10)
    assert gather.cp_exposed == pytest.approx(2 * (20e-6 + 0.75 * 67_108_864 / 1e10))


def test_search_picks_cp_for_long_sequences(toy_hw: HardwareProfile) -> None:
    m = replace(llama70b(), max_seq_len=131072)
    job = Job(gpus=64, gpus_per_node=8, global_batch=8, seq_len=131072)
    best = search(m, toy_hw, job).ranked[0].plan
    assert best.cp >= 2


def test_model_flops_moe_counts_active_experts() -> None:
    m = moe_model()
    dense_equiv = ModelSpec(
        name="d",
        layers=4,
        hidden_size=1024,
        num_attention_heads=16,
        num_kv_heads=4,
        head_dim=64,
        ffn_hidden_size=2 * 2048,
        ffn_activation="swiglu",
        vocab_size=32000,
        seq_len=4096,
        max_seq_len=4096,
        tie_embeddings=False,
    )
    # top-2 of 2048-wide experts multiply like one 4096-wide MLP, plus the router (h*E per layer)
    assert model_flops_per_token(m, 4096) == pytest.approx(model_flops_per_token(dense_equiv, 4096) + 6 * 4 * 1024 * 8)


def test_ep_all_to_all_hidden_when_pipelined(toy_hw: HardwareProfile) -> None:
    # pp > 1 pairs micro-batches: the all-to-all hides behind the layer's own compute (up to fwd + bwd)
    m = moe_model()
    shape = Shape(dtype="bf16", seq_len=4096, mbs=1)
    flat = layer_time(m, toy_hw, shape, Plan(dp=4, tp=1, pp=1, ep=4), "moe")
    piped = layer_time(m, toy_hw, shape, Plan(dp=4, tp=1, pp=2, ep=4), "moe")
    hidden = min(flat.ep_exposed, flat.fwd + flat.bwd)
    assert piped.ep_exposed == pytest.approx(flat.ep_exposed - hidden)
    assert piped.overlap_penalty == pytest.approx(flat.overlap_penalty + (toy_hw.compute_slowdown - 1) * hidden)


def test_fp8_keeps_gemm_inputs_in_one_byte() -> None:
    # GPT-like block, tp=1: bf16 keeps 34 s*b*h bytes; FP8 saves 1 B per element on the two sub-layer inputs (2h),
    # the attention output (h) and the GELU output (4h): 34 - 7 = 27 s*b*h
    from tests.conftest import gpt_like

    plan = Plan(dp=1, tp=1, pp=1, sp=False)
    bf16 = layer_activation_bytes(gpt_like(), "dense", tokens=2048, plan=plan)
    fp8 = layer_activation_bytes(gpt_like(), "dense", tokens=2048, plan=plan, fp8=True)
    sbh = 2048 * 1024
    assert bf16 == 34 * sbh
    assert fp8 == 34 * sbh - (1 + 1) * sbh - 1 * sbh - 4 * sbh


def test_ep_exchange_across_nodes_node_aware() -> None:
    # EP 16 over 2 nodes (8 per node), top-2 of 8 experts: a token's experts sit on 2*(1 - (1/2)^2) = 1.5 nodes,
    # 0.75 of them remote; network 4096 tok * 0.75 * 1024 * 2 B / 10 GB/s; NVLink fan-out of 8192 copies * 7/8.
    from autopar.cost.compute import LayerPlan
    from autopar.cost.experts import _ep_exchange
    from autopar.io.profiles import parse_profile
    from tests.conftest import toy_profile_dict

    hw = parse_profile(toy_profile_dict(), where="toy")
    m = moe_model(num_experts=16)
    plan = Plan(dp=16, tp=1, pp=1, ep=16)
    network = 4096 * 0.75 * 1024 * 2 / 1e10
    fan_out = 8192 * 1024 * 2 * 7 / 8 / 1e11
    assert _ep_exchange(m, hw, LayerPlan.of(plan).dims, plan.ep, 4096, 2) == pytest.approx(20e-6 + max(network, fan_out))
    # node-limited routing caps the distinct nodes: with 8 nodes and top-8, 8*(1-(7/8)^8) = 5.25 -> 4
    wide = moe_model(num_experts=64, top_k=8, max_nodes_per_token=4)
    plan64 = Plan(dp=64, tp=1, pp=1, ep=64)
    capped = 4096 * 4 * 7 / 8 * 1024 * 2 / 1e10
    fan_out64 = 4096 * 8 * 1024 * 2 * 7 / 8 / 1e11
    assert _ep_exchange(wide, hw, LayerPlan.of(plan64).dims, plan64.ep, 4096, 2) == pytest.approx(20e-6 + max(capped, fan_out64))


def test_a_moe_layers_kept_exchange_and_gemms_hold_what_they_read() -> None:
    # experts.py keeps _ep_exchange per (tp, cp, ep, tokens, bytes, over_tp) and the GEMMs per (dtype, tokens,
    # tp, ep, etp): inputs that differ in one of them alone give their own answers (toy profile: intra 10 us +
    # 100 GB/s on 8 GPUs a node, inter 20 us + 10 GB/s; top-2 of 16 experts, 4,096 tokens make 8,192 copies)
    from autopar.cost.compute import LayerPlan
    from autopar.cost.experts import _ep_exchange, _gemms
    from autopar.io.profiles import parse_profile
    from tests.conftest import toy_profile_dict

    hw = parse_profile(toy_profile_dict(), where="toy")
    m = moe_model(num_experts=16)

    def dims(tp: int, ep: int) -> Dims:
        return LayerPlan.of(Plan(dp=ep, tp=tp, pp=1, ep=ep)).dims

    network = 4096 * 0.75 * 1024 * 2 / 1e10  # EP 16 on two nodes: 0.75 of a token's 1.5 nodes remote
    fan_out = 8192 * 1024 * 2 * 7 / 8 / 1e11
    assert _ep_exchange(m, hw, dims(1, 16), 16, 4096, 2) == pytest.approx(20e-6 + max(network, fan_out))
    assert _ep_exchange(m, hw, dims(1, 16), 16, 4096, 1) == pytest.approx(20e-6 + max(network, fan_out) / 2)  # FP8 dispatch
    assert _ep_exchange(m, hw, dims(1, 16), 16, 2048, 2) == pytest.approx(20e-6 + max(network, fan_out) / 2)
    # EP 8 on one node: an all-to-all of every copy, 7/8 of it on the wire
    assert _ep_exchange(m, hw, dims(1, 8), 8, 4096, 2) == pytest.approx(10e-6 + 7 / 8 * 8192 * 1024 * 2 / 1e11)
    # EP 8 two GPUs apart (tp 2): 4 a node on two nodes, the network's share as at EP 16
    assert _ep_exchange(m, hw, dims(2, 8), 8, 4096, 2) == pytest.approx(20e-6 + network)
    # the GEMMs: tp 1, ep 2 holds 8 experts of 4,096 x 2 / 16 x 2 = 1,024 rows; ep 4, 4 experts of 2,048
    (first, *_), _, _ = _gemms(m, hw, "bf16", 4096, 1, 2, 1)
    assert (first.m, first.n, first.k, first.count) == (1024, 4096, 1024, 8)
    (first, *_), _, _ = _gemms(m, hw, "bf16", 4096, 1, 4, 1)
    assert (first.m, first.n, first.k, first.count) == (2048, 4096, 1024, 4)
    # tp 2, etp 2: the experts see the tokens gathered over TP, each split in two
    (first, *_), _, _ = _gemms(m, hw, "bf16", 4096, 2, 4, 2)
    assert (first.m, first.n, first.k, first.count) == (2048, 2048, 1024, 4)
    (first, *_), _, _ = _gemms(m, hw, "bf16", 4096, 2, 4, 1)
    assert (first.m, first.n, first.k, first.count) == (1024, 4096, 1024, 4)
    # the dtype: fp8 at twice the toy's peak
    bf16, fp8 = _gemms(m, hw, "bf16", 4096, 1, 2, 1)[1], _gemms(m, hw, "fp8", 4096, 1, 2, 1)[1]
    assert fp8 == pytest.approx(bf16 / 2)
