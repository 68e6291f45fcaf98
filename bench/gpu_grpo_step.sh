#!/bin/sh
# make bench-gpu's whole-GRPO-step row: one step of the grpo tools on the GPU
# (grpo-rollout --device cuda, a reward program, grpo-advantage, grpo-update
# --device cuda, each a process that loads the model itself, as a make-driven
# run does) against one step of TRL's GRPOTrainer without vLLM
# (bench/gpu_trl_peer.py) on the same card: random weights of SmolLM2-135M's
# shape (bench/gpu_models.py; BENCH_STEP_MODEL for another), 64 prompts of
# 128 random token ids, K = 8, 256 new tokens at temperature 1, loss grpo
# without KL, lr 1e-6, micro-batches of 64 completions, one optimizer step.
# Prints each side's step time, sampled tokens per second of the step, peak
# GPU memory (ours: the larger of rollout's and update's; TRL's: torch's
# max_memory_allocated) and the ratio. Where TRL is not installed, install
# its wheels (scripts/gpu/wheels.sh, docs/gpu.md) and set PYTHONPATH, or
# BENCH_TRL=0 skips it.
# No assertions: a benchmark prints.
#   sh bench/gpu_grpo_step.sh
set -eu
cd "$(dirname "$0")/.."
PY=${GRPO_PY:-python3}
OUT=${BENCH_DIR:-build/bench-gpu}
MODELS=${BENCH_MODELS:-$OUT/models}
NAME=${BENCH_STEP_MODEL:-smollm2-135m}
K=8 PROMPTS=64 NEW=256 PLEN=128 MICRO=64
mkdir -p "$OUT" "$MODELS"

if ! bin/grpo-update --device cuda --model /nonexistent --out "$OUT/probe" 2>&1 | grep -q nonexistent; then
    echo "bench/gpu_grpo_step.sh: grpo-update cannot use a GPU here: $(bin/grpo-update --device cuda --model /nonexistent --out "$OUT/probe" 2>&1)" >&2
    exit 0
fi
"$PY" bench/gpu_prompts.py "$OUT/step_prompts.jsonl" "$PROMPTS" "$PLEN"
"$PY" bench/gpu_models.py "$MODELS" "$NAME" > "$OUT/$NAME.make.txt"
dir="$MODELS/$NAME"
S="$OUT/step"
rm -rf "$S" && mkdir -p "$S"

now() { date +%s.%N; }
t0=$(now)
bin/grpo-rollout --model "$dir" --device cuda -k $K --max-new-tokens $NEW --temperature 1 --batch $((K * PROMPTS)) --progress \
    --in "$OUT/step_prompts.jsonl" --out "$S/rollouts.jsonl" 2> "$S/rollout.txt"
t1=$(now)
# the reward as TRL's peer computes it (the completion's distinct
# characters), by a program of its own as grpo.mk's REWARD= allows: its cost
# is not what is measured, and a GPU machine with only scripts/gpu/bundle.sh's
# libraries lacks grpo-reward's (curl, SQLite, TLS)
"$PY" -c 'import json, sys
with open(sys.argv[2], "w") as out:
    for line in open(sys.argv[1]):
        r = json.loads(line)
        r["reward"] = float(len(set(r["completion"])))
        out.write(json.dumps(r) + "\n")' "$S/rollouts.jsonl" "$S/scored.jsonl"
bin/grpo-advantage --in "$S/scored.jsonl" --out "$S/advantaged.jsonl" 2> "$S/advantage.txt"
t2=$(now)
bin/grpo-update --device cuda --model "$dir" --in "$S/advantaged.jsonl" --out "$S/ckpt" --beta 0 --lr 1e-6 --loss grpo \
    --micro-batch $((MICRO * (PLEN + NEW))) 2> "$S/update.txt"
t3=$(now)
sampled=$("$PY" -c 'import json, sys; print(sum(len(json.loads(l)["completion_tokens"]) for l in open(sys.argv[1])))' \
    "$S/rollouts.jsonl")
peak() { sed -n 's/.*peak \([0-9.]*\) MiB allocated.*/\1/p' "$1" | tail -n 1; }
ours_mib=$(printf '%s\n%s\n' "$(peak "$S/rollout.txt")" "$(peak "$S/update.txt")" | sort -g | tail -n 1)
ours=$(awk -v a="$t0" -v b="$t3" 'BEGIN { printf "%.2f", b - a }')
echo "ours: rollout $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }') s, reward + advantage" \
    "$(awk -v a="$t1" -v b="$t2" 'BEGIN { printf "%.2f", b - a }') s, update" \
    "$(awk -v a="$t2" -v b="$t3" 'BEGIN { printf "%.2f", b - a }') s (each loading the model itself)"

trl=- trl_mib=- ratio=-
if [ "${BENCH_TRL:-1}" != 0 ]; then
    "$PY" bench/gpu_trl_peer.py "$dir" "$OUT/step_prompts.jsonl" $K $NEW $MICRO "$S/trl" > "$S/trl.txt" 2> "$S/trl.err" ||
        { echo "bench/gpu_grpo_step.sh: the TRL peer failed: $(tail -n 3 "$S/trl.err")" >&2; exit 1; }
    trl=$(sed -n 's/^kv trl_step .*secs=\([0-9.]*\) .*/\1/p' "$S/trl.txt")
    trl_mib=$(sed -n 's/^kv trl_step .*peak_mib=\([0-9]*\).*/\1/p' "$S/trl.txt")
    ratio=$(awk -v a="$trl" -v b="$ours" 'BEGIN { printf "%.2f", a / b }')
fi
printf '\n%-14s %10s %12s %10s %10s %12s %10s %7s\n' model "ours s" "ours tok/s" "ours MiB" "TRL s" "TRL tok/s" "TRL MiB" ratio
printf '%-14s %10s %12s %10s %10s %12s %10s %7s\n' "$NAME" "$ours" \
    "$(awk -v n="$sampled" -v s="$ours" 'BEGIN { printf "%.0f", n / s }')" "${ours_mib:--}" "$trl" \
    "$(awk -v n=$((K * PROMPTS * NEW)) -v s="$trl" 'BEGIN { if (s + 0 > 0) printf "%.0f", n / s; else printf "-" }')" \
    "$trl_mib" "$ratio"
echo "(full logs in $S)"
