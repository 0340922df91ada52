"""calibrate's torch-free parts: --plan parsing, --scale-to-fit, and the three models it
holds runs against (FSDP2 state bytes, eager saved activations, collective bytes), with
every number derived by hand for the scaled Llama 3.1 8B that the README shows:
4 layers, hidden 256, 8 heads of 32, 2 KV heads, FFN 896, vocabulary 2048, 256 tokens."""

from __future__ import annotations

import pytest

from autopar.calibrate.predict import predict
from autopar.calibrate.request import BUDGETS, check_family, make_job, parse_plan, scale_to_fit
from autopar.cost import habits
from autopar.cost.traffic import step_traffic
from autopar.errors import SpecError
from autopar.io.models import load_model
from autopar.spec.plan import Plan

T = 256  # tokens per micro-batch (mbs 1 x seq 256)
BLOCK = 256 * 256 + 2 * 256 * 64 + 256 * 256 + 3 * 256 * 896 + 2 * 256  # wq, wk+wv, wo, w1/w2/w3, two norms
EMBED = 2048 * 256
TOTAL = 4 * BLOCK + EMBED + (EMBED + 256)  # blocks, embedding, output + final norm


@pytest.fixture(scope="module")
def small():
    return scale_to_fit(load_model("llama3.1-8b"), Plan(dp=1, tp=2, pp=1), BUDGETS["cpu"]).model


def test_scale_to_fit_says_how(small) -> None:
    scaling = scale_to_fit(load_model("llama3.1-8b"), Plan(dp=1, tp=2, pp=1), BUDGETS["cpu"])
    assert scaling.lines == (
        "layers 32 -> 4",
        "hidden 4096 -> 256",
        "heads 32 -> 8",
        "kv heads 8 -> 2",
        "head dim 128 -> 32",
        "ffn 14336 -> 896",
        "vocab 128256 -> 2048",
        "seq 8192 -> 256",
        "parameters 8.03B -> 4.46M",
    )
    assert small.total_params() == TOTAL == 4_458_752
    # tp 1 builds the same model (kv heads stay >= 2), so plans compare on one shape
    same = scale_to_fit(load_model("llama3.1-8b"), Plan(dp=2, tp=1, pp=1), BUDGETS["cpu"]).model
    assert same == small


def test_scale_keeps_a_layer_per_chunk() -> None:
    m = scale_to_fit(load_model("llama3.1-8b"), Plan(dp=1, tp=1, pp=2, vpp=4), BUDGETS["cpu"]).model
    assert m.layers == 8


def test_parse_plan() -> None:
    req = parse_plan("dp1,tp2,pp2,vpp2,mbs2,gb8,zero2,nosp,seq128")
    assert (req.plan.dp, req.plan.tp, req.plan.pp, req.plan.vpp, req.plan.mbs, req.plan.zero, req.plan.sp) == (1, 2, 2, 2, 2, 2, False)
    assert (req.global_batch, req.seq_len) == (8, 128)
    assert parse_plan("tp2").plan.zero == 3  # FSDP2 fully_shard by default
    for bad, words in (
        ("dp2,xx3", "unknown token 'xx3'"),
        ("dp2,dp2", "dp given twice"),
        ("tp0", "tp must be >= 1"),
        ("dp2,zero1", "zero1 with dp > 1"),
    ):
        with pytest.raises(SpecError, match=words):
            parse_plan(bad)


def test_moe_is_refused_with_the_reason() -> None:
    with pytest.raises(SpecError, match="MoE layers are not built by calibrate"):
        check_family(load_model("mixtral-8x7b"))


def test_state_bytes_fsdp2_per_rank(small) -> None:
    """4 + 4 + 8 bytes per parameter (fp32 sharded params, fp32 grads, AdamW m and v); norms whole under TP."""

    def ranks(text: str):
        req = parse_plan(text)
        return predict(small, req.plan, make_job(small, req, gpus=2)).ranks

    (dp2,) = ranks("dp2")
    assert (dp2.param_bytes, dp2.grad_bytes, dp2.optimizer_bytes) == (4 * TOTAL / 2, 4 * TOTAL / 2, 8 * TOTAL / 2)
    (tp2,) = ranks("tp2")
    per_tp_rank = 4 * ((BLOCK - 512) / 2 + 512) + EMBED / 2 + EMBED / 2 + 256
    assert tp2.param_bytes == 4 * per_tp_rank == 8_922_112
    first, last = ranks("pp2")
    assert first.param_bytes == 4 * (2 * BLOCK + EMBED) == 8_916_992
    assert last.param_bytes == 4 * (2 * BLOCK + EMBED + 256) == 8_918_016


def test_eager_activation_bytes(small) -> None:
    """habits.EAGER_TORCH, tensor by tensor: per norm fp32 input 4h + rstd 4 + bf16 normalized 2h; GEMM inputs 2h;
    Q, K, V, output 2(2q + 2kv); logsumexp 4a; SwiGLU 8f (bytes per token)."""
    norm = T * (4 * 256 + 4 + 2 * 256)
    attn = 2 * T * (2 * 256 + 2 * 64) + 4 * T * 8
    mlp = 8 * T * 896
    one = habits.dense_block_activation_bytes(small, habits.EAGER_TORCH, tokens=T, tp=1, sp=True)
    assert one == 2 * norm + 2 * 2 * T * 256 + attn + mlp == 3_221_504
    two = habits.dense_block_activation_bytes(small, habits.EAGER_TORCH, tokens=T, tp=2, sp=True)
    assert two == 2 * norm / 2 + 2 * 2 * T * 256 + attn / 2 + mlp / 2 == 1_741_824
    fused = habits.dense_block_activation_bytes(small, habits.FUSED, tokens=T, tp=1, sp=True)
    assert fused == T * 256 * 4 * 2 + T * (2 * (256 + 128) + 2 * 256) + T * 896 * 6 == 2_228_224


def test_context_parallel_chunks_and_bytes(small) -> None:
    from autopar.calibrate.request import cp_positions

    assert cp_positions(8, 2, 0) == [0, 1, 6, 7] and cp_positions(8, 2, 1) == [2, 3, 4, 5]  # causal balance
    half = T // 2
    # eager attention keeps the gathered K and V: 2(2q + 2kv cp) per local token
    cp2 = habits.dense_block_activation_bytes(small, habits.EAGER_TORCH, tokens=half, tp=1, sp=True, cp=2)
    assert cp2 == 2 * half * (6 * 256 + 4) + 2 * 2 * half * 256 + 2 * half * (512 + 2 * 64 * 2) + 4 * half * 8 + 8 * half * 896 == 1_643_520
    traffic = step_traffic(small, Plan(dp=1, tp=1, pp=1, cp=2, cp_comm="allgather", zero=3), seq_len=256, microbatches=1)
    kv = 2 * half * 2 * 64  # one of K or V, gathered: 2 bytes x 256 tokens x 64
    assert traffic == {
        "all_gather": 4 * 2 * kv + 2 * (2 * 4 * BLOCK + 2 * EMBED + 256),
        "reduce_scatter": 4 * 2 * kv + 4 * TOTAL,
    }  # FSDP over dp x cp = 2


def test_collective_bytes_per_step(small) -> None:
    x = 2 * T * 256  # one bf16 activation of a micro-batch
    dp2 = step_traffic(small, Plan(dp=2, tp=1, pp=1, zero=3), seq_len=256, microbatches=1)
    # FSDP2: blocks gathered in forward and again in backward, the root once; fp32 grads reduce-scattered
    assert dp2 == {"all_gather": 2 * (2 * 4 * BLOCK + 2 * EMBED + 256), "reduce_scatter": 4 * TOTAL}
    zero2 = step_traffic(small, Plan(dp=2, tp=1, pp=1, zero=2), seq_len=256, microbatches=1)
    assert zero2["all_gather"] == 2 * TOTAL
    tp2 = step_traffic(small, Plan(dp=1, tp=2, pp=1), seq_len=256, microbatches=2)
    # per micro-batch: 4 gathers + 4 scatters per block, embedding and output, the logits, 9 norm gradients
    assert tp2 == {"all_gather": 2 * (18 * x + 2 * T * 2048), "reduce_scatter": 2 * 18 * x, "all_reduce": 2 * 9 * 2 * 256}
    nosp = step_traffic(small, Plan(dp=1, tp=2, pp=1, sp=False), seq_len=256, microbatches=1)
    assert nosp == {"all_reduce": 18 * x, "all_gather": 2 * T * 2048}
    pp2 = step_traffic(small, Plan(dp=1, tp=1, pp=2), seq_len=256, microbatches=4, pp_rank=0)
    assert pp2 == {"send_recv": 4 * 2 * x}
    vpp = step_traffic(small, Plan(dp=1, tp=1, pp=2, vpp=2), seq_len=256, microbatches=4, pp_rank=0)
    assert vpp == {"send_recv": 4 * 2 * 3 * x}  # chunks 0 and 2 on rank 0: three boundary ends


def test_in_flight_per_schedule(small) -> None:
    def held(text: str) -> float:
        req = parse_plan(text)
        return predict(small, req.plan, make_job(small, req, gpus=2)).in_flight

    assert held("pp2,gb4") == 2  # 1F1B: min(m, p)
    assert held("pp2,vpp2,gb4") == 2.5  # interleaved: p (1 + (p-1)/(p v)) = 2 * 1.25
    assert held("dp2") == 1


def test_the_torch_free_modules_stay_torch_free() -> None:
    """Planning, prediction, comparison and rendering import neither torch nor a torch importer at top level."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[3] / "autopar"
    torch_users = {"llama", "parallel", "meters", "worker"}
    offenders = []
    for path in [
        *(root / "calibrate").glob("*.py"),
        root / "render" / "calibrate.py",
        root / "cost" / "habits.py",
        root / "cost" / "traffic.py",
    ]:
        if path.stem in torch_users and path.parent.name == "calibrate":
            continue
        for node in ast.parse(path.read_text()).body:
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else ([node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            )
            offenders += [
                f"{path.name}: {n}"
                for n in names
                if n.split(".")[0] == "torch"
                or n.startswith(("autopar.probe.launch", "autopar.probe.worker"))
                or any(n == f"autopar.calibrate.{u}" for u in torch_users)
            ]
    assert offenders == []


def _profile_with(corrections: dict) -> dict:
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parents[3]
    doc = yaml.safe_load((root / "autopar" / "data" / "profiles" / "h100-sxm.yaml").read_text())
    doc["corrections"] = corrections
    return doc


def test_profile_corrections_are_named_and_bounded() -> None:
    from autopar.errors import ProfileError
    from autopar.io.profiles import parse_profile

    ok = parse_profile(
        _profile_with({"activation_bytes_per_block": {"factor": 1.45, "stack": "eager-torch", "source": "a run"}}), where="p.yaml"
    )
    assert ok.correction("activation_bytes_per_block") == 1.45
    assert ok.correction("something_else") == 1.0
    for bad, words in (
        ({"activation_bytes_per_blok": {}}, "unknown correction 'activation_bytes_per_blok' (did you mean 'activation_bytes_per_block'?)"),
        (
            {"activation_bytes_per_block": {"factor": 7.0, "stack": "s", "source": "r"}},
            "p.yaml: corrections.activation_bytes_per_block.factor: must lie in [0.5, 3.0], got 7.0",
        ),
    ):
        with pytest.raises(ProfileError) as info:
            parse_profile(_profile_with(bad), where="p.yaml")
        assert words in str(info.value) and "\n" not in str(info.value)


def test_save_replaces_an_earlier_correction_block() -> None:
    from autopar.calibrate.save import MARK, _without_corrections

    text = f"name: x\n{MARK}corrections:\n  activation_bytes_per_block:\n    factor: 1.2\n# note\nraw:\n  a: 1\n"
    assert _without_corrections(text) == "name: x\n# note\nraw:\n  a: 1\n"


def test_top_plans_are_runnable_plan_strings() -> None:
    from autopar.calibrate.command import plan_text, top_plans

    texts, why = top_plans(load_model("llama3.1-8b"), 3, world=2, hardware="h100-sxm", scale=True, kind="cpu")
    assert why == "--hardware h100-sxm" and 1 <= len(texts) <= 3 and len(set(texts)) == len(texts)
    for text in texts:
        req = parse_plan(text)
        assert req.plan.gpus == 2 and req.global_batch == 8
        assert req.plan.pp == 1 or req.global_batch // (req.plan.dp * req.plan.mbs) >= req.plan.pp
    # ZeRO-1 over dp > 1 runs as FSDP2's ZeRO-3; at dp 1 the stage is kept (it shards nothing)
    assert plan_text(Plan(dp=2, tp=1, pp=1, zero=1, sp=False), 8) == "dp2,tp1,pp1,mbs1,gb8,zero3,nosp"
    assert plan_text(Plan(dp=1, tp=2, pp=2, vpp=2, zero=1), 8) == "dp1,tp2,pp2,vpp2,mbs1,gb8,zero1,sp"


def test_pipelines_need_pp_micro_batches(small) -> None:
    req = parse_plan("pp2,gb1")
    with pytest.raises(SpecError, match=r"at least pp \(2\) micro-batches per step; gb / \(dp \* mbs\) = 1"):
        make_job(small, req, gpus=2)


def test_an_eager_stack_counts_its_own_activation_bytes(small) -> None:
    """A stack profile with memory.activation_saves: eager-torch gets habits.EAGER_TORCH's bytes per dense
    layer (the ones calibrate measures to the byte), not the fused formula scaled by a factor."""
    from dataclasses import replace

    from autopar.cost.memory import layer_activation_bytes
    from autopar.spec.stack import NEUTRAL

    eager = replace(NEUTRAL, activation_saves="eager-torch")
    plan = Plan(dp=1, tp=2, pp=1, sp=True)
    assert layer_activation_bytes(small, "dense", tokens=T, plan=plan, stack=eager) == 1_741_824
    assert layer_activation_bytes(small, "dense", tokens=T, plan=plan, stack=NEUTRAL) == 1_114_112
    full = replace(plan, recompute="full")  # under full recompute only the layer input, either way
    assert layer_activation_bytes(small, "dense", tokens=T, plan=full, stack=eager) == 2 * T * 256 / 2
