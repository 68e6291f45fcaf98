#!/bin/sh
# A mixture of experts at gpt-oss-20b's real shape against llama.cpp on the
# same file: rollout decode tokens/s at batch 1 and 16 and each one's peak
# RSS. The model (bench/oss_shape.py: 24 layers, 32 experts, top-4, hidden
# 2880, vocabulary 201,088; random weights, MXFP4 experts, bf16 attention,
# Q8_0 embedding and head) is written once to $BENCH_DIR (about 12.6 GB).
# Ours: build/bench/bench_model "decode B=N" with the tools' weights
# (GRPO_WEIGHTS, default auto: the MXFP4 experts kept, the rest packed as
# auto packs it). llama.cpp: build/bench/llama_decode, the same decode
# (a shared 64-token prompt, 32 steps, a different token in every row, so
# each row routes as a real batch would; llama-batched-bench gives every
# sequence the same token, which sends a whole batch to four experts) over
# the pinned llama.cpp built natively without AMX (its AMX kernels stop with
# SIGSEGV on this model at batch 16: see bench/README.md).
# Nothing else should run meanwhile: both sides use every core.
# Then one grpo-update LoRA step on the same file: bench/qlora.sh's
# gpt-oss-20b shape (r 16 on the attention projections over an mxfp4 base,
# 1,024 tokens, with and without --recompute): its time and peak RSS.
# Goals: within 24 GB; batch 1 >= 1.0x and batch 16 >= 1.5x llama.cpp.
#   sh bench/moe.sh          (BENCH_MOE_B="1 16" to choose batches;
#                             BENCH_MOE_STEP=0 skips the update step)
set -eu
cd "$(dirname "$0")/.."
OUT=${BENCH_DIR:-build/bench}
GGUF=$OUT/oss20b-shape.gguf
OURS=build/bench/bench_model
PEER=build/bench/llama_decode
mkdir -p "$OUT"

skip() { echo "bench/moe.sh: $*; skipped"; exit 0; }
mem_gib=$(awk '/^MemTotal:/ { printf "%d", $2 / 1048576 }' /proc/meminfo)
[ "$mem_gib" -ge 22 ] || skip "${mem_gib} GiB of memory (the model needs about 16 GiB, the page cache the rest)"
for need in "$OURS" "$PEER" build/llama.cpp/src/gguf-py .venv/bin/python; do
    [ -e "$need" ] || skip "$need missing (make bench builds it)"
done
if [ ! -f "$GGUF" ]; then
    free_gib=$(df -Pk "$OUT" | awk 'NR == 2 { printf "%d", $4 / 1048576 }')
    [ "$free_gib" -ge 14 ] || skip "${free_gib} GiB free in $OUT (the model takes 12.6 GB)"
    echo "writing $GGUF (once)"
    .venv/bin/python bench/oss_shape.py build/llama.cpp/src/gguf-py "$GGUF"
fi

# run NAME COMMAND...: the command's "decode B=N: X tokens/s" line and its
# peak RSS, as "NAME tok_s=X rss_mib=Y"
run() {
    name=$1; shift
    /usr/bin/time -f 'maxrss_kib=%M' -o "$OUT/moe.time" "$@" > "$OUT/moe.out" 2> "$OUT/moe.err" ||
        { tail -3 "$OUT/moe.err"; echo "$name failed"; return 0; }
    tok=$(sed -n 's/^decode B=[0-9]*: \([0-9.]*\) tokens\/s.*/\1/p' "$OUT/moe.out")
    rss=$(sed -n 's/^maxrss_kib=//p' "$OUT/moe.time")
    echo "$name tok_s=${tok:-0} rss_mib=$((${rss:-0} / 1024))"
}

THREADS=$(nproc)
echo "gpt-oss-20b shape ($GGUF), $THREADS threads, decode after a 64-token prompt, 32 steps:"
: > "$OUT/moe.kv"
for B in ${BENCH_MOE_B:-1 16}; do
    run "ours B=$B" "$OURS" "$GGUF" "decode B=$B" | tee -a "$OUT/moe.kv"
    run "llama.cpp B=$B" "$PEER" "$GGUF" "$B" 64 | tee -a "$OUT/moe.kv"
done
printf '  %-8s %12s %12s %8s %14s %14s\n' batch "ours tok/s" "llama tok/s" ratio "ours RSS MiB" "llama RSS MiB"
for B in ${BENCH_MOE_B:-1 16}; do
    awk -v B="$B" '
      $1 == "ours" && $2 == "B=" B { split($3, a, "="); split($4, b, "="); o = a[2]; orss = b[2] }
      $1 == "llama.cpp" && $2 == "B=" B { split($3, a, "="); split($4, b, "="); l = a[2]; lrss = b[2] }
      END { printf "  %-8s %12.2f %12.2f %7.2fx %14d %14d\n", B, o, l, (l > 0 ? o / l : 0), orss, lrss }' "$OUT/moe.kv"
done

[ "${BENCH_MOE_STEP:-1}" != 0 ] || exit 0
BENCH_DIR=$OUT sh bench/qlora.sh gpt-oss-20b
