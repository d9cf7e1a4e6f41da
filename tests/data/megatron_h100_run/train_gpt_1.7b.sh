#!/bin/bash
# Megatron-LM's GPT 1.7B of the Megatron-Core H100 scaling table (hidden 2048, 24 layers, 16
# heads, vocabulary 131072), one data-parallel rank of it on one H100: 8 microbatches of one
# sequence of 2048 tokens a step. Megatron-Core's own layers (--transformer-impl local: no
# Transformer Engine or Apex on the machine), attention with materialized scores, mock data.
# Run with MEGATRON set to a Megatron-LM checkout; the log is train.log beside this file.
set -euo pipefail
MEGATRON=${MEGATRON:-/opt/Megatron-LM}
export CUDA_DEVICE_MAX_CONNECTIONS=1

MODEL_ARGS=(
  --num-layers 24 --hidden-size 2048 --num-attention-heads 16
  --seq-length 2048 --max-position-embeddings 2048
  --tokenizer-type NullTokenizer --vocab-size 131072
  --transformer-impl local
)
TRAINING_ARGS=(
  --micro-batch-size 1 --global-batch-size 8 --train-iters 40
  --lr 3e-4 --min-lr 3e-5 --lr-decay-style cosine --lr-warmup-iters 4
  --weight-decay 0.1 --adam-beta2 0.95 --clip-grad 1.0 --bf16
  --no-gradient-accumulation-fusion --no-masked-softmax-fusion --no-persist-layer-norm
)
DATA_ARGS=(--mock-data --split 100,0,0)
LOGGING_ARGS=(--log-interval 1 --eval-iters 0 --eval-interval 1000000 --log-throughput)

torchrun --nproc-per-node 1 --nnodes 1 "$MEGATRON/pretrain_gpt.py" \
  "${MODEL_ARGS[@]}" "${TRAINING_ARGS[@]}" "${DATA_ARGS[@]}" "${LOGGING_ARGS[@]}" "$@"
