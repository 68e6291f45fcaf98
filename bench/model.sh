#!/bin/sh
# Model throughput: build/bench/bench_model (SmolLM2-135M prefill and decode
# next to the sgemm and memory-bandwidth ceilings measured in the same run,
# with its goals) with the weights in f32, bf16 and q8, then the peer, bench/torch_peer.py (the same
# forward in PyTorch fp32 on the same threads) and llama.cpp's
# llama-batched-bench (bench/llama_peer.sh: f32, Q8_0, Q4_1), and our/peer ratios.
# No assertions: a benchmark prints.
#   sh bench/model.sh [MODEL.gguf]      (BENCH_PEER=0 skips the peers)
set -eu
cd "$(dirname "$0")/.."
MODEL=${1:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
BIN=build/bench/bench_model
PY=.venv/bin/python
OUT=${BENCH_DIR:-build/bench}
mkdir -p "$OUT"

if [ ! -f "$MODEL" ]; then
    echo "bench/model.sh: $MODEL missing (make models); skipped" >&2
    exit 0
fi
[ -x "$BIN" ] || make --no-print-directory "$BIN"

# Nothing else should run meanwhile: both sides use every core. Each weight
# format of grpo-rollout --weights (BENCH_WEIGHTS to choose), one after the
# other; model.txt is the first's (the PyTorch comparison below is fp32's).
FORMATS=${BENCH_WEIGHTS:-f32 bf16 q8}
first=
for w in $FORMATS; do
    GRPO_WEIGHTS=$w "$BIN" "$MODEL" > "$OUT/model-$w.txt"
    grep -v '^kv ' "$OUT/model-$w.txt"
    echo
    [ -n "$first" ] || { first=$w; cp "$OUT/model-$w.txt" "$OUT/model.txt"; }
done
echo "tokens/s by weight format (same run):"
printf '  %-15s' ""; for w in $FORMATS; do printf ' %9s' "$w"; done; echo
for name in "prefill T=128" "prefill T=512" "decode B=1" "decode B=16" "decode B=64"; do
    printf '  %-15s' "$name"
    for w in $FORMATS; do printf ' %9.1f' "$(sed -n "s/^kv $name tok_s=//p" "$OUT/model-$w.txt")"; done
    echo
done

[ "${BENCH_PEER:-1}" = 0 ] && exit 0

# ours / peer for each measurement both printed: ratios OURS_FILE PEER_FILE PEER_PREFIX
ratios() {
    for name in "prefill T=128" "prefill T=512" "decode B=1" "decode B=16" "decode B=64"; do
        ours=$(sed -n "s/^kv $name tok_s=//p" "$1")
        peer=$(sed -n "s/^kv $3$name tok_s=//p" "$2")
        if [ -n "$ours" ] && [ -n "$peer" ]; then
            printf '  %-15s %8.1f / %8.1f = %5.2fx\n' "$name" "$ours" "$peer" "$(echo "$ours / $peer" | bc -l)"
        fi
    done
}

echo
sh bench/llama_peer.sh "$OUT" > "$OUT/llama.txt"
grep -v '^kv ' "$OUT/llama.txt"
if grep -q '^kv ' "$OUT/llama.txt"; then
    # llama.cpp's best format at each measurement
    for name in "prefill T=128" "prefill T=512" "decode B=1" "decode B=16" "decode B=64"; do
        sed -n "s/^kv llama.cpp [^ ]* $name tok_s=//p" "$OUT/llama.txt" | sort -g | tail -1 | sed "s/^/kv $name tok_s=/"
    done > "$OUT/llama_best.txt"
    for w in $FORMATS; do
        echo
        echo "ours ($w weights) / llama.cpp Q8_0 (tokens/s, same machine, same run):"
        ratios "$OUT/model-$w.txt" "$OUT/llama.txt" "llama.cpp Q8_0 "
        echo "ours ($w weights) / llama.cpp's best of f32, Q8_0, Q4_1:"
        ratios "$OUT/model-$w.txt" "$OUT/llama_best.txt" ""
    done
fi

if ! "$PY" -c 'import torch' 2>/dev/null; then
    echo "peer: PyTorch not available ($PY); skipped"
    exit 0
fi
echo
# Debian's torch links libblas.so.3, by default the pthreads OpenBLAS, whose
# spinning pool fights torch's OpenMP one (3x slower at batch 64); give it
# the OpenMP build we use, so the peer is at its best.
BLAS_OMP=/usr/lib/$(cc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)/openblas-openmp
LD_LIBRARY_PATH="$BLAS_OMP${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    "$PY" bench/torch_peer.py --threads "$(nproc)" > "$OUT/torch.txt"
grep -v '^kv ' "$OUT/torch.txt"
echo
echo "ours / PyTorch (tokens/s, same machine, same run):"
ratios "$OUT/model.txt" "$OUT/torch.txt" ""
