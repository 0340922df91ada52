"""Physical bounds on every size autopar reads, named in the messages that refuse them.

Each bound is far above any real system (so no real input is refused) and far
below what would make the arithmetic overflow, the memory blow up or a loop run
for hours. A value past its bound is a one-line error (exit 2) naming the bound.
"""

from __future__ import annotations

# --- model shape --------------------------------------------------------------------
MAX_LAYERS = 4096  # transformer blocks (the largest published models have under 200)
MAX_WIDTH = 2**20  # hidden, MLP, expert, head and latent widths (GPT-3 175B: hidden 12,288)
MAX_HEADS = 2**16  # attention heads, key/value heads
MAX_VOCAB = 2**24  # vocabulary entries (the largest in use: about 256K)
MAX_EXPERTS = 2**16  # routed or shared experts per MoE layer (DeepSeek-V3: 256)
MAX_SEQ = 2**25  # tokens in one sequence: seq_len, max_seq_len, lengths in distributions
MAX_SMALL = 2**16  # Mamba state size, groups, convolution kernel, chunk length, top-k, node limits

# --- job ------------------------------------------------------------------------------
MAX_GPUS = 2**20  # GPUs in one job (the largest clusters hold about 2^17)
MAX_GPUS_PER_NODE = 1024  # GPUs sharing one fast fabric (NVL72 racks: 72)
MAX_SERVE_GPUS = 1024  # GPUs of one `autopar serve` plan (at the limit: Llama-3.1-70B 3 s, MoE models minutes)
MIN_STEP_TOKENS = 128  # --max-num-tokens of a chunking engine (vLLM, SGLang); its defaults: 8,192 (SGLang 1 token: 5 min)
MAX_SERVE_CONCURRENCY = 2**24  # requests in flight in one `autopar serve estimate` (a fleet of 1,024 GPUs holds 10^5-10^6)
# requests in flight per attention rank of an aggregated `serve estimate` (suggest sweeps its own concurrencies),
# which the closed loop runs step by step: its steps and queue grow with it (vLLM, llama3-8b tp8: 1.5 s at
# 16,384, over a minute at 100,000)
MAX_RANK_CONCURRENCY = 2**14
MAX_BATCH = 2**24  # sequences per optimizer step
MAX_VARLEN_SEQUENCES = 2**16  # sequences per simulated step; at the limit a search simulates for minutes (docs/performance-varlen.md)

# --- runs on this node (`autopar profile`, `autopar calibrate`) -----------------------
# processes: at most one per visible GPU, or one per CPU core (probe/runtime.py `processes`)
MAX_STEPS = 1000  # measured steps of one calibrate plan (the default is 10; a step of a scaled model: about 1 s)
MAX_WARMUP = 100  # untimed steps first (the default is 2)

# --- hardware profile -------------------------------------------------------------
# Rates have a floor as well as a ceiling: a time is work / rate, and a rate near 0 (1e-300) makes it
# infinite. The floors sit far below a CPU measured by `autopar profile --device cpu`.
MIN_MEMORY_GIB = 1e-3  # device memory: about 1 MiB
MAX_MEMORY_GIB = 2.0**16  # device memory (B200: 192 GB)
MIN_TFLOPS = 1e-6  # dense peak per GPU and dtype: 1 MFLOP/s
MAX_TFLOPS = 1e6  # dense peak per GPU and dtype (B200 fp8: about 4,500)
MIN_EFFICIENCY = 1e-6  # achieved / peak on an efficiency curve, and memory_efficiency (built-ins: 0.009 and up)
MIN_HBM_GBPS = 1e-3  # memory bandwidth: 1 MB/s
MAX_HBM_GBPS = 1e6  # memory bandwidth (B200: 8,000 GB/s)
MIN_BUS_GBPS = 1e-6  # collective bus bandwidth: 1 kB/s
MAX_BUS_GBPS = 1e5  # collective bus bandwidth (NVLink 5: 900 GB/s)
MAX_LATENCY_US = 1e7  # a collective's start-up time: 10 s
MAX_FRAMEWORK_SECONDS = 10.0  # a serving framework's host or per-request time (built-ins: 20 us to 0.15 s)
MAX_SLOWDOWN = 100.0  # overlap slowdown factors (measured: 1.0 to 1.3)
MAX_CURVE_X = 1e30  # sizes on efficiency curves (FLOPs of one GEMM, tokens)
MIN_POWER_W = 1.0  # a derived profile's rated board power and power cap (H100 SXM: 700 W)
MAX_POWER_W = 1e5

# --- execution stack ----------------------------------------------------------------
MAX_ELEMENT_BYTES = 64.0  # bytes per element or per vocabulary entry in a stack (logits at the loss: up to 18)
MAX_PASSES = 100.0  # HBM passes of elementwise work per fused kernel (eager PyTorch: about 6)
MAX_HOST_US = 1e6  # host or launch time per layer, microseconds: 1 s
MAX_BUCKET_PARAMS = 1e13  # parameters per DP bucket (Megatron: 40M)
MAX_STAGE_BUFFERS = 1024  # activations a pipeline stage keeps per in-flight micro-batch (built-ins: 0 to 2)
MIN_ATTENTION_RATIO = 1e-3  # a stack's attention throughput over FA3's (built-ins: 0.5 to 1)
MAX_ATTENTION_RATIO = 2.0

# --- length distributions -----------------------------------------------------------
MAX_COUNT = 1e15  # a histogram count or a mixture weight
MAX_SIGMA = 10.0  # lognormal sigma of log(length): e^10 is a factor of 22,000 per deviation
MAX_LENGTH_BYTES = 64 * 2**20  # a .npy file of lengths: 8M int64 lengths, read in well under a second
MAX_LENGTH_TEXT_BYTES = 8 * 2**20  # a .txt or .jsonl file of lengths: about 1.5M or 400K of them, a few seconds to parse

MAX_ROPE_BASE = 1e12  # RoPE base frequency (Llama 3: 500,000)
MAX_ROPE_SCALING = 1e6  # RoPE frequency scaling factor (Llama 3.1: 8)
MAX_CAPACITY_FACTOR = 64.0  # MoE load of the busiest expert over the mean

_WIDTH_KEYS = (
    "hidden_size",
    "n_embd",
    "d_model",
    "ffn_hidden_size",
    "intermediate_size",
    "n_inner",
    "d_intermediate",
    "expert_ffn_hidden_size",
    "shared_expert_ffn_hidden_size",
    "moe_intermediate_size",
    "moe_shared_expert_intermediate_size",
    "head_dim",
    "headdim",
    "attention_head_dim",
    "mamba_head_dim",
    "kv_lora_rank",
    "q_lora_rank",
    "qk_nope_head_dim",
    "qk_rope_head_dim",
    "v_head_dim",
)
_SMALL_KEYS = (
    "top_k",
    "num_experts_per_tok",
    "experts_per_token",
    "topk_group",
    "n_group",
    "max_nodes_per_token",
    "decoder_sparse_step",
    "moe_layer_freq",
    "state_size",
    "ssm_state_size",
    "mamba_d_state",
    "d_state",
    "num_groups",
    "n_groups",
    "mamba_n_groups",
    "ngroups",
    "conv_kernel",
    "mamba_d_conv",
    "d_conv",
    "chunk_size",
    "mamba_chunk_size",
    "expand",
    "pad_vocab_size_multiple",
)
# The bound of every integer key of a model spec (YAML) or a Hugging Face config, by key name.
MODEL_KEY_LIMITS: dict[str, int] = {
    **dict.fromkeys(("layers", "n_layer", "num_hidden_layers", "first_dense_layers", "first_k_dense_replace"), MAX_LAYERS),
    **dict.fromkeys(_WIDTH_KEYS, MAX_WIDTH),
    **dict.fromkeys(
        ("num_attention_heads", "n_head", "num_kv_heads", "num_key_value_heads", "num_heads", "num_heads_kv", "mamba_num_heads"), MAX_HEADS
    ),
    "vocab_size": MAX_VOCAB,
    **dict.fromkeys(("seq_len", "max_seq_len", "max_position_embeddings", "n_positions"), MAX_SEQ),
    **dict.fromkeys(("num_experts", "num_local_experts", "n_routed_experts", "shared_experts", "n_shared_experts"), MAX_EXPERTS),
    **dict.fromkeys(_SMALL_KEYS, MAX_SMALL),
}
MAX_HISTOGRAM_BINS = 100_000  # bins of one histogram
