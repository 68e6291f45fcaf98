#!/usr/bin/env bash
# make demo [QUICK=1] [SEED=N] [BASE=FMT] [DEMO_RUN=DIR]: a whole GRPO run on SmolLM2-135M-Instruct
# through pipelines/grpo.mk, then held-out accuracy before -> after, the
# exported HF directory and GGUF, and a PNG of reward, accuracy and KL per step.
# On a terminal a progress bar (scripts/grpo-progress) sits under the step lines.
# DEMO_CONFIG=FILE runs another make fragment's settings the same way (make
# example-guess and the tests do); DEMO_TITLE names it in the plot. BASE=FMT
# trains the LoRA over a frozen base kept in that format (grpo-update
# --base-weights: bf16, q8, q4k), in runs/demo-CONF-FMT-seedN.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
QUICK=${QUICK:-}
SEED=${SEED:-1}
BASE=${BASE:-}
if [ -n "$QUICK" ]; then CONF=quick; else CONF=config; fi
# DEMO_CONFIG: another make fragment in place of pipelines/demo/CONF.mk (the tests' tiny model)
CONFIG=${DEMO_CONFIG:-$ROOT/pipelines/demo/$CONF.mk}
[ -f "$CONFIG" ] || { echo "demo: $CONFIG: no such file" >&2; exit 66; }
RUN=${DEMO_RUN:-runs/demo-$CONF${BASE:+-$BASE}-seed$SEED}
mkdir -p "$RUN"
# the run's settings: the demo's, kept in step with pipelines/demo/ (make re-runs what they change)
{
    echo "include $CONFIG"
    echo "SEED = $SEED"
    if [ -n "$BASE" ]; then echo "UPDATE_FLAGS += --base-weights $BASE"; fi
} > "$RUN/config.mk.tmp"
if cmp -s "$RUN/config.mk.tmp" "$RUN/config.mk"; then rm -f "$RUN/config.mk.tmp"; else mv "$RUN/config.mk.tmp" "$RUN/config.mk"; fi

steps=$(make --no-print-directory -s -f pipelines/grpo.mk RUN="$RUN" GRPO_ROOT="$ROOT" \
    --eval='demo-steps: ; @echo $(STEPS)' demo-steps)
echo "grpo demo: $RUN ($steps steps; interrupt and rerun to resume)" >&2
start=$(date +%s)
train=(make --no-print-directory -f pipelines/grpo.mk RUN="$RUN" GRPO_ROOT="$ROOT" run eval export)
# make's lines on stderr, less its "Nothing to be done" for goals the run already made;
# on a terminal, a progress bar under them
if [ -t 2 ]; then show=(scripts/grpo-progress --steps "$steps" "$RUN"); else show=(cat); fi
"${train[@]}" 2>&1 | sed -u "/^make\(\[[0-9]*\]\)\{0,1\}: Nothing to be done for '/d" | "${show[@]}" >&2
# a second pass takes in the evaluations the first one made (metrics.jsonl lists them)
make --no-print-directory -f pipelines/grpo.mk RUN="$RUN" GRPO_ROOT="$ROOT" metrics > /dev/null
seconds=$(($(date +%s) - start))

scripts/grpo-plot --title "${DEMO_TITLE:-grpo demo: SmolLM2-135M-Instruct on arith} ($RUN)" "$RUN/metrics.jsonl" "$RUN/curves.png"
summary=$(scripts/grpo-summary --json "$RUN/metrics.jsonl")
before=$(printf '%s' "$summary" | jq -r '.metrics["eval/accuracy"].first // "n/a"')
after=$(printf '%s' "$summary" | jq -r '.metrics["eval/accuracy"].last // "n/a"')
# how the held-out set was sampled, from the last eval line
how=$(jq -r -s 'map(select(.kind == "eval")) | last // {} | if (.["eval/temperature"] // 0) == 0 then "greedy"
      else "sampled at temperature \(.["eval/temperature"]), \(.["eval/k"]) per prompt" end' "$RUN/metrics.jsonl")
echo
echo "held-out accuracy ($how): $before -> $after"
echo "run: $RUN (metrics.jsonl, steps/, ckpt/), $seconds s"
ls -d "$RUN"/export/* 2>/dev/null | sed 's/^/exported: /'
echo "curves: $RUN/curves.png"
