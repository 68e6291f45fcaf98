#!/bin/sh
# make demo [QUICK=1] [SEED=N] [DEMO_RUN=DIR]: a whole GRPO run on SmolLM2-135M-Instruct
# through pipelines/grpo.mk, then held-out accuracy before -> after, the
# exported HF directory and GGUF, and a PNG of reward, accuracy and KL per step.
set -eu
cd "$(dirname "$0")/.."
ROOT=$(pwd)
QUICK=${QUICK:-}
SEED=${SEED:-1}
if [ -n "$QUICK" ]; then CONF=quick; else CONF=config; fi
RUN=${DEMO_RUN:-runs/demo-$CONF-seed$SEED}
mkdir -p "$RUN"
# the run's settings: the demo's, kept in step with pipelines/demo/ (make re-runs what they change)
{
    echo "include $ROOT/pipelines/demo/$CONF.mk"
    echo "SEED = $SEED"
} > "$RUN/config.mk.tmp"
if cmp -s "$RUN/config.mk.tmp" "$RUN/config.mk"; then rm -f "$RUN/config.mk.tmp"; else mv "$RUN/config.mk.tmp" "$RUN/config.mk"; fi

echo "grpo demo: $RUN ($(sed -n 's/^STEPS = //p' "pipelines/demo/$CONF.mk" | tail -n 1) steps; interrupt and rerun to resume)" >&2
start=$(date +%s)
make --no-print-directory -f pipelines/grpo.mk RUN="$RUN" GRPO_ROOT="$ROOT" run eval export
# a second pass takes in the evaluations the first one made (metrics.jsonl lists them)
make --no-print-directory -f pipelines/grpo.mk RUN="$RUN" GRPO_ROOT="$ROOT" metrics > /dev/null
seconds=$(($(date +%s) - start))

scripts/grpo-plot --title "grpo demo: SmolLM2-135M-Instruct on arith ($RUN)" "$RUN/metrics.jsonl" "$RUN/curves.png"
summary=$(scripts/grpo-summary --json "$RUN/metrics.jsonl")
before=$(printf '%s' "$summary" | jq -r '.metrics["eval/accuracy"].first // "n/a"')
after=$(printf '%s' "$summary" | jq -r '.metrics["eval/accuracy"].last // "n/a"')
echo
echo "held-out accuracy (greedy): $before -> $after"
echo "run: $RUN (metrics.jsonl, steps/, ckpt/), $seconds s"
ls -d "$RUN"/export/* 2>/dev/null | sed 's/^/exported: /'
echo "curves: $RUN/curves.png"
