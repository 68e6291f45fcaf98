#!/bin/sh
# Routing replay against recompute: how far the trainer's log-probabilities
# lie from the sampler's when the sampler's arithmetic is not the trainer's.
# Tiny random mixtures of experts (tests/ref/model_ref.py: a qwen3_moe with
# 32 experts, top 4 renormalised, and a gpt_oss with 32, top 4) sample 16
# prompts x 4 completions of 48 tokens with --weights bf16 (bf16 matrices
# and cache; and once with f32, where sampler and trainer agree); one
# grpo-update per --routing then recomputes pi_old and reports
# sampling/sampling_logp_difference/mean and /max, the per-token
# |logpi_sampler - logpi_old| over the batch (formats/loss.md). Then the
# records' size with and without their routing field (--routing-record
# off), plain and zstd-compressed. No assertions: a benchmark prints.
#   sh bench/routing.sh
set -eu
cd "$(dirname "$0")/.."
OUT=${BENCH_DIR:-build/bench}/routing
PY=.venv/bin/python
export PATH="$PWD/bin:$PATH"
if [ ! -x "$PY" ]; then
    echo "bench/routing.sh: no test venv (make venv); skipped" >&2
    exit 0
fi
rm -rf "$OUT"
mkdir -p "$OUT"
i=0
while [ $i -lt 16 ]; do
    echo "{\"id\":\"p$i\",\"prompt_tokens\":[1,$((i % 7 + 4)),$((i * 3 % 90 + 3)),$((i * 11 % 89 + 5)),7]}"
    i=$((i + 1))
done > "$OUT/prompts.jsonl"
printf '%-9s %-5s %-9s %12s %12s %s\n' model rollout routing "mean |diff|" "max |diff|" "loss"
for arch in qwen3_moe gpt_oss; do
    m="$OUT/$arch"
    extra=""
    [ "$arch" = qwen3_moe ] && extra=--norm-topk
    "$PY" tests/ref/model_ref.py make-tiny "$arch" "$m" --experts 32 --top-k 4 $extra
    "$PY" tests/ref/make_tiny_tokenizer.py "$m"
    for w in f32 bf16; do
        grpo-rollout --model "$m" --in "$OUT/prompts.jsonl" -k 4 --max-new-tokens 48 --seed 7 --weights "$w" \
            --out "$OUT/$arch-$w.jsonl"
        jq -c '. + {advantage: (.sample - 1.5)}' "$OUT/$arch-$w.jsonl" > "$OUT/$arch-$w-adv.jsonl"
        for routing in recompute replay; do
            grpo-update --model "$m" --in "$OUT/$arch-$w-adv.jsonl" --out "$OUT/ck" --routing "$routing" \
                --old-logp recompute --is-correction token --metrics "$OUT/m.jsonl" 2> /dev/null
            rm -rf "$OUT/ck"
            tail -n 1 "$OUT/m.jsonl" | jq -r --arg a "$arch" --arg w "$w" --arg r "$routing" \
                '"\($a) \($w) \($r) \(.["sampling/sampling_logp_difference/mean"]) \(.["sampling/sampling_logp_difference/max"]) \(.loss)"' |
                awk '{printf "%-9s %-5s %-9s %12.3g %12.3g %.6g\n", $1, $2, $3, $4, $5, $6}'
        done
    done
done
# the records' size: routing on (the default) and off, plain and zstd
grpo-rollout --model "$OUT/qwen3_moe" --in "$OUT/prompts.jsonl" -k 4 --max-new-tokens 48 --seed 7 --weights bf16 \
    --routing-record off --out "$OUT/off.jsonl"
for f in "$OUT/qwen3_moe-bf16.jsonl" "$OUT/off.jsonl"; do
    printf '%s bytes %d zstd %d\n' "$(basename "$f")" "$(wc -c < "$f")" "$(zstd -q -c "$f" | wc -c)"
done
