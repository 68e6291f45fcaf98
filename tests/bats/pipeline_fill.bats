#!/usr/bin/env bats
# pipelines/grpo.mk FILL_NONFLAT=1 (DAPO dynamic sampling, pipelines/fill.sh) on
# the tiny random llama: rounds of further prompts until the step has
# PROMPTS_PER_STEP non-flat groups, the FILL_ROUNDS bound, the counts in the
# metrics, caching, settings changes, kill -9 and resume, retention.
# needs: venv
load helpers
unset MAKEFLAGS MFLAGS MAKELEVEL

setup_file() {
    export TINY="$BATS_FILE_TMPDIR/tiny"
    make_tiny_llama "$TINY"
}

mk() { local run=$1; shift; make --no-print-directory -f "$GRPO_ROOT/pipelines/grpo.mk" RUN="$run" "$@"; }

# A reward that makes a group flat by its prompt: ids whose byte sum is not a
# multiple of 3 get 0 for every completion, the others the sample index (never flat).
SOME_FLAT="jq -c '.rewards = {s: (if ((.id | explode | add) % 3) != 0 then 0 else .sample end)} | .reward = .rewards.s'"
ALL_FLAT="jq -c '.rewards = {s: 0} | .reward = 0'"

# config RUN REWARD [LINES...]: 2 steps of 4 prompts (of 20), 4 completions of at most 12 tokens
config() {
    mkdir -p "$1"
    {
        echo "MODEL = $TINY"
        echo "PREP_FLAGS = --task arith --n 20 --split train --seed 1 --chat-template raw --word-problems 0 --model $TINY"
        echo "STEPS = 2"
        echo "PROMPTS_PER_STEP = 4"
        echo "K = 4"
        echo "MAX_NEW_TOKENS = 12"
        echo "ROLLOUT_FLAGS = --threads 1"
        echo "REWARD = $2"
        echo "UPDATE_FLAGS = --lr 1e-3 --beta 0.04 --threads 1"
        echo "SEED = 3"
        echo "TENSORBOARD ="
        echo "FILL_NONFLAT = 1"
        shift 2
        for l in "$@"; do echo "$l"; done
    } > "$1/config.mk"
}

untimed() { jq -c 'del(.seconds, .tokens_per_second, ."eval/seconds")' "$1"; }

# group_ids FILE: the ids of FILE's groups (JSON), in order
group_ids() { zstd -dcf "$1" | jq -c .id | uniq; }

@test "FILL_NONFLAT=1: rounds until P non-flat groups, the first P kept in draw order, counts in the metrics" {
    needs_tiny
    config r "$SOME_FLAT" "FILL_ROUNDS = 4"
    run mk r
    echo "$output"
    [ "$status" -eq 0 ]
    for n in 0000 0001; do
        d=r/steps/$n
        rounds=$(jq '."fill/rounds"' $d/fill.json)
        # this reward leaves the step's own round short of 4 non-flat groups, so rounds were drawn
        [ "$rounds" -ge 2 ]
        [ "$rounds" -le 4 ]
        [ "$(ls -d $d/fill/* | wc -l)" -eq $((rounds - 1)) ]
        round_dirs=("$d"); for ((i = 1; i < rounds; i++)); do round_dirs+=("$d/fill/$(printf %02d $i)"); done
        # every round's prompts are 4 records of the set, none drawn twice in the step
        for x in "${round_dirs[@]}"; do
            [ "$(wc -l < "$x/prompts.jsonl")" -eq 4 ]
            grep -Fxq -f "$x/prompts.jsonl" r/prompts.jsonl
        done
        [ -z "$(for x in "${round_dirs[@]}"; do jq -r .id "$x/prompts.jsonl"; done | sort | uniq -d)" ]
        # the batch: the first 4 non-flat groups in draw order, K records each, none flat
        want=$(for x in "${round_dirs[@]}"; do cat "$x/nonflat.ids"; done | head -n 4)
        [ "$(group_ids $d/batch.jsonl.zst)" = "$want" ]
        [ "$(zstd -dc $d/batch.jsonl.zst | wc -l)" -eq 16 ]
        [ "$(jq .groups_flat $d/stats.json)" -eq 0 ]
        # fewer than 4 non-flat before the last round; the counts add up
        before=$(for x in "${round_dirs[@]:0:rounds-1}"; do cat "$x/nonflat.ids"; done | wc -l)
        [ "$before" -lt 4 ]
        jq -e --argjson r "$rounds" '."fill/groups_drawn" == 4 * $r and ."fill/groups_kept" == 4
            and ."fill/groups_dropped" == 4 * $r - 4 and ."fill/groups_nonflat" >= 4' $d/fill.json
        # the records are the scored records, byte for byte
        zstd -dc $d/filled.jsonl.zst | while IFS= read -r line; do
            for x in "${round_dirs[@]}"; do zstd -dc "$x/scored.jsonl.zst"; done | grep -Fxq -- "$line"
        done
        # the step's metrics line carries the counts
        jq -e --slurpfile f $d/fill.json '. as $m | $f[0] | to_entries | all(.value == $m[.key])' $d/metrics.jsonl
    done
    [ "$(jq -s 'map(select(has("fill/groups_drawn"))) | length' r/metrics.jsonl)" -eq 2 ]
    # cached: a rerun has nothing to do
    mk r -q
    # without FILL_NONFLAT the same prompts give flat groups in the batch: the feature is what removes them
    run mk r FILL_NONFLAT=0
    [ "$status" -eq 0 ]
    [ "$(jq .groups_flat r/steps/0000/stats.json)" -gt 0 ]
    [ "$(group_ids r/steps/0000/batch.jsonl.zst)" = "$(group_ids r/steps/0000/scored.jsonl.zst)" ]
    ! jq -e 'has("fill/groups_drawn")' r/steps/0000/metrics.jsonl || false
}

@test "FILL_ROUNDS bounds the rounds; when they run out flat groups make up P; KEEP_RECORDS=0 removes the rounds" {
    needs_tiny
    config r "$ALL_FLAT" "FILL_ROUNDS = 3" "KEEP_RECORDS = 0"
    # make -n draws no round (the fill's recipe runs a make, which -n would otherwise run)
    mk r -n > /dev/null
    [ ! -e r/steps ]
    run mk r
    echo "$output"
    [ "$status" -eq 0 ]
    for n in 0000 0001; do
        jq -e '."fill/rounds" == 3 and ."fill/groups_drawn" == 12 and ."fill/groups_nonflat" == 0
            and ."fill/groups_kept" == 4 and ."fill/groups_dropped" == 8' r/steps/$n/fill.json
        [ "$(jq .groups_flat r/steps/$n/stats.json)" -eq 4 ]
        # the rounds' files went with the step's records
        [ ! -e r/steps/$n/fill ]
        [ ! -e r/steps/$n/filled.jsonl.zst ]
        [ ! -e r/steps/$n/scored.jsonl.zst ]
    done
    mk r -q
}

@test "FILL_NONFLAT: a FILL_ROUNDS change re-runs the fill and what follows, not the step's own rollouts" {
    needs_tiny
    config r "$SOME_FLAT" "FILL_ROUNDS = 2" "STEPS = 1"
    mk r 2> /dev/null
    [ "$(jq '."fill/rounds"' r/steps/0000/fill.json)" -eq 2 ]
    rollouts=$(stat -c %Y.%y r/steps/0000/rollouts.jsonl.zst)
    round1=$(stat -c %y r/steps/0000/fill/01/scored.jsonl.zst)
    sleep 1
    mk r FILL_ROUNDS=4 2> /dev/null
    [ "$(stat -c %Y.%y r/steps/0000/rollouts.jsonl.zst)" = "$rollouts" ]
    [ "$(stat -c %y r/steps/0000/fill/01/scored.jsonl.zst)" = "$round1" ] # round 1 was cached
    [ "$(jq '."fill/rounds"' r/steps/0000/fill.json)" -gt 2 ]
    jq -e '."fill/groups_nonflat" >= 4' r/steps/0000/fill.json
    mk r FILL_ROUNDS=4 -q
}

@test "FILL_NONFLAT: kill -9 anywhere, then make again: the same batches, checkpoint and metrics; nothing left" {
    needs_tiny
    mkdir want got
    config want/r "$SOME_FLAT"
    (cd want && mk r 2> /dev/null)
    config got/r "$SOME_FLAT"
    cd got
    for i in 1 2 3 4 5 6 7 8; do
        setsid make --no-print-directory -f "$GRPO_ROOT/pipelines/grpo.mk" RUN=r > /dev/null 2>&1 &
        pid=$!
        sleep "$((RANDOM % 2)).$((RANDOM % 10))"
        kill -9 -- "-$pid" 2> /dev/null || true
        wait "$pid" 2> /dev/null || true
    done
    run mk r
    echo "$output"
    [ "$status" -eq 0 ]
    cd ..
    diff -r want/r/ckpt/0002 got/r/ckpt/0002
    diff <(untimed want/r/metrics.jsonl) <(untimed got/r/metrics.jsonl)
    for n in 0000 0001; do
        cmp want/r/steps/$n/batch.jsonl.zst got/r/steps/$n/batch.jsonl.zst
        cmp want/r/steps/$n/fill.json got/r/steps/$n/fill.json
    done
    left=$(find got/r -name '*.tmp*' -o -name '*.part' -o -name '*.del' -o -name '.*.new*'); echo "left: $left"
    [ -z "$left" ]
    (cd got && mk r -q)
}

@test "fill.sh: usage errors are exit 64 with one line" {
    for args in "" "bogus" "prompts a b" "ids a" "run d 4" "run d 4 0 true"; do
        # shellcheck disable=SC2086
        run "$GRPO_ROOT/pipelines/fill.sh" $args
        [ "$status" -eq 64 ] || { echo "'$args': $status"; false; }
        assert_one_line_error fill.sh '.'
    done
}
