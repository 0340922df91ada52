"""The Megatron-LM launch, checked by megatron-core's own code.

megatron-core 0.16.1 (the pinned release, a CPU wheel on PyPI; the ``frameworks`` extra) builds the
network from the emitted words on the meta device: ``TransformerConfig`` / ``MLATransformerConfig``
validate the architecture in ``__post_init__`` and ``GPTModel`` holds the parameters, which must
match autopar's count within 0.5%. Where ``MEGATRON_LM_PATH`` points to a Megatron-LM checkout at
core_v0.16.1, its own ``parse_args`` and ``validate_args`` read the whole command at the job's world
size, and its ``core_transformer_config_from_args`` gives the same config.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import sys
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from autopar.emit import megatron
from autopar.io.models import load_model
from autopar.spec.job import Job
from autopar.spec.model import ModelSpec
from autopar.spec.plan import Plan
from tests.support.megatron_words import PARALLEL, TRAINING, config_kwargs, split_command
from tests.support.triton_stub import triton_if_missing

mcore = pytest.importorskip("megatron.core", reason="megatron-core is not installed (pip install -e '.[frameworks]')")

# (preset, plan, job): plans that use what each family needs: GQA+TP+SP+uneven PP, EP/ETP, MLA+EP.
CASES = {
    "llama3.1-8b": (Plan(dp=2, tp=2, pp=3, cp=1, mbs=1), Job(gpus=12, gpus_per_node=4, global_batch=24, seq_len=8192)),
    "mixtral-8x7b": (Plan(dp=4, tp=2, pp=2, ep=4, etp=1, vpp=2, mbs=1), Job(gpus=16, gpus_per_node=8, global_batch=32, seq_len=4096)),
    "qwen3-30b-a3b": (
        Plan(dp=8, tp=1, pp=2, ep=8, cp=1, recompute="selective"),
        Job(gpus=16, gpus_per_node=8, global_batch=64, seq_len=4096),
    ),
    "deepseek-v3": (
        Plan(dp=32, tp=2, pp=8, ep=32, etp=1, recompute="full"),
        Job(gpus=512, gpus_per_node=8, global_batch=1024, seq_len=4096),
    ),
}


def emitted(name: str) -> tuple[ModelSpec, Plan, Job, dict[str, list[str]]]:
    model = load_model(name)
    plan, job = CASES[name]
    line = megatron.megatron_command(
        model, plan, job, nnodes=job.gpus // min(job.gpus, job.gpus_per_node), nproc_per_node=min(job.gpus, job.gpus_per_node)
    )
    return model, plan, job, split_command(line, megatron.entry_point(model))


@pytest.fixture(scope="module")
def single_rank(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """megatron-core's parallel state on one gloo rank: the whole model on this process.

    The rendezvous is a file, not a TCP port: other test runs on the machine cannot collide with it.
    """
    import torch.distributed as dist
    from megatron.core import parallel_state

    if not dist.is_initialized():
        store = tmp_path_factory.mktemp("gloo") / "store"
        dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    parallel_state.initialize_model_parallel()
    yield
    parallel_state.destroy_model_parallel()


def build_gpt(args: dict[str, list[str]]) -> Any:
    """megatron-core's GPTModel from the emitted flags, on the meta device, as Megatron-LM's builder makes it."""
    import torch
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_decoder_block_spec, get_gpt_layer_local_spec
    from megatron.core.transformer.transformer_config import MLATransformerConfig, TransformerConfig

    cls = MLATransformerConfig if "--multi-latent-attention" in args else TransformerConfig
    kw, used = config_kwargs(args, cls)
    left = set(args) - used - TRAINING
    assert not left, f"flags neither megatron-core's nor known training flags: {sorted(left)}"
    for name in PARALLEL:  # the whole model on one rank
        kw.pop(name, None)
    # CPU build: no TE grouped GEMM (experts as separate MLPs, the same weights), no FP8 (TE), and the
    # all-gather dispatcher (the all-to-all one opens a CUDA stream); dispatchers hold no weights
    kw.update(use_cpu_initialization=True, perform_initialization=False, moe_grouped_gemm=False, fp8=None)
    if kw.get("moe_token_dispatcher_type") == "alltoall":
        kw["moe_token_dispatcher_type"] = "allgather"
    config = cls(**kw)
    if config.num_moe_experts:
        spec = get_gpt_decoder_block_spec(config, use_transformer_engine=False, normalization=config.normalization)
    else:
        spec = get_gpt_layer_local_spec(
            qk_layernorm=config.qk_layernorm, normalization=config.normalization, multi_latent_attention=config.multi_latent_attention
        )
    if cls is MLATransformerConfig:  # the local attention kernel cannot take MLA's head widths; it holds no weights
        from megatron.core.transformer.identity_op import IdentityOp

        for layer in getattr(spec, "layer_specs", [spec]):
            layer.submodules.self_attention.submodules.core_attention = IdentityOp
    # MLA's rotary tables ignore use_cpu_initialization at the pin and ask CUDA for a device, and MLA
    # takes TransformerEngine for present when its extension module imports (it does, without TE)
    with (
        torch.device("meta"),
        mock.patch("torch.cuda.current_device", lambda: "cpu"),
        mock.patch("megatron.core.transformer.multi_latent_attention.HAVE_TE", False),
    ):
        return config, GPTModel(
            config=config,
            transformer_layer_spec=spec,
            vocab_size=int(args["--padded-vocab-size"][0]),
            max_sequence_length=int(args["--max-position-embeddings"][0]),
            share_embeddings_and_output_weights="--untie-embeddings-and-output-weights" not in args,
            position_embedding_type=args["--position-embedding-type"][0],
            rotary_base=int(args["--rotary-base"][0]) if "--rotary-base" in args else 10000,
            rope_scaling="--use-rope-scaling" in args,
        )  # as the GPT builder passes it at the pin


PARAMS: dict[str, tuple[int, int]] = {}  # preset -> (megatron-core, autopar), printed at the end


@pytest.mark.parametrize("name", sorted(CASES))
def test_megatron_core_builds_the_planned_model(name: str, single_rank: Any) -> None:
    model, plan, _, args = emitted(name)
    config, gpt = build_gpt(args)
    built = sum(p.numel() for p in gpt.parameters())
    PARAMS[name] = (built, model.total_params())
    assert abs(built - model.total_params()) / model.total_params() < 0.005, (built, model.total_params())
    # what the estimate assumed, as megatron-core read it
    assert config.normalization == "RMSNorm" and not config.add_bias_linear
    assert config.hidden_dropout == 0 and config.attention_dropout == 0
    assert config.gated_linear_unit
    assert gpt.position_embedding_type == "rope"  # and so no learned position table:
    assert not any("position_embeddings" in n for n, _ in gpt.named_parameters())
    if model.moe is not None:
        assert config.num_moe_experts == model.moe.num_experts and config.moe_router_topk == model.moe.top_k
        assert config.moe_ffn_hidden_size == model.moe.expert_ffn_hidden_size
        assert args["--moe-token-dispatcher-type"] == ["alltoall"] and "--moe-grouped-gemm" in args
        assert int(args["--expert-model-parallel-size"][0]) == plan.ep
        assert int(args["--expert-tensor-parallel-size"][0]) == plan.etp
    if model.num_kv_heads != model.num_attention_heads and model.mla is None:
        assert config.num_query_groups == model.num_kv_heads


def test_parameter_counts_agree_exactly_where_autopar_counts_every_weight(single_rank: Any) -> None:
    """llama3.1-8b: Megatron's GPT has exactly the 8,030,261,248 weights of meta-llama/Llama-3.1-8B, and
    Llama 3.1's rope: base 500000 (config.json rope_theta) with the llama3 frequency scaling."""
    _, _, _, args = emitted("llama3.1-8b")
    _, gpt = build_gpt(args)
    assert sum(p.numel() for p in gpt.parameters()) == 8_030_261_248
    assert gpt.rotary_pos_emb is not None and gpt.rotary_scaling
    assert args["--rotary-base"] == ["500000"] and args["--rope-scaling-factor"] == ["8.0"]


def test_deepseek_dense_prefix_and_shared_expert(single_rank: Any) -> None:
    _, _, _, args = emitted("deepseek-v3")
    config, gpt = build_gpt(args)
    assert config.moe_layer_freq == [0] * 3 + [1] * 58
    assert config.moe_shared_expert_intermediate_size == 2048
    assert config.q_lora_rank == 1536 and config.kv_lora_rank == 512 and config.qk_pos_emb_head_dim == 64
    names = [n for n, _ in gpt.named_parameters()]
    assert any("decoder.layers.2.mlp.linear_fc1" in n for n in names)  # layer 3 is dense
    assert any("decoder.layers.3.mlp.shared_experts" in n for n in names)


def test_pipeline_layout_is_the_estimates_split() -> None:
    """llama3.1-8b, 32 layers on pp=3: the estimate's chunk_sizes is 11, 11, 10, and so is the layout."""
    _, _, _, args = emitted("llama3.1-8b")
    assert args["--pipeline-model-parallel-layout"] == ["Et*11|t*11|t*10L"]


@pytest.mark.parametrize(("layers", "pp", "vpp"), [(61, 16, 3), (70, 32, 1), (126, 32, 2), (32, 6, 1), (32, 3, 1)])
def test_a_long_layout_reads_as_the_plain_one(layers: int, pp: int, vpp: int) -> None:
    """Past 60 characters the layout repeats runs, (t*n|)*k: megatron-core's parser reads the same chunks."""
    from megatron.core.transformer.pipeline_parallel_layer_layout import PipelineParallelLayerLayout

    counts = megatron.stage_layout(layers, pp, vpp)
    plain = "E" + "|".join(f"t*{n}" for n in counts) + "L"
    short = megatron.layout_string(counts)
    assert len(short) <= megatron.LAYOUT_PLAIN_MAX
    assert (short == plain) == (len(plain) <= megatron.LAYOUT_PLAIN_MAX)
    parse = PipelineParallelLayerLayout.parse_str_to_list
    assert parse(short) == parse(plain)


def test_megatron_core_reads_the_hybrid_launch() -> None:
    """nemotron-h-8b: megatron-core's own pattern allocation takes the emitted --hybrid-override-pattern for
    --num-layers, and TransformerConfig takes the Mamba widths. (Building the MambaModel needs mamba_ssm's
    CUDA kernels, which MambaMixer imports at construction; Megatron-LM's parse_args covers the entry point
    where MEGATRON_LM_PATH is set.)"""
    from megatron.core.ssm.mamba_hybrid_layer_allocation import allocate_layers
    from megatron.core.transformer.transformer_config import TransformerConfig

    model = load_model("nemotron-h-8b")
    job = Job(gpus=8, gpus_per_node=8, global_batch=16, seq_len=8192)
    line = megatron.megatron_command(model, Plan(dp=4, tp=2, pp=1), job, nnodes=1, nproc_per_node=8)
    assert megatron.entry_point(model) == "pretrain_mamba.py" and " pretrain_mamba.py " in line
    args = split_command(line, "pretrain_mamba.py")
    layers = allocate_layers(int(args["--num-layers"][0]), 0.0, 0.0, args["--hybrid-override-pattern"][0])
    assert "".join(layers) == model.mamba.layer_pattern
    kw, used = config_kwargs(args, TransformerConfig)
    assert not set(args) - used - TRAINING
    for name in PARALLEL:
        kw.pop(name, None)
    config = TransformerConfig(**kw)
    assert config.mamba_num_heads * config.mamba_head_dim == model.mamba.inner(model.hidden_size)
    assert (config.mamba_state_dim, config.mamba_num_groups) == (model.mamba.state_size, model.mamba.num_groups)
    assert args["--position-embedding-type"] == ["none"]


# --- Megatron-LM's own parse_args, where a checkout is at hand ------------------------------------


def _megatron_lm() -> Path:
    root = os.environ.get("MEGATRON_LM_PATH")
    if not root:
        pytest.skip("MEGATRON_LM_PATH is not set (a Megatron-LM checkout at core_v0.16.1 runs parse_args)")
    path = Path(root)
    if not (path / "megatron" / "training" / "arguments.py").exists():
        pytest.skip(f"MEGATRON_LM_PATH={root} has no megatron/training/arguments.py")
    return path


def parse_with_megatron_lm(root: Path, words: list[str], world: int, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.syspath_prepend(str(root))
    for name in [m for m in sys.modules if m == "megatron" or m.startswith("megatron.")]:
        monkeypatch.delitem(sys.modules, name)  # the checkout's megatron, not the installed megatron-core
    try:
        with triton_if_missing():
            import megatron.training.arguments as arguments
    except ImportError as exc:  # its training package needs more than megatron-core (six, regex)
        pytest.skip(f"Megatron-LM's training package does not import here: {exc}")
    # the GPU it asks about: a Hopper, as the profiles are
    monkeypatch.setattr(arguments, "get_device_arch_version", lambda: 9)
    monkeypatch.setattr("torch.cuda.get_device_capability", lambda *a: (9, 0))
    monkeypatch.setattr(sys, "argv", ["pretrain", *words])
    args = arguments.parse_args()
    args.world_size, args.rank = world, 0
    arguments.validate_args(args, {})
    return args, arguments


LAUNCHES = [
    *[(name, None) for name in sorted(CASES)],
    ("nemotron-h-8b", (Plan(dp=2, tp=2, pp=2, mbs=1), Job(gpus=8, gpus_per_node=8, global_batch=16, seq_len=8192))),
    (
        "llama3.1-70b",
        (
            Plan(dp=2, tp=4, pp=2, cp=2, cp_comm="allgather", zero=3, mbs=1),
            Job(gpus=32, gpus_per_node=8, global_batch=32, seq_len=16384, dtype="fp8"),
        ),
    ),
]


@pytest.mark.parametrize(("name", "case"), LAUNCHES, ids=[n for n, _ in LAUNCHES])
def test_megatron_lm_parse_args_accepts_the_launch(name: str, case: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _megatron_lm()
    model = load_model(name)
    plan, job = case or CASES[name]
    line = megatron.megatron_command(
        model, plan, job, nnodes=max(1, job.gpus // job.gpus_per_node), nproc_per_node=min(job.gpus, job.gpus_per_node)
    )
    env_words, _, rest = line.partition("torchrun")
    for word in env_words.split():
        key, _, value = word.partition("=")
        monkeypatch.setenv(key, value)
    words = shlex.split(rest.split(megatron.entry_point(model), 1)[1])
    args, arguments = parse_with_megatron_lm(root, words, job.gpus, monkeypatch)
    assert args.tensor_model_parallel_size == plan.tp and args.context_parallel_size == plan.cp
    assert args.data_parallel_size == plan.dp
    args.apply_rope_fusion = False  # TransformerConfig checks that TransformerEngine is installed for it
    config = arguments.core_transformer_config_from_args(args)
    assert config.num_layers == model.layers
    if model.mamba is not None:
        assert args.hybrid_override_pattern == model.mamba.layer_pattern
    if plan.cp > 1:
        assert config.cp_comm_type == {"ring": "p2p", "allgather": "all_gather"}[plan.cp_comm]
    fields = {f.name for f in dataclasses.fields(config)}
    assert "normalization" in fields and config.normalization == "RMSNorm"


@pytest.mark.parametrize(("name", "modules"), [("deepseek-v3", ("mla_up_proj", "mlp")), ("qwen3-30b-a3b", ("moe_act", "layernorm"))])
def test_megatron_core_accepts_the_recompute_modules(name: str, modules: tuple[str, ...]) -> None:
    """--recompute-granularity selective --recompute-modules, as TransformerConfig.__post_init__ checks them
    at the pin: known modules, mla_up_proj only with MLA, moe_act only with the grouped GEMM we emit."""
    from megatron.core.transformer.transformer_config import MLATransformerConfig, TransformerConfig

    model = load_model(name)
    base, job = CASES[name]
    plan = dataclasses.replace(base, recompute="selective", recompute_modules=modules)
    line = megatron.megatron_command(model, plan, job, nnodes=job.gpus // job.gpus_per_node, nproc_per_node=job.gpus_per_node)
    args = split_command(line, megatron.entry_point(model))
    assert args["--recompute-granularity"] == ["selective"] and args["--recompute-modules"] == list(modules)
    cls = MLATransformerConfig if "--multi-latent-attention" in args else TransformerConfig
    kw, _ = config_kwargs(args, cls)
    for field in PARALLEL:
        if field not in ("recompute_granularity",):
            kw.pop(field, None)
    kw.update(use_cpu_initialization=True, perform_initialization=False, fp8=None)
    config = cls(**kw)
    assert config.recompute_granularity == "selective" and config.recompute_modules == list(modules)
