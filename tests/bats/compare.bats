#!/usr/bin/env bats
# pipelines/compare.mk and pipelines/compare-report.sh (the algorithms side by
# side on the demo's settings) on the tiny random llama: the runs, their
# config.mk, the table's numbers against the runs' files, the plot, resuming.
# needs: venv
load helpers
unset MAKEFLAGS MFLAGS MAKELEVEL

setup_file() {
    export TINY="$BATS_FILE_TMPDIR/tiny"
    make_tiny_llama "$TINY"
}

@test "pipelines/compare.mk: ALGO x SEED runs one after another, the table and the reward plot (tiny model)" {
    needs_tiny
    mkdir conf
    for a in plain clipped; do
        {
            echo "MODEL = $TINY"
            echo "PREP_FLAGS = --task arith --n 20 --split train --seed 1 --chat-template raw --word-problems 0 --model $TINY"
            echo "EVAL_PREP_FLAGS = --task arith --n 4 --split test --seed 1 --chat-template raw --word-problems 0 --model $TINY"
            echo "STEPS = 2"
            echo "PROMPTS_PER_STEP = 4"
            echo "K = 4"
            echo "MAX_NEW_TOKENS = 8"
            echo "ROLLOUT_FLAGS = --threads 1"
            echo "EVAL_FLAGS = --threads 1"
            echo "REWARD_FLAGS = --fn answer,length:0.5 --max-len 8 --overlong-buffer 6 --quiet"
            echo "EVAL_REWARD_FLAGS = --fn answer --quiet"
            echo "UPDATE_FLAGS = --lr 1e-3 --threads 1 $([ $a = clipped ] && echo --epsilon-high 0.28)"
            echo "TENSORBOARD ="
        } > conf/$a.mk
    done
    cmp_mk() { make --no-print-directory -f "$GRPO_ROOT/pipelines/compare.mk" OUT=out CONFIGS=conf ALGOS='plain clipped' SEEDS='1 2' "$@"; }
    run cmp_mk
    echo "$output"
    [ "$status" -eq 0 ]
    for r in plain-seed1 clipped-seed1 plain-seed2 clipped-seed2; do
        grep -q "^SEED = ${r##*seed}$" out/$r/config.mk
        [ -s out/$r/eval/0002.json ]
        [ -s out/$r/eval/0000.json ]
    done
    grep -q -- '--epsilon-high 0.28' out/clipped-seed1/settings/update
    # the table: a row per run with its numbers, then a mean per algorithm
    [ "$(grep -c '^| plain | [12] | ' out/compare.md)" -eq 2 ]
    [ "$(grep -c '^| clipped | [12] | ' out/compare.md)" -eq 2 ]
    acc=$(jq '."eval/accuracy"' out/plain-seed2/eval/0002.json)
    secs=$(cat out/plain-seed2/steps/*/*.seconds | awk '{ s += $1 } END { printf "%.0f", s }')
    grep -q "^| plain | 2 | [0-9.]* | $(printf %.3f "$acc") (step 2) | -\{0,1\}[0-9.]* | $secs |$" out/compare.md
    grep -q '^| \*\*clipped\*\* (mean of 2) |' out/compare.md
    [ "$(head -c 8 out/reward.png | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]
    # resumable: a second make redoes nothing; a run missing its last evaluation is left out, named
    before=$(stat -c %Y out/*/ckpt/0002/grpo/state.json out/*/eval/*.json)
    cmp_mk runs > /dev/null 2>&1
    [ "$(stat -c %Y out/*/ckpt/0002/grpo/state.json out/*/eval/*.json)" = "$before" ]
    rm out/clipped-seed2/eval/0002.json
    run "$GRPO_ROOT/pipelines/compare-report.sh" out plain-seed1 clipped-seed2
    [ "$status" -eq 0 ]
    [[ "$output" == *"clipped-seed2 is not finished"* ]]
    ! grep -q '^| clipped' out/compare.md || false
    run "$GRPO_ROOT/pipelines/compare-report.sh" out
    [ "$status" -eq 64 ]
}

@test "pipelines/demo/compare: every shipped algorithm is a run grpo.mk reads, the demo's settings with its own update flags" {
    local f a
    for f in "$GRPO_ROOT"/pipelines/demo/compare/*.mk; do
        a=$(basename "$f" .mk)
        mkdir "$a"
        printf 'include %s\nSEED = 2\n' "$f" > "$a/config.mk"
        run make --no-print-directory -s -f "$GRPO_ROOT/pipelines/grpo.mk" RUN="$a" GRPO_ROOT="$GRPO_ROOT" \
            --eval='show: ; @echo "$(STEPS) $(K) $(SEED) $(UPDATE_FLAGS)"' show
        [ "$status" -eq 0 ]
        [[ "$output" == "16 8 2 --lora-r 16 --lr 5e-4 --beta 0.04"* ]] || [[ "$output" == "16 8 2 --lora-r 16 --lr 5e-4 --beta 0"* ]] ||
            { echo "$a: $output"; false; }
    done
    run make --no-print-directory -s -f "$GRPO_ROOT/pipelines/grpo.mk" RUN=grpo-bf16 GRPO_ROOT="$GRPO_ROOT" \
        --eval='show: ; @echo "$(UPDATE_FLAGS)"' show
    [ "$output" = "--lora-r 16 --lr 5e-4 --beta 0.04 --compute bf16" ]
}
