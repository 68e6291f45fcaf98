#!/usr/bin/env bats
# scripts/grpo-wandb and grpo.mk's WANDB_PROJECT, offline (WANDB_MODE=offline,
# nothing leaves the machine): every metric read back from the W&B run's own
# transaction log (tests/ref/read_wandb.py), the samples table, resuming
# without a step twice, usage and input errors, and a fake API key that must
# appear in no output and no file.
# needs: venv
load helpers
unset MAKEFLAGS MFLAGS MAKELEVEL

FIX="$GRPO_ROOT/tests/fixtures/metrics"
KEY=fake0key0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2

needs_wandb() {
    [ -x "$GRPO_PY" ] && "$GRPO_PY" -c 'import wandb' 2> /dev/null ||
        skip "no wandb in the test venv (make venv)"
}

setup() {
    T="$BATS_TEST_TMPDIR"
    cd "$T" || return 1
    export WANDB_PROJECT=grpo-test WANDB_MODE=offline WANDB_API_KEY=$KEY
    # wandb's own settings and caches stay in the test's directory
    export WANDB_CONFIG_DIR="$T/.config" WANDB_CACHE_DIR="$T/.cache" WANDB_DATA_DIR="$T/.data"
}

wb() { "$GRPO_PY" "$GRPO_ROOT/scripts/grpo-wandb" "$@"; }
readback() { "$GRPO_PY" "$GRPO_ROOT/tests/ref/read_wandb.py" "$@"; }
# no_key DIR FILE...: the API key is in no file under DIR and in none of FILE
no_key() { ! grep -rqa -- "$KEY" "$@" || { grep -rla -- "$KEY" "$@"; false; }; }

# log_first_lines: a run (run/) that holds the fixture's first 3 lines (m.jsonl); id its W&B id
log_first_lines() {
    mkdir run
    head -n 3 "$FIX/a.jsonl" > m.jsonl
    wb --run run m.jsonl
    id=$(cat run/wandb-run-id)
}

@test "every metric and eval line of a run, read back from the offline run's log; the samples table" {
    needs_wandb
    mkdir run
    printf '%s\n' '{"id":"p1","sample":0,"reward":1,"advantage":0.5,"completion":"<answer>4</answer>"}' \
        '{"id":"p1","sample":1,"reward":0,"advantage":-0.5,"completion":"five"}' \
        '{"id":"p2","sample":0,"reward":0,"advantage":0,"completion":"x"}' | zstd -q > batch.jsonl.zst
    run wb --run run --samples-n 2 --samples 1:batch.jsonl.zst "$FIX/a.jsonl"
    echo "$output"
    [ "$status" -eq 0 ]
    [ -z "$output" ]
    id=$(cat run/wandb-run-id)
    [ -n "$id" ]
    [ -d run/wandb ]
    readback check run "$id" "$FIX/a.jsonl"
    # the table: the batch's first 2 records, as wandb wrote them
    table=(run/wandb/offline-run-*-"$id"/files/media/table/samples_*.table.json)
    [ -f "${table[0]}" ]
    jq -e '.columns == ["step","id","sample","reward","advantage","completion"] and
        .data == [[1,"p1",0,1,0.5,"<answer>4</answer>"],[1,"p1",1,0,-0.5,"five"]]' "${table[0]}"
    [ "$(readback rows run "$id" | jq -s 'map(select(has("samples/_type"))) | map(.step)')" = "$(jq -n '[1]')" ]
    no_key run
}

@test "resume: a grown file logs only its new lines, a rerun logs nothing, no step twice, the row index goes on" {
    needs_wandb
    log_first_lines
    readback check run "$id" m.jsonl
    # the reader sees what is missing: the whole file is not in the run yet
    ! readback check run "$id" "$FIX/a.jsonl" 2> /dev/null || false
    cp "$FIX/a.jsonl" m.jsonl
    wb --run run m.jsonl
    wb --run run m.jsonl # nothing new: no process, no log
    [ "$(ls -d run/wandb/offline-run-* | wc -l)" -eq 2 ]
    [ "$(cat run/wandb-run-id)" = "$id" ]
    readback check run "$id" m.jsonl
    # both logs are the same W&B run, their rows numbered on from the first's (one row per
    # step and kind: the fixture's step 4 has two update lines, of which the last counts)
    lines=$(jq -s 'map([.step, .kind]) | unique | length' m.jsonl)
    [ "$lines" -eq 9 ]
    [ "$(readback rows run "$id" | jq -s 'map(._step)')" = "$(jq -n "[range($lines)]")" ]
}

@test "a process that starts in the same second as the last: wandb's -1 directory is read, nothing logged twice" {
    needs_wandb
    log_first_lines
    # every name the next process could take in the coming minute is taken (empty, no log), as
    # the last process's own is when the next one starts in the same second
    now=$(date +%s)
    for t in $(seq "$now" $((now + 60))); do
        mkdir -p "run/wandb/offline-run-$(date -d "@$t" +%Y%m%d_%H%M%S)-$id"
    done
    cp "$FIX/a.jsonl" m.jsonl
    printf '%s\n' '{"id":"p1","sample":0,"reward":1,"advantage":0.5,"completion":"x"}' | zstd -q > batch.jsonl.zst
    wb --run run --samples 3:batch.jsonl.zst m.jsonl
    logs=(run/wandb/offline-run-*-"$id"-1/run-"$id".wandb)
    [ -f "${logs[0]}" ] # the collision happened
    readback check run "$id" m.jsonl
    [ "$(readback rows run "$id" | jq -s 'map(select(has("samples/_type")) | .step)')" = "$(jq -n '[3]')" ]
    # a rerun finds everything in the run, the -1 log's rows included: it starts no process
    wb --run run --samples 3:batch.jsonl.zst m.jsonl
    [ "$(ls run/wandb/offline-run-*-"$id"*/run-"$id".wandb | wc -l)" -eq 2 ]
}

@test "grpo.mk WANDB_PROJECT offline: every step, eval and table once; more steps and make metrics append; TensorBoard alike" {
    needs_wandb
    needs_tiny_llama() { [ -d "$1" ] || skip "no test venv (make venv)"; }
    make_tiny_llama "$T/tiny"
    needs_tiny_llama "$T/tiny"
    mkdir r
    cat > r/config.mk <<EOF
MODEL = $T/tiny
PREP_FLAGS = --task arith --n 20 --split train --seed 1 --chat-template raw --word-problems 0 --model $T/tiny
EVAL_PREP_FLAGS = --task arith --n 4 --split test --seed 1 --chat-template raw --word-problems 0 --model $T/tiny
STEPS = 1
PROMPTS_PER_STEP = 4
K = 4
MAX_NEW_TOKENS = 8
ROLLOUT_FLAGS = --threads 1
REWARD_FLAGS = --fn answer,length:0.5 --max-len 8 --overlong-buffer 6 --quiet
UPDATE_FLAGS = --lr 1e-3 --beta 0.04 --threads 1
EVAL_EVERY = 1
EVAL_FLAGS = --threads 1
WANDB_PROJECT = grpo-test
WANDB_MODE = offline
EOF
    # the project and mode from config.mk (grpo.mk hands them to wandb), the key from the environment
    mk() { env -u WANDB_PROJECT -u WANDB_MODE make --no-print-directory -f "$GRPO_ROOT/pipelines/grpo.mk" RUN=r "$@"; }
    mk > out1.txt 2>&1
    mk STEPS=2 > out2.txt 2>&1
    cat out1.txt out2.txt
    id=$(cat r/wandb-run-id)
    readback check r "$id" r/metrics.jsonl
    [ "$(readback rows r "$id" | jq -s 'map(select(has("samples/_type"))) | map(.step)')" = "$(jq -n '[1, 2]')" ]
    # make metrics again (metrics.jsonl remade) adds nothing
    n=$(readback rows r "$id" | wc -l)
    rm r/metrics.jsonl
    mk STEPS=2 metrics 2> /dev/null
    [ "$(readback rows r "$id" | wc -l)" -eq "$n" ]
    readback check r "$id" r/metrics.jsonl
    # TensorBoard resumed with the run as well: every step once
    diff <("$GRPO_PY" "$GRPO_ROOT/tests/ref/read_tb.py" expect r/metrics.jsonl) \
        <("$GRPO_PY" "$GRPO_ROOT/tests/ref/read_tb.py" scalars r/tb)
    no_key r out1.txt out2.txt
    # a W&B failure does not stop the run: one line, and the next step catches up
    rm -rf r2 && cp -r r r2 && rm -rf r2/wandb r2/metrics.jsonl
    WANDB_PY=/nonexistent/python make --no-print-directory -f "$GRPO_ROOT/pipelines/grpo.mk" RUN=r2 STEPS=2 metrics > out3.txt 2>&1
    grep -q 'Weights & Biases not updated' out3.txt
}

@test "usage and input errors: one line, the documented exit, and no key" {
    needs_wandb
    mkdir run
    run env -u WANDB_PROJECT "$GRPO_PY" "$GRPO_ROOT/scripts/grpo-wandb" --run run "$FIX/a.jsonl"
    [ "$status" -eq 64 ]
    assert_one_line_error grpo-wandb 'WANDB_PROJECT is not set'
    run wb "$FIX/a.jsonl"
    [ "$status" -eq 64 ]
    run wb --run nodir "$FIX/a.jsonl"
    [ "$status" -eq 66 ]
    assert_one_line_error grpo-wandb 'nodir: no such directory'
    run wb --run run missing.jsonl
    [ "$status" -eq 66 ]
    assert_one_line_error grpo-wandb 'missing.jsonl: no such file'
    printf '{"step":1,"loss":0.5}\n{"loss":1}\n' > nostep.jsonl
    run wb --run run nostep.jsonl
    [ "$status" -eq 65 ]
    assert_one_line_error grpo-wandb '^grpo-wandb: nostep.jsonl:2: field "step": expected an integer'
    printf '{"step":1}\nnot json\n' > bad.jsonl
    run wb --run run bad.jsonl
    [ "$status" -eq 65 ]
    assert_one_line_error grpo-wandb '^grpo-wandb: bad.jsonl:2: invalid JSON'
    run wb --run run --samples x "$FIX/a.jsonl"
    [ "$status" -eq 64 ]
    assert_one_line_error grpo-wandb '--samples: expected STEP:FILE'
    run wb --run run --samples-n 0 "$FIX/a.jsonl"
    [ "$status" -eq 64 ]
    # nothing was logged by a failed call
    [ ! -e run/wandb ]
    run wb --help
    [ "$status" -eq 0 ]
    [[ "$output" == *WANDB_MODE* ]]
    [[ "$output" != *"$KEY"* ]]
}
