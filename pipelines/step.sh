#!/bin/bash
# step.sh MODEL PROMPTS OUT: one GRPO step as a shell pipeline, no files between
# the stages:
#
#   grpo-rollout | REWARD | grpo-advantage | grpo-update --in - --out OUT
#
# Environment (default): K (8), MAX_NEW_TOKENS (128), TEMPERATURE (1), SEED (1),
# ROLLOUT_FLAGS, REWARD (grpo-reward $REWARD_FLAGS; any command reading rollout
# records on stdin and writing scored records on stdout, e.g. a jq program),
# REWARD_FLAGS (--fn answer,format:0.2), ADVANTAGE_FLAGS, UPDATE_FLAGS
# (--lr 1e-5 --beta 0.04), METRICS (a file grpo-update appends its line to).
# The checkpoint is written as OUT.part and renamed to OUT (and the metrics line
# appended) only when every stage of the pipe succeeded, so a stage failing
# half-way never leaves a checkpoint trained on part of the batch. pipelines/grpo.mk runs the same stages with
# their outputs as files: resumable, cached, shardable.
set -euo pipefail
[ $# -eq 3 ] || { echo "step.sh: usage: step.sh MODEL PROMPTS OUT" >&2; exit 64; }
model=$1 prompts=$2 out=$3
: "${K:=8}" "${MAX_NEW_TOKENS:=128}" "${TEMPERATURE:=1}" "${SEED:=1}"
: "${REWARD_FLAGS:=--fn answer,format:0.2}" "${REWARD:=grpo-reward $REWARD_FLAGS}"
: "${UPDATE_FLAGS:=--lr 1e-5 --beta 0.04}"

rm -rf "$out.part" "$out.metrics"
set +e
# shellcheck disable=SC2086 # the *_FLAGS are lists of flags
grpo-rollout --model "$model" --in "$prompts" -k "$K" --max-new-tokens "$MAX_NEW_TOKENS" \
        --temperature "$TEMPERATURE" --seed "$SEED" ${ROLLOUT_FLAGS:-} \
    | bash -c "$REWARD" \
    | grpo-advantage ${ADVANTAGE_FLAGS:-} \
    | grpo-update --model "$model" --in - --out "$out.part" --metrics "$out.metrics" $UPDATE_FLAGS
status=("${PIPESTATUS[@]}")
set -e
# the first stage that failed by itself (not from a broken pipe: 141) names the exit status
fail=0
for s in "${status[@]}"; do
    if [ "$s" != 0 ] && { [ "$fail" = 0 ] || [ "$fail" = 141 ]; }; then fail=$s; fi
done
if [ "$fail" != 0 ]; then
    rm -rf "$out.part" "$out.metrics"
    echo "step.sh: a stage of the pipe failed (exit statuses ${status[*]}); $out is left as it was" >&2
    exit "$fail"
fi
rm -rf "$out"
mv "$out.part" "$out"
if [ -n "${METRICS:-}" ]; then cat "$out.metrics" >> "$METRICS"; fi
rm -f "$out.metrics"
