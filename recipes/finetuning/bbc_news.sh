#!/usr/bin/env bash
# 5-topic news classification: title then text as a pair, the text truncated to fit.
# Reference (HF/PyTorch, same encoder): dev accuracy about 0.97.
source "$(dirname "$0")/common.sh"
keras-bert finetune --task classify \
  --train "$DATA/bbc_news/train.tsv" --dev "$DATA/bbc_news/dev.tsv" \
  --text-columns title,text \
  --init-checkpoint "$MINILM" --seq-length 256 --batch-size 32 --learning-rate 5e-5 --epochs 2 \
  --bucket-by-length --output-dir "$OUT/bbc_news" "$@"
