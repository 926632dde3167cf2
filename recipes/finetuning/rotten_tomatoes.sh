#!/usr/bin/env bash
# Binary sentiment (fresh / rotten), dense layer on the pooled [CLS].
# Reference (HF/PyTorch, same encoder): dev accuracy about 0.83.
source "$(dirname "$0")/common.sh"
keras-bert finetune --task classify \
  --train "$DATA/rotten_tomatoes/train.tsv" --dev "$DATA/rotten_tomatoes/dev.tsv" \
  --init-checkpoint "$MINILM" --seq-length 64 --batch-size 32 --learning-rate 5e-5 --epochs 2 \
  --bucket-by-length --output-dir "$OUT/rotten_tomatoes" "$@"
