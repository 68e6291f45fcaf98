#!/bin/sh
# Update throughput: one grpo-update over 64 completions of 128
# tokens after 64-token prompts on SmolLM2-135M, full fine-tuning and LoRA
# r=16, with and without --recompute: tokens/s, the fractions of the
# ceilings bench_model measured in the same run (OpenBLAS's sgemm, and the
# best kernel including our packed one; FLOPs = 6 x parameters x tokens for
# full fine-tuning, 4 x for LoRA), and peak RSS.
# Goals: >= 50% of the sgemm ceiling; <= 3 GB peak RSS with --recompute.
# Then full fine-tuning and LoRA again with --compute bf16 (bf16
# matrix products, float32 sums; CPUs with AVX-512 BF16), and bf16 / f32
# tokens/s of the same run (goal: >= 1.6x on full fine-tuning).
# First the peer, bench/update_peer.py (the same step in PyTorch eager on the
# same batch and threads), so each row also shows its tokens/s and ours / its.
# No assertions: a benchmark prints.
#   sh bench/update.sh [MODEL.gguf]   (BENCH_PEER=0 skips PyTorch;
#                                      BENCH_PEER_TRIALS=N: its best of N, default 2)
set -eu
cd "$(dirname "$0")/.."
MODEL=${1:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
OUT=${BENCH_DIR:-build/bench}
PY=.venv/bin/python
mkdir -p "$OUT"
if [ ! -f "$MODEL" ]; then
    echo "bench/update.sh: $MODEL missing (make models); skipped" >&2
    exit 0
fi
# the ceilings of bench/model.sh's run, or of a run made now when it left none
grep -qs '^kv ceiling .*sgemm=' "$OUT/model.txt" || build/bench/bench_model "$MODEL" > "$OUT/model.txt"
ceiling=$(sed -n 's/^kv ceiling gflops=\([0-9.]*\).*/\1/p' "$OUT/model.txt")
sgemm=$(sed -n 's/^kv ceiling .*sgemm=\([0-9.]*\).*/\1/p' "$OUT/model.txt")
# 64 completions (8 prompts x 8), random tokens: the cost does not depend on them
"$PY" bench/make_batch.py "$OUT/update-batch.jsonl" 8 8 64 128
# the peer (it prints its own table; kv lines name the modes as the rows below)
peer=""
if [ "${BENCH_PEER:-1}" != 0 ] && "$PY" -c 'import torch' 2>/dev/null; then
    # the OpenMP OpenBLAS for Debian's torch, as bench/model.sh explains
    BLAS_OMP=/usr/lib/$(cc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)/openblas-openmp
    LD_LIBRARY_PATH="$BLAS_OMP${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        "$PY" bench/update_peer.py --batch "$OUT/update-batch.jsonl" --threads "$(nproc)" \
        --trials "${BENCH_PEER_TRIALS:-2}" > "$OUT/update-torch.txt"
    echo "PyTorch peer (bench/update_peer.py):"
    grep -v '^kv ' "$OUT/update-torch.txt"
    echo
    peer=1
else
    echo "peer: skipped (BENCH_PEER=0, or no PyTorch in $PY)"
fi
params=134515008   # SmolLM2-135M (tied embeddings)
tokens=$((64 * 192))
echo "grpo-update, SmolLM2-135M, 64 x (64 + 128) tokens; ceilings (bench_model): OpenBLAS sgemm ${sgemm} GFLOP/s, best kernel (ours packed included) ${ceiling} GFLOP/s"
if [ -n "$peer" ]; then
    printf '  %-22s %9s %9s %8s %8s %10s %9s %8s\n' mode seconds tokens/s "% sgemm" "% best" "peak RSS" PyTorch "ours/PT"
else
    printf '  %-22s %9s %9s %8s %8s %10s\n' mode seconds tokens/s "% sgemm" "% best" "peak RSS"
fi
run() { # NAME KEY FLOPS_PER_PARAM_TOKEN FLAGS... (tokens/s kept in tps_KEY)
    name=$1 key=$2 k=$3; shift 3
    rm -rf "$OUT/update-ckpt"
    /usr/bin/time -f '%e %M' -o "$OUT/update-time" bin/grpo-update --model "$MODEL" --in "${BATCH:-$OUT/update-batch.jsonl}" \
        --out "$OUT/update-ckpt" --lr 1e-6 --beta 0 --metrics "$OUT/update-metrics.jsonl" "$@" 2>/dev/null
    set -- $(cat "$OUT/update-time")
    # metrics "seconds": the update with model load and batch read (well under a second), checkpoint writing excluded
    secs=$(tail -n 1 "$OUT/update-metrics.jsonl" | sed 's/.*"seconds":\([0-9.e+-]*\).*/\1/')
    tps=$(echo "$tokens / $secs" | bc -l)
    frac=$(echo "$k * $params * $tokens / $secs / ($ceiling * 1000000000) * 100" | bc -l)
    frac_sgemm=$(echo "$k * $params * $tokens / $secs / ($sgemm * 1000000000) * 100" | bc -l)
    eval "tps_$key=$tps"
    printf '  %-22s %9.1f %9.1f %7.1f%% %7.1f%% %6.0f MiB' "$name" "$secs" "$tps" "$frac_sgemm" "$frac" "$(($2 / 1024))"
    ptps=""
    [ -z "$peer" ] || ptps=$(sed -n "s/^kv $name tok_s=\([0-9.]*\).*/\1/p" "$OUT/update-torch.txt")
    if [ -n "$ptps" ]; then
        printf ' %9.1f %7.2fx' "$ptps" "$(echo "$tps / $ptps" | bc -l)"
    fi
    echo
}
run "full" full 6
run "full --recompute" full_rec 6 --recompute
run "LoRA r=16" lora 4 --lora-r 16
run "LoRA r=16 --recompute" lora_rec 4 --lora-r 16 --recompute
if grep -qw avx512_bf16 /proc/cpuinfo; then
    run "full, bf16" full_bf16 6 --compute bf16
    run "LoRA r=16, bf16" lora_bf16 4 --lora-r 16 --compute bf16
    printf 'bf16 / f32 tokens/s: full fine-tuning %.2fx (goal >= 1.6x), LoRA r=16 %.2fx\n' \
        "$(echo "$tps_full_bf16 / $tps_full" | bc -l)" "$(echo "$tps_lora_bf16 / $tps_lora" | bc -l)"
else
    echo "--compute bf16: skipped (no AVX-512 BF16 on this CPU)"
fi
# The same step on a batch as rollout writes it: each group's 8 records share
# their prompt, which grpo-update computes once (12,288 tokens in 8,704 rows).
# Its "% sgemm" counts every token's FLOPs, so it exceeds what ran.
"$PY" bench/make_batch.py "$OUT/update-batch-grouped.jsonl" 8 8 64 128 grouped
BATCH="$OUT/update-batch-grouped.jsonl" run "full, grouped prompts" full_grp 6
printf 'grouped prompts / distinct prompts, tokens/s: full fine-tuning %.2fx\n' "$(echo "$tps_full_grp / $tps_full" | bc -l)"
echo "goals: >= 50% of the sgemm ceiling (% sgemm); peak RSS <= 3072 MiB with --recompute"
rm -rf "$OUT/update-ckpt"
