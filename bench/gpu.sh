#!/bin/sh
# make bench-gpu: grpo-rollout --device cuda against Hugging Face
# transformers generate on the same card, on random weights of SmolLM2-135M's,
# Qwen2.5-0.5B's and 1.5B's shapes (bench/gpu_models.py; nothing is fetched):
# K = 8 samples of 64 prompts (128 random token ids each), 256 new tokens,
# temperature 1, one timed run of each side. Prints tokens/s, peak GPU
# memory (ours: what our allocations held, and nvidia-smi's reading of the
# whole card; theirs: torch's max_memory_allocated), the ratio, and decode's
# memory-bandwidth bound for our cache (bench/gpu_bound.py; the rollout's
# tokens/s includes prefill, so it sits below that bound).
# No assertions: a benchmark prints.
#   sh bench/gpu.sh [NAME ...]       (BENCH_PEER=0 skips transformers;
#                                      BENCH_CACHE=static also times HF's static cache;
#                                      BENCH_KV=f32|bf16 sets ours' --kv-cache; auto = bf16)
set -eu
cd "$(dirname "$0")/.."
PY=${GRPO_PY:-python3}
OUT=${BENCH_DIR:-build/bench-gpu}
MODELS=${BENCH_MODELS:-$OUT/models}
K=8 PROMPTS=64 NEW=256 PLEN=128
mkdir -p "$OUT" "$MODELS"

if ! bin/grpo-rollout --device cuda --model /nonexistent 2>&1 | grep -q nonexistent; then
    echo "bench/gpu.sh: grpo-rollout cannot use a GPU here: $(bin/grpo-rollout --device cuda --model /nonexistent 2>&1)" >&2
    exit 0
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
date -u

"$PY" bench/gpu_prompts.py "$OUT/prompts.jsonl" "$PROMPTS" "$PLEN"

# poll_smi DONE PEAK: in the background until the file DONE exists, the most
# memory nvidia-smi saw in use on the card (MiB), then written to PEAK. Not
# "while kill -0 PID": a finished child stays a zombie, alive to kill -0,
# until this shell waits for it, so that loop never ends.
poll_smi() {
    (
        peak=0
        while [ ! -e "$1" ]; do
            m=$(timeout 10 nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -n 1 | tr -dc 0-9)
            [ -n "$m" ] && [ "$m" -gt "$peak" ] && peak=$m
            sleep 0.2
        done
        echo "$peak" > "$2"
    ) &
    poller=$!
}

printf '\n%-14s %12s %12s %10s %12s %12s %7s %12s\n' model "ours tok/s" "ours MiB" "smi MiB" "HF tok/s" "HF MiB" ratio \
    "bound tok/s"
for name in ${*:-smollm2-135m qwen2.5-0.5b qwen2.5-1.5b}; do
    "$PY" bench/gpu_models.py "$MODELS" "$name" > "$OUT/$name.make.txt"
    dir="$MODELS/$name"
    bin/grpo-rollout --model "$dir" --device cuda ${BENCH_KV:+--kv-cache "$BENCH_KV"} -k $K --max-new-tokens $NEW --temperature 1 \
        --batch $((K * PROMPTS)) --progress --in "$OUT/prompts.jsonl" --out "$OUT/$name.rollout.jsonl" \
        2> "$OUT/$name.ours.txt" &
    pid=$!
    rm -f "$OUT/$name.done"
    poll_smi "$OUT/$name.done" "$OUT/$name.smi"
    rc=0
    wait $pid || rc=$?
    touch "$OUT/$name.done"
    wait $poller
    [ $rc -eq 0 ] || { echo "bench/gpu.sh: grpo-rollout failed (exit $rc): $(tail -n 1 "$OUT/$name.ours.txt")" >&2; exit 1; }
    smi=$(cat "$OUT/$name.smi")
    line=$(grep 'tokens/s' "$OUT/$name.ours.txt" | tail -n 1)
    ours=$(echo "$line" | sed -n 's/.*(\([0-9.]*\) tokens\/s).*/\1/p')
    ours_mib=$(echo "$line" | sed -n 's/.*peak \([0-9.]*\) MiB allocated.*/\1/p')
    hf=- hf_mib=- ratio=-
    if [ "${BENCH_PEER:-1}" != 0 ]; then
        for cache in dynamic ${BENCH_CACHE:-}; do
            "$PY" bench/gpu_peer.py "$dir" "$OUT/prompts.jsonl" $K $NEW "$cache" > "$OUT/$name.hf_$cache.txt"
            t=$(sed -n 's/.*tok_s=\([0-9.]*\).*/\1/p' "$OUT/$name.hf_$cache.txt")
            if [ "$hf" = - ] || awk -v a="$t" -v b="$hf" 'BEGIN { exit !(a > b) }'; then
                hf=$t
                hf_mib=$(sed -n 's/.*peak_mib=\([0-9]*\).*/\1/p' "$OUT/$name.hf_$cache.txt")
            fi
        done
        ratio=$(awk -v a="$ours" -v b="$hf" 'BEGIN { printf "%.2f", a / b }')
    fi
    # decode's memory-bandwidth bound with our fp32 KV cache (bench/gpu_bound.py)
    "$PY" bench/gpu_bound.py "$dir" $((K * PROMPTS)) $PLEN $NEW > "$OUT/$name.bound.txt" 2>&1 || true
    bound=$(sed -n 's/^kv bound_fp32_kv tok_s=\([0-9]*\).*/\1/p' "$OUT/$name.bound.txt")
    printf '%-14s %12s %12s %10s %12s %12s %7s %12s\n' "$name" "$ours" "$ours_mib" "$smi" "$hf" "$hf_mib" "$ratio" \
        "${bound:--}"
done
echo "(full logs in $OUT)"
