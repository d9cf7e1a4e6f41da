#!/bin/bash
export NCCL_ALGO=Ring
MODEL="--num-layers 6 --hidden-size 512 --num-attention-heads 8 --group-query-attention --num-query-groups 2"
torchrun --nproc_per_node 8 pretrain_gpt.py \
    $MODEL --swiglu --normalization RMSNorm --position-embedding-type rope \
    --micro-batch-size 2 --global-batch-size=32 --seq-length 1024 \
    --tokenizer-type NullTokenizer --vocab-size 32000 \
    --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 \
    --num-virtual-stages-per-pipeline-rank 2 --sequence-parallel \
    --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split \
    --num-experts 8 --moe-router-topk 2 --moe-layer-freq "([0]*1+[1]*5)" \
    --expert-model-parallel-size 2 --recompute-granularity selective \
    --use-distributed-optimizer --overlap-grad-reduce --bf16 --fp8-format hybrid
