torchrun \
    --nnodes 2 \
    --nproc-per-node 8 \
    --rdzv-backend c10d \
    --rdzv-endpoint "$MASTER_ADDR:29500" \
    -m torchtitan.train \
    --module llama3 \
    --config llama3_70b \
    --parallelism.data_parallel_replicate_degree 1 \
    --parallelism.data_parallel_shard_degree 4 \
    --parallelism.fsdp_reshard_after_forward never \
    --parallelism.tensor_parallel_degree 4 \
    --parallelism.enable_sequence_parallel \
    --parallelism.pipeline_parallel_degree 1 \
    --parallelism.context_parallel_degree 1 \
    --training.num_tokens_per_microbatch_per_dp_rank 4096 \
    --training.num_tokens_per_train_step 262144 \
    --training.max_context_length 4096 \
    --training.mixed_precision_param bfloat16 \
    activation-checkpoint:none
