"""Global constants of the cost model: one place, each with its reason.

These hold for every run and every GPU; per-hardware numbers live in the
hardware profile. None of them is fitted to a single published run.
"""

from __future__ import annotations

# --- sustained-load efficiency -----------------------------------------------------
# The profile's GEMM and attention curves come from isolated microbenchmarks: one
# kernel, cool chip, full boost clock. In a training run every GPU of the node draws
# its full power budget for hours, so the SM clock settles lower (DVFS under the
# power cap: Kurzynski et al. 2025, "Chopper", arXiv:2512.08242, find frequency
# the single largest contributor to the gap between peak and observed training
# throughput), kernels wait on launches and on the slowest rank of each collective.
# The share of the curves' rate a run sustains, on tensor-core work (GEMMs, attention);
# a profile may give its GPU's own (gpu.sustained_tensor_efficiency, cost/kernels.py
# sustained): no per-GPU measurement of it was found; the A100 profile's own is fitted
# on the A100 rows (0.837), this one on every other framework and published row
# (benchmarks/data/fitted_constants.yaml, which names them; docs/calibration.md).
SUSTAINED_TENSOR_EFFICIENCY = 0.726
# Serving (cost/serve.py) keeps 0.75, the value the serving frameworks' constants
# (data/frameworks/*.yaml, docs/calibration.md) were fit with, until they are refit with this one.
SERVING_SUSTAINED_TENSOR_EFFICIENCY = 0.75

# --- memory-bound work (bytes moved per token per block, forward) -----------------
# Each sub-layer (attention, MLP, ...) has a norm that reads h and writes h and a
# residual add (with dropout where used) that reads 2h and writes h. Counted in
# elements, bf16: 2 bytes each.
ELEMS_OUTSIDE_TP_PER_PART = 5  # x h per sub-layer (one norm, one residual add), replicated across TP ranks unless SP splits them
# Inside the TP region: activation (SwiGLU reads 2f writes f; GELU/ReLU^2 reads f
# writes f), rotary embedding on q and k (read + write).
BACKWARD_OVER_FORWARD_MEMORY = 2.0  # backward kernels read the saved input and the output gradient
ACT_BYTES = 2  # bf16 activations

# --- communication overlap ------------------------------------------------------
# Megatron-Core's TP communication overlap (TE userbuffers; --tp-comm-overlap)
# needs sequence parallelism. It hides the all-gather/reduce-scatter behind the
# neighbouring GEMMs by splitting them into chunks; the first and last chunk of
# each pipeline cannot hide, so a fraction stays exposed. Wang et al. 2023 ("Overlap
# communication with dependent computation via decomposition", ASPLOS) and the TE
# docs report 60-90% of TP communication hidden; we take 0.75.
TP_OVERLAP_FRACTION = 0.75
# Data-parallel gradient reduce-scatter overlaps the backward pass bucket by bucket
# (Megatron --overlap-grad-reduce, PyTorch DDP/FSDP); the last bucket cannot.
DP_OVERLAP_FRACTION = 0.9
# Ring attention hides the K/V exchange behind the attention of the previous chunk
# (Liu et al. 2023, Ring Attention; Megatron CP), when compute is long enough.

# --- memory ---------------------------------------------------------------------
# CUDA context, cuBLAS/cuDNN workspaces and NCCL buffers: outside PyTorch's
# allocator, about 1-2 GiB per GPU in Megatron/TE runs (NCCL alone reserves
# hundreds of MiB per communicator).
FIXED_OVERHEAD_BYTES = 2.0 * 2**30
# The caching allocator cannot use every byte: fragmentation costs 5-10% of what
# it holds (PyTorch memory docs; Megatron's memory estimator leaves similar slack).
ALLOCATOR_FRAGMENTATION = 0.07
# Mixed-precision Adam, bytes per parameter (Rajbhandari et al. 2020, ZeRO, sec. 3.1
# with fp32 gradients as Megatron keeps them): bf16 weight, fp32 grad, fp32 master,
# fp32 momentum and variance.
WEIGHT_BYTES = 2
GRAD_BYTES = 4
OPTIMIZER_BYTES = 12
# Adam step reads master, grad, m, v (16 B) and writes master, m, v, bf16 weight
# (14 B); gradient-norm clipping reads the grads once more (4 B).
OPTIMIZER_STEP_BYTES_PER_PARAM = 34
# Loss on the vocabulary-parallel logits: bf16 logits, fp32 copy, fp32 softmax kept
# for backward.
LOGIT_BYTES = 10
# FP8 training (Transformer Engine on Hopper) keeps an FP8 copy of each weight and
# of its transpose for the backward GEMMs, beside the bf16 weight.
FP8_WEIGHT_COPY_BYTES = 2
