torchrun \
    --nnodes 8 \
    --nproc-per-node 8 \
    --rdzv-backend c10d \
    --rdzv-endpoint "$MASTER_ADDR:29500" \
    -m torchtitan.train \
    --module llama3 \
    --config llama3_70b \
    --parallelism.data_parallel_replicate_degree 1 \
    --parallelism.data_parallel_shard_degree 8 \
    --parallelism.tensor_parallel_degree 8 \
    --parallelism.enable_sequence_parallel \
    --parallelism.pipeline_parallel_degree 1 \
    --parallelism.context_parallel_degree 1 \
    --training.num_tokens_per_microbatch_per_dp_rank 8192 \
    --training.num_tokens_per_train_step 4194304 \
    --training.max_context_length 8192 \
    --training.mixed_precision_param bfloat16 \
    activation-checkpoint:full
