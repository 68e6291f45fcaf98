#!/bin/sh
# One `make demo` step alone, timed: the demo's settings (pipelines/demo/
# config.mk: 8 prompts x 8 completions of up to 32 tokens, LoRA r=16 on
# SmolLM2-135M-Instruct) for BENCH_DEMO_STEPS steps (default 2) without
# evaluation, through pipelines/grpo.mk, and the seconds of each step's
# rollout and update (RUN/steps/NNNN/*.seconds). The checkout whose tools
# run is the first argument (default: this one), so that an older build can
# be timed beside this one on the same machine:
#   sh bench/demo_step.sh [CHECKOUT] [RUN_DIR]
# BENCH_DEMO_MAKE='UPDATE_FLAGS += --compute bf16' adds make lines to the settings.
# No assertions: a benchmark prints.
set -eu
cd "$(dirname "$0")/.."
HERE=$(pwd)
ROOT=$(cd "${1:-$HERE}" && pwd)
RUN=${2:-$HERE/build/bench/demo-step}
STEPS=${BENCH_DEMO_STEPS:-2}
for need in "$ROOT/bin/grpo-rollout" "$HERE/models/SmolLM2-135M-Instruct.Q4_1.gguf"; do
    [ -e "$need" ] || { echo "bench/demo_step.sh: $need missing (make all models); skipped"; exit 0; }
done
[ -e "$ROOT/models" ] || ln -s "$HERE/models" "$ROOT/models"
rm -rf "$RUN"
mkdir -p "$RUN"
printf 'include %s\nSTEPS = %s\nEVAL_EVERY = 0\n%s\n' "$ROOT/pipelines/demo/config.mk" "$STEPS" \
    "${BENCH_DEMO_MAKE:-}" > "$RUN/config.mk"
(cd "$ROOT" && PATH="$ROOT/bin:$PATH" make --no-print-directory -s -f pipelines/grpo.mk RUN="$RUN" GRPO_ROOT="$ROOT" run \
    > "$RUN/make.log" 2>&1) || { tail -5 "$RUN/make.log"; echo "bench/demo_step.sh: the run failed"; exit 1; }
echo "demo step ($ROOT, $(git -C "$ROOT" log -1 --format=%h 2>/dev/null || echo '?')), seconds:"
printf '  %-6s %9s %9s %9s\n' step rollout update both
for d in "$RUN"/steps/*/; do
    r=$(cat "$d/rollout.seconds" 2>/dev/null || echo 0)
    u=$(cat "$d/update.seconds" 2>/dev/null || echo 0)
    printf '  %-6s %9.1f %9.1f %9.1f\n' "$(basename "$d")" "$r" "$u" "$(echo "$r + $u" | bc -l)"
    echo "kv demo step $(basename "$d") rollout=$r update=$u"
done
