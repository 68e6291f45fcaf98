#!/bin/sh
# The llama.cpp peer of bench/model.sh: llama.cpp's own llama-batched-bench
# (built natively from the pinned source: scripts/setup/llama_native.sh) on
# SmolLM2-135M in f32, Q8_0 and Q4_1, at the shapes bench_model measures:
# prefill of 128 and 512 tokens (one sequence), and decode of 32 tokens after
# a 64-token prompt at 1, 16 and 64 sequences. Every core, as ours.
# Prints a table and "kv llama.cpp TYPE NAME tok_s=X" lines (TYPE f32, Q8_0,
# Q4_1; NAME as bench_model's) for bench/model.sh's ratios.
#   sh bench/llama_peer.sh [OUT_DIR]
# The f32 and Q8_0 files are grpo-export's of the Q4_1 model (its weights
# dequantized), made once: the speed of a format does not depend on the
# values in it.
set -eu
cd "$(dirname "$0")/.."
OUT=${1:-build/bench}
BB=build/llama.cpp-native/bin/llama-batched-bench
Q41=models/SmolLM2-135M-Instruct.Q4_1.gguf
mkdir -p "$OUT"
for need in "$BB" "$Q41" bin/grpo-export; do
    [ -e "$need" ] || { echo "llama.cpp peer: $need missing (make llama-native models all); skipped"; exit 0; }
done
for t in f32 q8_0; do
    [ -f "$OUT/smol-$t.gguf" ] || bin/grpo-export --model "$Q41" --format gguf --dtype "$t" --out "$OUT/smol-$t.gguf"
done
THREADS=$(nproc)
raw="$OUT/llama_peer.jsonl"
: > "$raw"
for t in f32 Q8_0 Q4_1; do
    case $t in
    f32) m="$OUT/smol-f32.gguf" ;;
    Q8_0) m="$OUT/smol-q8_0.gguf" ;;
    *) m="$Q41" ;;
    esac
    # one jsonl line per (pp, tg, pl); the type is added to each
    for args in "-npp 128,512 -ntg 1 -npl 1" "-npp 64 -ntg 32 -npl 1,16,64"; do
        # shellcheck disable=SC2086
        "$BB" -m "$m" -c 8192 -b 2048 -ub 512 $args -t "$THREADS" -tb "$THREADS" --output-format jsonl \
            2> "$OUT/llama_peer.log" | grep '^{' | jq -c --arg t "$t" '. + {type: $t}' >> "$raw" \
            || { tail -5 "$OUT/llama_peer.log"; echo "llama.cpp peer: llama-batched-bench failed on $m"; exit 0; }
    done
done
jq -r '
  if .tg == 1 then "kv llama.cpp \(.type) prefill T=\(.pp) tok_s=\(.speed_pp)"
  else "kv llama.cpp \(.type) decode B=\(.pl) tok_s=\(.speed_tg)" end' "$raw"
echo "llama.cpp (llama-batched-bench, native build, $THREADS threads), tokens/s:"
printf '  %-15s %9s %9s %9s\n' "" f32 Q8_0 Q4_1
for name in "prefill T=128" "prefill T=512" "decode B=1" "decode B=16" "decode B=64"; do
    printf '  %-15s' "$name"
    for t in f32 Q8_0 Q4_1; do
        v=$(jq -r --arg t "$t" --arg n "$name" '
          select(.type == $t) |
          select((.tg == 1 and $n == "prefill T=\(.pp)") or (.tg > 1 and $n == "decode B=\(.pl)")) |
          (if .tg == 1 then .speed_pp else .speed_tg end)' "$raw")
        printf ' %9.1f' "${v:-0}"
    done
    echo
done
