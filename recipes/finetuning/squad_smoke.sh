#!/usr/bin/env bash
# SQuAD v1.1 smoke run on the 5 shipped real questions (train = dev: checks the
# whole path, features -> training -> n-best -> official metric; not a benchmark).
source "$(dirname "$0")/common.sh"
keras-bert finetune --task squad \
  --train "$DATA/squad_samples/squad_v1_sample.json" --dev "$DATA/squad_samples/squad_v1_sample.json" \
  --init-checkpoint "$MINILM" --seq-length 384 --batch-size 4 --learning-rate 5e-5 --epochs 3 \
  --output-dir "$OUT/squad_smoke" "$@"
