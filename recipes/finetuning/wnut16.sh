#!/usr/bin/env bash
# Twitter named entities (10 types, BIO), labels on the first word piece.
# Reference (HF/PyTorch, same encoder): dev entity F1 about 0.29.
source "$(dirname "$0")/common.sh"
keras-bert finetune --task tag \
  --train "$DATA/wnut16/train.conll" --dev "$DATA/wnut16/dev.conll" \
  --init-checkpoint "$MINILM" --seq-length 64 --batch-size 16 --learning-rate 5e-5 --epochs 5 \
  --bucket-by-length --output-dir "$OUT/wnut16" "$@"
