#!/bin/sh
# make bench-gpu's training rows: grpo-update --device cuda (full fine-tuning,
# AdamW, bf16 products with float32 master weights) against a PyTorch eager
# step of the same model, batch, loss and optimizer on the same card
# (bench/gpu_train_peer.py), on random weights of SmolLM2-135M's,
# Qwen2.5-0.5B's and 1.5B's shapes (bench/gpu_models.py). The batch: 4
# prompt groups of 4 completions, prompts and completions of 128 tokens
# (4,096 tokens), one micro-batch; grpo loss, no KL (--beta 0), lr 1e-6,
# clipping at 1.0. Each side takes STEPS (3) optimizer steps, the first a
# warm-up: tokens/s is the mean of the others (ours: metrics.jsonl's
# tokens_per_second of the last step, whose seconds exclude loading).
# Prints tokens/s, peak GPU memory of each (ours: what our allocations held;
# theirs: torch's max_memory_allocated), the ratio, and our MFU against the
# card's measured cuBLAS bf16 GEMM rate. Ours computes each group's prompt
# once (lib/train/trainer.c) and the LM head on completion tokens only; the
# peer, as TRL, computes both for every token. MFU counts the model's
# nominal FLOPs for every token of the batch (bench/gpu_train_peer.py), as
# MFU is usually counted, so it credits ours with work those two skip.
# No assertions: a benchmark prints.
#   sh bench/gpu_train.sh [NAME ...]
set -eu
cd "$(dirname "$0")/.."
PY=${GRPO_PY:-python3}
OUT=${BENCH_DIR:-build/bench-gpu}
MODELS=${BENCH_MODELS:-$OUT/models}
STEPS=${STEPS:-3}
mkdir -p "$OUT" "$MODELS"

if ! bin/grpo-update --device cuda --model /nonexistent --out "$OUT/probe" 2>&1 | grep -q nonexistent; then
    echo "bench/gpu_train.sh: grpo-update cannot use a GPU here: $(bin/grpo-update --device cuda --model /nonexistent --out "$OUT/probe" 2>&1)" >&2
    exit 0
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
date -u

"$PY" - "$OUT/train_batch.jsonl" <<'PYEOF'
import json, random, sys
rnd = random.Random(11)
with open(sys.argv[1], "w") as f:
    for g in range(4):
        prompt = [rnd.randrange(3, 97) for _ in range(128)]
        for k in range(4):
            comp = [rnd.randrange(3, 97) for _ in range(128)]
            f.write(json.dumps({"id": f"g{g}", "prompt_tokens": prompt, "completion_tokens": comp,
                                "logprobs": [round(-4.6 + 0.2 * rnd.random(), 4) for _ in comp],
                                "advantage": 1.0 if k % 2 else -1.0}) + "\n")
PYEOF

printf '\n%-14s %12s %10s %12s %10s %7s %7s %10s\n' model "ours tok/s" "ours MiB" "torch tok/s" "torch MiB" ratio MFU \
    "GEMM TF/s"
for name in ${*:-smollm2-135m qwen2.5-0.5b qwen2.5-1.5b}; do
    "$PY" bench/gpu_models.py "$MODELS" "$name" > "$OUT/$name.make.txt"
    dir="$MODELS/$name"
    rm -rf "$OUT/$name.ckpt" "$OUT/$name.metrics.jsonl"
    if ! bin/grpo-update --device cuda --model "$dir" --in "$OUT/train_batch.jsonl" --out "$OUT/$name.ckpt" \
        --beta 0 --lr 1e-6 --max-grad-norm 1 --micro-batch 4096 --iterations "$STEPS" \
        --metrics "$OUT/$name.metrics.jsonl" 2> "$OUT/$name.update.txt"; then
        echo "bench/gpu_train.sh: grpo-update failed: $(tail -n 1 "$OUT/$name.update.txt")" >&2
        exit 1
    fi
    ours=$(tail -n 1 "$OUT/$name.metrics.jsonl" | sed -n 's/.*"tokens_per_second":\([0-9.e+]*\).*/\1/p')
    ours_mib=$(sed -n 's/.*peak \([0-9.]*\) MiB allocated.*/\1/p' "$OUT/$name.update.txt" | tail -n 1)
    "$PY" bench/gpu_train_peer.py "$dir" "$OUT/train_batch.jsonl" "$STEPS" > "$OUT/$name.torch.txt"
    theirs=$(sed -n 's/^kv torch_step .*tok_s=\([0-9.]*\).*/\1/p' "$OUT/$name.torch.txt")
    theirs_mib=$(sed -n 's/^kv torch_step .*peak_mib=\([0-9]*\).*/\1/p' "$OUT/$name.torch.txt")
    fpt=$(sed -n 's/^kv flops_per_token value=\([0-9]*\).*/\1/p' "$OUT/$name.torch.txt")
    tf=$(sed -n 's/^kv gemm_bf16 tflops=\([0-9.]*\).*/\1/p' "$OUT/$name.torch.txt")
    ratio=$(awk -v a="$ours" -v b="$theirs" 'BEGIN { printf "%.2f", a / b }')
    mfu=$(awk -v t="$ours" -v f="$fpt" -v c="$tf" 'BEGIN { printf "%.1f%%", 100 * t * f / (c * 1e12) }')
    printf '%-14s %12.0f %10s %12.0f %10s %7s %7s %10s\n' "$name" "$ours" "${ours_mib:--}" "$theirs" "$theirs_mib" \
        "$ratio" "$mfu" "$tf"
done
echo "(full logs in $OUT)"
