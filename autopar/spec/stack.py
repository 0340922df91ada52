"""StackProfile: how one training framework runs a plan (kernels, overlaps, memory habits, plan rules).

The same plan runs at different speeds and memory on Megatron-Core, torchtitan
(FSDP2) and DeepSpeed. A stack profile says what differs; the cost model reads
it and the plan rules ask it which plans the stack can launch. Built-in
profiles live in ``autopar/data/stacks/*.yaml`` (read by :mod:`autopar.io.stacks`),
every number cited to the framework's source at a commit or to a measurement.

``NEUTRAL`` is the idealised stack the cost formulas were first written for
(fused kernels, FA3-class attention, every overlap the hardware allows, 10-byte
logits): unit tests of the formulas use it; the CLI always names a real stack.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from autopar.spec.hardware import Curve

# Megatron-Core's module-level recompute (--recompute-modules; TransformerConfig.recompute_modules at core_v0.16.1)
RECOMPUTE_MODULES = ("core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts")

ATTENTION_KERNELS = ("fa2", "fa3", "cudnn", "sdpa", "triton", "unfused")
SELECTIVE_POLICIES = ("attention", "op")
DP_GRANULARITY = ("bucket", "layer")
LAUNCHERS = ("megatron", "torchtitan", "deepspeed", "none")
ACTIVATION_SAVES = ("fused", "eager-torch")  # what a dense block keeps for backward (cost/habits.py)


class Launch(Protocol):
    """What a stack checks of a plan (spec/plan.py's Plan, which imports this module for its rules)."""

    @property
    def tp(self) -> int: ...
    @property
    def pp(self) -> int: ...
    @property
    def cp(self) -> int: ...
    @property
    def ep(self) -> int: ...
    @property
    def etp(self) -> int: ...
    @property
    def vpp(self) -> int: ...
    @property
    def zero(self) -> int: ...
    @property
    def cp_comm(self) -> str: ...
    @property
    def recompute_modules(self) -> tuple[str, ...]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class StackProfile:
    """One execution stack's kernels, overlaps, memory habits and plan rules."""

    name: str  # profile name (--stack NAME[@VERSION])
    description: str  # one line for humans
    launcher: str  # which framework --emit writes for this stack: megatron | torchtitan | deepspeed | none
    # --- kernels ---
    attention_kernel: str  # fa2 | fa3 | cudnn | sdpa | triton | unfused: what the stack calls for causal attention
    attention_vs_fa3: Curve  # seq_len -> its fwd+bwd throughput over FA3's on Hopper and later (1 elsewhere)
    compiled: bool  # torch.compile (or hand-fused kernels) for norms, rope and activations
    elementwise_passes: float  # HBM passes of norm/rope/activation/residual work, relative to one fused kernel each
    layer_overhead_us: float  # launch gaps and small kernels per layer, forward + backward, microseconds
    fp8_cast_bytes: float  # extra HBM bytes per element of every FP8 GEMM input (amax + cast, when not fused)
    logit_bytes: float  # bytes held per vocabulary entry per token at the loss
    # --- overlaps ---
    tp_overlap: float  # fraction of TP collectives (with SP) hidden behind GEMMs
    cp_overlap: bool  # the ring K/V exchange is overlapped with attention
    ep_overlap: bool  # the MoE all-to-all is overlapped with another micro-batch's compute
    dp_overlap: float  # fraction of a micro-batch's compute that DP/FSDP collectives can hide behind
    # --- collectives ---
    dp_granularity: str  # bucket (fixed-size buckets) | layer (one gather/reduce per transformer block)
    dp_bucket_params: float  # parameters per DP bucket (granularity bucket; 0 = one collective per pass)
    grad_reduce_bytes: float  # bytes per gradient element on the wire (fp32 4, bf16 2)
    fp8_grad_reduce_bytes: float  # the same under the stack's FP8 recipe
    # --- memory ---
    selective: str  # what --recompute selective saves: attention (Megatron) | op (per-op SAC, every 2nd matmul)
    fp8_weight_copy_bytes: float  # persistent FP8 weight copies (and transposes) per parameter
    fp8_weight_copy_sharded: bool  # under ZeRO-3 the persistent FP8 copy is sharded like the weights
    fp8_saves_fp8_inputs: bool  # FP8 GEMMs keep their saved inputs in FP8 (TE) rather than bf16 (torchao)
    fp8_gather: bool  # ZeRO-3 all-gathers weights in FP8 (1 byte per parameter)
    # ZeRO-3 under PP reshards weights after each forward (False: kept gathered until backward, and ZeRO-2/3
    # gradients accumulated unsharded until the last micro-batch, as torch.distributed.pipelining runs FSDP)
    pp_reshard: bool
    pp_stage_buffers: int  # full-width activations a PP stage keeps per in-flight micro-batch (inputs, outputs)
    fixed_overhead_gib: float  # CUDA context, library workspaces, NCCL buffers
    allocator_fragmentation: float  # caching-allocator slack, fraction of what it holds
    # fused (Korthikanti et al. with fused kernels) | eager-torch (what eager PyTorch saves, as `autopar calibrate`
    # measures it: fp32 RMSNorm, SiLU output, gathered TP inputs); dense layers without recompute only
    activation_saves: str = "fused"
    # FSDP mixed precision: the sharded parameter is the fp32 master (4 B), the optimizer holds Adam's two
    # fp32 moments (8 B); no bf16 copy is kept between steps (cost/habits.py FSDP2_STATE)
    fsdp_master: bool = False
    gather_bytes: float = 2.0  # bytes per parameter of an all-gathered weight (FSDP param_dtype)
    # the FSDP root unit (embedding, final norm, output) stays gathered from its forward to its post-backward
    root_gathered: bool = False
    # bytes per vocabulary entry per token the allocator holds at the loss's backward (0: logit_bytes), with
    # the vocabulary whole (tp 1) and split over TP (loss parallel)
    logit_peak_bytes: float = 0.0
    logit_peak_bytes_tp: float = 0.0
    tp_saves_gathered: bool = False  # a column-parallel linear saves its all-gathered (not its SP-sharded) input
    # an MoE layer keeps each routed copy's expert output (h) for the routing weights' gradient, where the
    # probabilities multiply the output at the combine (False: they scale the expert activation instead)
    moe_saves_expert_output: bool = True
    # host time an MoE layer leaves exposed per micro-batch (forward + backward, microseconds) when its router
    # and token-dispatch preprocessing run eagerly and the dispatch syncs host and device (0 under CUDA graphs)
    moe_host_us: float = 0.0
    # the attention op is handed K/V repeated to the query heads (torchtitan Llama's repeat_kv before SDPA): CP
    # gathers and rotates n_heads-wide K/V, not n_kv_heads-wide
    attention_kv_repeated: bool = False
    # PyTorch context_parallel's backward (convert_to_f32): all-gathers K/V again, accumulates dQ/dK/dV in fp32 and
    # rotates dK/dV around the CP ring in fp32, one all-to-all step per rank, instead of one reduce-scatter
    cp_fp32_grads: bool = False
    # with FP8 GEMMs the TP all-gathers (forward, recompute, and backward's of the row-parallel output's gradient)
    # carry FP8 (1 B) and the reduce-scatters bf16 (torchao Float8ColwiseParallel / Float8RowwiseParallel)
    tp_fp8_gather: bool = False
    # attention unfused (the score matrix in HBM: QK^T, softmax, dropout, PV as separate kernels): HBM bytes per
    # score element (one per query-key pair, head and sequence) in forward and in backward
    score_bytes: tuple[float, float] = (0.0, 0.0)
    dp_gather_overlap: float | None = None  # share of compute the parameter all-gather hides (None: dp_overlap)
    # optimizer bytes per parameter under BF16 (fp32 master, Adam m and v: 12; Megatron's precision-aware
    # optimizer keeps the master as 16-bit remainders of the bf16 weight: 10), and under FP8
    optimizer_bytes: float = 12.0
    fp8_optimizer_bytes: float = 12.0
    # --- plan rules ---
    parallelisms: tuple[str, ...]  # axes the stack can split: dp, tp, pp, cp, ep
    cp_comms: tuple[str, ...]  # CP variants it implements: ring | allgather
    zero_stages: tuple[int, ...]  # ZeRO stages the stack offers
    vpp: bool  # interleaved pipeline schedule available
    equal_stages: bool  # pipeline stages must hold equal layer counts
    ep_over_tp: bool  # with etp = 1, EP ranks may span DP x CP x TP (Megatron's expert layout)
    pipeline_counts_embedding: bool  # the embedding and the loss count as pipeline layers (Megatron layout)
    # how layers are cut into pipeline chunks: front (the earlier chunks take the extra layers) | middle (the
    # first chunk L // chunks, the middle ones one more while the remainder lasts, the last the rest)
    pipeline_split: str = "front"
    # an MoE's experts are split like the MLP (etp = tp) without EP and kept whole (etp 1) with EP: no expert TP
    # beside EP (torchtitan 0.3.0: the EP mesh is dp_shard x cp x tp)
    experts_whole_with_ep: bool = False
    recompute_modules: tuple[str, ...] = ()  # the modules a module-level selective recompute may name (Megatron's)
    citations: tuple[tuple[str, str], ...] = ()  # (field, source) pairs, as the profile file gives them
    path: str = ""  # file it was read from
    version: str = ""  # the framework version it describes ("" for a stack file that names none)
    applied: tuple[tuple[str, str], ...] = ()  # the recipe options set on it (--stack-opt / --recipe), in order

    @property
    def label(self) -> str:
        """NAME@VERSION as --stack takes it (NAME alone for a file without a version)."""
        return f"{self.name}@{self.version}" if self.version else self.name

    @property
    def gather_overlap(self) -> float:
        """The share of a pass's compute that hides the DP parameter all-gather."""
        return self.dp_overlap if self.dp_gather_overlap is None else self.dp_gather_overlap

    @property
    def default_zero(self) -> int:
        """The ZeRO stage of a plan that names none: 1 where the stack offers it (Megatron's distributed
        optimizer, DeepSpeed stage 1), else its fullest sharding (FSDP2 fully_shard's default
        reshard_after_forward=True, Composer's default FULL_SHARD: both 3)."""
        return 1 if 1 in self.zero_stages else max(self.zero_stages)

    @property
    def default_cp_comm(self) -> str:
        """The CP K/V exchange of a plan that names none: the stack's first (Megatron ring, torchtitan allgather)."""
        return self.cp_comms[0]

    def refusal(self, plan: Launch) -> str | None:
        """Why this stack cannot launch `plan` (an axis it lacks, a ZeRO stage, interleaving, a CP variant), or None."""
        for axis in ("tp", "pp", "cp", "ep"):
            if getattr(plan, axis) > 1 and axis not in self.parallelisms:
                return f"stack {self.name} has no {axis.upper()} ({axis}={getattr(plan, axis)})"
        if plan.zero not in self.zero_stages:
            return f"stack {self.name} has no ZeRO stage {plan.zero} (it has {', '.join(map(str, self.zero_stages))})"
        if self.experts_whole_with_ep and plan.ep > 1 and plan.etp != 1:
            return f"stack {self.name} keeps experts whole under EP (etp 1), not etp {plan.etp} (ep={plan.ep})"
        if plan.vpp > 1 and not self.vpp:
            return f"stack {self.name} has no interleaved pipeline schedule (vpp={plan.vpp})"
        for module in plan.recompute_modules:
            if module in RECOMPUTE_MODULES and module not in self.recompute_modules:
                offers = f"it has {', '.join(self.recompute_modules)}" if self.recompute_modules else "it has none"
                return f"stack {self.name} has no module-level recompute of {module} ({offers})"
        if plan.cp > 1 and plan.cp_comm not in self.cp_comms:
            return f"stack {self.name} exchanges CP K/V by {' or '.join(self.cp_comms)}, not {plan.cp_comm}"
        return None

    @property
    def takes_eager_corrections(self) -> bool:
        """Whether a profile's `autopar calibrate --save` corrections apply to this stack. They are eager
        PyTorch's activation bytes over the fused formula (calibrate runs an eager block), so they describe
        a stack that runs eagerly and is counted with the fused formula (deepspeed, llm-foundry), not one
        with fused or compiled kernels (Megatron's TE, torchtitan's torch.compile), nor one whose formula
        already counts eager saves (activation_saves: eager-torch)."""
        return not self.compiled and self.activation_saves == "fused"

    def logit_peak(self, tp: int) -> float:
        """Bytes held per vocabulary entry per token at the loss, under `tp`."""
        peak = self.logit_peak_bytes_tp if tp > 1 else self.logit_peak_bytes
        return peak or self.logit_bytes

    def grad_bytes(self, dtype: str) -> float:
        """Bytes per gradient element in the DP reduce under `dtype`."""
        return self.fp8_grad_reduce_bytes if dtype == "fp8" else self.grad_reduce_bytes

    def optimizer_state_bytes(self, dtype: str) -> float:
        """Bytes per parameter the optimizer holds (before ZeRO sharding) under `dtype`."""
        return self.fp8_optimizer_bytes if dtype == "fp8" else self.optimizer_bytes

    def attention_factor(self, seq_len: float, *, hopper: bool) -> float:
        """Throughput of this stack's attention relative to the hardware profile's curve (FA3-class on Hopper)."""
        curve = self.attention_vs_fa3
        return curve(max(seq_len, curve.xs[0])) if hopper else 1.0


_FLAT = Curve(xs=(1.0,), ys=(1.0,))

NEUTRAL = StackProfile(
    name="neutral",
    description="idealised stack of the cost formulas",
    launcher="none",
    attention_kernel="fa3",
    attention_vs_fa3=_FLAT,
    compiled=True,
    elementwise_passes=1.0,
    layer_overhead_us=0.0,
    fp8_cast_bytes=0.0,
    logit_bytes=10.0,
    tp_overlap=0.75,
    cp_overlap=True,
    ep_overlap=True,
    dp_overlap=0.9,
    dp_granularity="bucket",
    dp_bucket_params=0.0,
    grad_reduce_bytes=4.0,
    fp8_grad_reduce_bytes=4.0,
    selective="attention",
    fp8_weight_copy_bytes=2.0,
    fp8_weight_copy_sharded=False,
    fp8_saves_fp8_inputs=True,
    fp8_gather=False,
    pp_reshard=True,
    pp_stage_buffers=0,
    fixed_overhead_gib=2.0,
    allocator_fragmentation=0.07,
    parallelisms=("dp", "tp", "pp", "cp", "ep"),
    cp_comms=("ring", "allgather"),
    zero_stages=(0, 1, 2, 3),
    vpp=True,
    equal_stages=False,
    ep_over_tp=False,
    pipeline_counts_embedding=False,
)
