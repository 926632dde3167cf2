#!/usr/bin/env bash
# The proof runs on real data, one after the other, logs in $OUT/*.log.
source "$(dirname "$0")/common.sh"
mkdir -p "$OUT"
for recipe in ${RECIPES:-rotten_tomatoes wnut16 bbc_news}; do
  bash "$HERE/$recipe.sh" > "$OUT/$recipe.log" 2>&1 || echo "$recipe failed (see $OUT/$recipe.log)"
done
