#!/usr/bin/env bats
# pipelines/grpo.mk (make-driven GRPO runs), pipelines/step.sh (one step as a
# pipe) and pipelines/merge.sh, on a tiny random llama with a 97-token
# tokenizer: the whole loop, reruns, kill -9 and resume, a swapped reward
# stage, settings changes, shards, retention, the evaluation hook.
# needs: venv
load helpers
# Every make here is a fresh one: `make test` runs these tests inside make, whose
# MAKEFLAGS and MAKELEVEL would otherwise change what the pipeline's make does.
unset MAKEFLAGS MFLAGS MAKELEVEL

setup_file() {
    export TINY="$BATS_FILE_TMPDIR/tiny" MOE="$BATS_FILE_TMPDIR/moe" OSS="$BATS_FILE_TMPDIR/oss"
    make_tiny_llama "$TINY"
    [ -x "$GRPO_PY" ] || return 0
    # mixtures of experts: a Qwen3-MoE and a gpt-oss whose experts are MXFP4 blocks
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" make-tiny qwen3_moe "$MOE" --norm-topk
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_oss_mxfp4.py" "$OSS"
    for d in "$MOE" "$OSS"; do "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_tiny_tokenizer.py" "$d"; done
}

needs_tiny() { [ -d "$TINY" ] || skip "no test venv (make venv)"; }

# mk RUN ARGS...: make -f pipelines/grpo.mk RUN=RUN ARGS...
mk() { local run=$1; shift; make --no-print-directory -f "$GRPO_ROOT/pipelines/grpo.mk" RUN="$run" "$@"; }

# config RUN [LINES...]: a 3-step run on the tiny model: 20 arith prompts, 8 per step, 4
# completions of at most 12 tokens, rewards that vary between completions
config() {
    mkdir -p "$1"
    {
        echo "MODEL = $TINY"
        echo "PREP_FLAGS = --task arith --n 20 --split train --seed 1 --chat-template raw --word-problems 0 --model $TINY"
        echo "STEPS = 3"
        echo "PROMPTS_PER_STEP = 8"
        echo "K = 4"
        echo "MAX_NEW_TOKENS = 12"
        echo "ROLLOUT_FLAGS = --threads 1"
        echo "REWARD_FLAGS = --fn answer,length:0.5 --max-len 12 --overlong-buffer 10 --quiet"
        echo "UPDATE_FLAGS = --lr 1e-3 --beta 0.04 --threads 1"
        echo "SEED = 3"
        shift
        for l in "$@"; do echo "$l"; done
    } > "$1/config.mk"
}

# untimed FILE: metrics lines without the wall-clock fields
untimed() { jq -c 'del(.seconds, .tokens_per_second, ."eval/seconds")' "$1"; }

# mtimes DIR: every file under DIR with its mtime, sorted
mtimes() { find "$1" -type f -printf '%p %T@\n' | sort; }

@test "RUN is required; PROMPTS_PER_STEP beyond the prompt set is an error" {
    run make -f "$GRPO_ROOT/pipelines/grpo.mk"
    [ "$status" -ne 0 ]
    [[ "$output" == *"RUN is not set"* ]]
    needs_tiny
    config r "PROMPTS_PER_STEP = 21"
    run mk r
    [ "$status" -ne 0 ]
    [[ "$output" == *"PROMPTS_PER_STEP=21 is more than the 20 prompts"* ]]
    [ ! -e r/steps/0000/prompts.jsonl ]
}

@test "the whole loop through make: prep, 3 steps, export; a rerun does nothing" {
    needs_tiny
    config r
    run mk r
    [ "$status" -eq 0 ]
    echo "$output"
    # one progress line per step on stderr
    [ "$(printf '%s\n' "$output" | grep -c '^step [123]/3  reward -\?[0-9.]*  acc [0-9.]*  kl [0-9.]*  len [0-9.]*  tok/s [0-9]*  [0-9.]* s$')" -eq 3 ]
    [ "$(wc -l < r/prompts.jsonl)" -eq 20 ]
    for n in 0000 0001 0002; do
        for f in prompts.jsonl rollouts.jsonl.zst scored.jsonl.zst batch.jsonl.zst stats.json metrics.jsonl; do
            [ -s "r/steps/$n/$f" ] || { echo "missing $n/$f"; false; }
        done
        # step N's rollouts are from checkpoint N
        [ "$(zstd -dc "r/steps/$n/rollouts.jsonl.zst" | jq -r .policy | sort -u)" = "ckpt/$n" ]
        [ "$(zstd -dc "r/steps/$n/rollouts.jsonl.zst" | wc -l)" -eq 32 ]
    done
    # the slices: records 0-7, 8-15, then 16-19 and 0-3 (wrapping around)
    cmp r/steps/0000/prompts.jsonl <(sed -n 1,8p r/prompts.jsonl)
    cmp r/steps/0001/prompts.jsonl <(sed -n 9,16p r/prompts.jsonl)
    cmp r/steps/0002/prompts.jsonl <(sed -n 17,20p r/prompts.jsonl; sed -n 1,4p r/prompts.jsonl)
    # each step samples with its own seed: the same prompt gets other completions
    [ "$(zstd -dc r/steps/0000/rollouts.jsonl.zst | head -n 4 | jq -c .completion_tokens)" != \
      "$(zstd -dc r/steps/0002/rollouts.jsonl.zst | sed -n 17,20p | jq -c .completion_tokens)" ]
    # the checkpoints chain: 1 from MODEL, 2 from 1, 3 from 2, each on its step's batch
    jq -e --arg m "$TINY" '.step == 1 and .parent == $m and .flags.ref == $m' r/ckpt/0001/grpo/state.json
    jq -e '.step == 3 and .parent == "r/ckpt/0002" and .rng.seed == 3' r/ckpt/0003/grpo/state.json
    [ "$(jq -r .batch_sha256 r/ckpt/0003/grpo/state.json)" = "$(zstd -dc r/steps/0002/batch.jsonl.zst | sha256sum | cut -c1-64)" ]
    # the progress line again from the files, as pipelines/README.md shows
    [ "$(jq -n -r -L "$GRPO_ROOT/scripts/lib" -f "$GRPO_ROOT/scripts/progress.jq" --argjson step 3 --argjson total 3 --slurpfile m r/steps/0002/metrics.jsonl \
        --slurpfile s r/steps/0002/stats.json --argjson seconds null)" = \
      "$(printf '%s\n' "$output" | grep '^step 3/3' | sed 's/  [0-9.]* s$//')" ]
    # metrics.jsonl: the steps' lines in order, each once
    [ "$(jq -c .step r/metrics.jsonl | tr '\n' ' ')" = "1 2 3 " ]
    cat r/steps/000[012]/metrics.jsonl | cmp - r/metrics.jsonl
    # each step's line: grpo-update's, with the reward stage's per-function means (batch accuracy)
    for n in 0000 0001 0002; do
        jq -e --slurpfile s "r/steps/$n/stats.json" '(.["rewards/answer/mean"] | type == "number")
            and .["rewards/answer/mean"] == $s[0]["rewards/answer/mean"]
            and .["rewards/length/std"] == $s[0]["rewards/length/std"]
            and (.loss | type == "number") and ((.reward - $s[0].reward_mean) | fabs) < 1e-9' "r/steps/$n/metrics.jsonl"
    done
    # nothing to do on a rerun, no file touched
    touch r/marker
    run mk r
    [ "$status" -eq 0 ]
    [ "$output" = "make: Nothing to be done for 'run'." ]
    mk r -q
    [ -z "$(find r -newer r/marker -type f)" ]
    # export the final checkpoint as a Hugging Face directory the rollout loads
    run mk r export
    [ "$status" -eq 0 ]
    [ -s r/export/hf/config.json ]
    [ -s r/export/hf/model.safetensors ]
    [ ! -e r/export/hf/grpo ]
    echo '{"id":"x","prompt_tokens":[59,76,69]}' | grpo-rollout --model r/export/hf -k 2 --max-new-tokens 4 > x.jsonl
    [ "$(wc -l < x.jsonl)" -eq 2 ]
    mk r -q export
}

@test "a settings change re-runs its stage and what follows, nothing before it" {
    needs_tiny
    config r
    mk r 2>/dev/null
    cp r/ckpt/0003/model.safetensors first.safetensors
    sleep 0.01
    touch r/marker
    # new update flags: the updates again, the rollouts from checkpoint 1 on (new policies)
    mk r UPDATE_FLAGS='--lr 2e-3 --beta 0.04 --threads 1' 2>/dev/null
    [ ! r/steps/0000/rollouts.jsonl.zst -nt r/marker ]
    [ ! r/steps/0000/batch.jsonl.zst -nt r/marker ]
    [ r/ckpt/0001/grpo/state.json -nt r/marker ]
    [ r/steps/0001/rollouts.jsonl.zst -nt r/marker ]
    jq -e '.flags.lr == 0.002' r/ckpt/0003/grpo/state.json
    mk r -q UPDATE_FLAGS='--lr 2e-3 --beta 0.04 --threads 1'
    # back to the config: the same bytes as before (same settings, deterministic tools)
    ! cmp -s first.safetensors r/ckpt/0003/model.safetensors || false
    mk r 2>/dev/null
    jq -e '.flags.lr == 0.001' r/ckpt/0003/grpo/state.json
    cmp first.safetensors r/ckpt/0003/model.safetensors
    # the prompt slicing: a new P re-slices and re-runs everything
    touch r/marker
    mk r PROMPTS_PER_STEP=4 2>/dev/null
    [ "$(wc -l < r/steps/0002/prompts.jsonl)" -eq 4 ]
    [ r/steps/0000/rollouts.jsonl.zst -nt r/marker ]
    [ ! r/prompts.jsonl -nt r/marker ]
}

@test "kill -9 anywhere, then make again: the same checkpoint and metrics as an uninterrupted run" {
    needs_tiny
    mkdir want got
    config want/r
    (cd want && mk r 2>/dev/null)
    config got/r
    # a metrics line a killed update left behind is not kept: each step's file is written anew
    mkdir -p got/r/steps/0000
    echo '{"step":99}' > got/r/steps/0000/metrics.part
    cd got
    for i in 1 2 3 4 5 6 7 8; do
        setsid make --no-print-directory -f "$GRPO_ROOT/pipelines/grpo.mk" RUN=r > /dev/null 2>&1 &
        pid=$!
        sleep "0.$((RANDOM % 4))$((RANDOM % 10))"
        kill -9 -- "-$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        # whatever exists is whole: every finished checkpoint is a checkpoint
        for s in r/ckpt/*/grpo/state.json; do [ ! -e "$s" ] || jq -e .step "$s" > /dev/null; done
    done
    run mk r
    echo "$output"
    [ "$status" -eq 0 ]
    cd ..
    diff -r want/r/ckpt/0003 got/r/ckpt/0003
    diff <(untimed want/r/metrics.jsonl) <(untimed got/r/metrics.jsonl)
    for n in 0000 0001 0002; do cmp want/r/steps/$n/batch.jsonl.zst got/r/steps/$n/batch.jsonl.zst; done
    # no temporary is left next to a finished output, and a rerun has nothing to do
    left=$(find got/r -name '*.tmp*' -o -name '*.part' -o -name '*.del' -o -name '.*.new.*'); echo "left: $left"
    [ -z "$left" ]
    (cd got && mk r -q)
}

# killed_run NAME MODEL UPDATE_FLAGS: a 3-step run of MODEL made once whole
# (NAME-want) and once under six random kill -9s and a last make (NAME-got):
# the same checkpoint bytes, metrics and batches, nothing left over
killed_run() {
    local m=$1 model=$2 flags=$3 d i pid
    mkdir $m-want $m-got
    for d in $m-want $m-got; do
        config $d/r "MODEL = $model" "UPDATE_FLAGS = $flags" \
            "PREP_FLAGS = --task arith --n 20 --split train --seed 1 --chat-template raw --word-problems 0 --model $model"
    done
    (cd $m-want && mk r 2>/dev/null)
    cd $m-got
    for i in 1 2 3 4 5 6; do
        setsid make --no-print-directory -f "$GRPO_ROOT/pipelines/grpo.mk" RUN=r > /dev/null 2>&1 &
        pid=$!
        sleep "0.$((RANDOM % 5))$((RANDOM % 10))"
        kill -9 -- "-$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    run mk r
    echo "$output"
    [ "$status" -eq 0 ]
    cd ..
    diff -r $m-want/r/ckpt/0003 $m-got/r/ckpt/0003
    diff <(untimed $m-want/r/metrics.jsonl) <(untimed $m-got/r/metrics.jsonl)
    for i in 0000 0001 0002; do cmp $m-want/r/steps/$i/batch.jsonl.zst $m-got/r/steps/$i/batch.jsonl.zst; done
    left=$(find $m-got/r -name '*.tmp*' -o -name '*.part' -o -name '*.del' -o -name '.*.new.*'); echo "left: $left"
    [ -z "$left" ]
}

@test "mixtures of experts through make (Qwen3-MoE full, gpt-oss LoRA on its MXFP4 experts): kill -9, make again: the same run" {
    needs_tiny
    # each step's records carry the sampler's routing, which the update replays
    # (--routing auto); the gpt-oss's experts stay the file's MXFP4 blocks as
    # the LoRA run's frozen base (--base-weights auto)
    killed_run moe "$MOE" "--lr 1e-3 --beta 0.04 --threads 1"
    zstd -dc moe-want/r/steps/0000/rollouts.jsonl.zst | head -n 1 | jq -e '.routing.ids | type == "string" and length > 0'
    killed_run oss "$OSS" "--lr 1e-3 --beta 0 --threads 1 --lora-r 4"
    jq -e '.flags.base_weights == "mxfp4"' oss-want/r/ckpt/0003/grpo/state.json
}

@test "LoRA on a q8 and a q4k frozen base through make: kill -9, make again: the same run" {
    needs_tiny
    for f in q8 q4k; do
        killed_run $f "$TINY" "--lr 1e-3 --beta 0.04 --threads 1 --lora-r 4 --base-weights $f"
        jq -e --arg f $f '.flags.base_weights == $f' $f-want/r/ckpt/0003/grpo/state.json
    done
}

@test "kill -9 before each rm, mv and jq of a run, then make again: the same result and nothing left over" {
    needs_tiny
    # Every recipe must make its output appear last, so a kill between any two of
    # its commands leaves either nothing that looks finished or a finished output
    # with no temporaries beside it. Shims for rm, mv and jq count the calls of a
    # make and kill make's whole process group (setsid) before the N-th; each N
    # of a whole 2-step run is tried from scratch, then resumed.
    mkdir shim
    for c in rm mv jq; do
        printf '#!/bin/bash\nn=$(( $(< "$KILL_COUNT") + 1 )); echo "$n" > "$KILL_COUNT"\n[ "$n" -ne "$KILL_AT" ] || kill -9 0\nexec %s "$@"\n' \
            "$(command -v $c)" > shim/$c
        chmod +x shim/$c
    done
    export KILL_COUNT=$PWD/count
    # retention and evaluation too: their recipes rename and remove as well
    settings=("STEPS = 2" "KEEP = 1" "EVAL_EVERY = 2" "EVAL_FLAGS = --threads 1"
        "EVAL_PREP_FLAGS = --task arith --n 4 --split test --seed 1 --chat-template raw --word-problems 0 --model $TINY")
    counted() { echo 0 > "$KILL_COUNT"; (cd "$1" && KILL_AT=$2 PATH="$PWD/../shim:$PATH" setsid make --no-print-directory \
        -f "$GRPO_ROOT/pipelines/grpo.mk" RUN=r > /dev/null 2>&1); }
    config want/r "${settings[@]}"
    counted want 0
    calls=$(< "$KILL_COUNT")
    echo "calls: $calls"
    [ "$calls" -gt 20 ]
    for ((i = 1; i <= calls; i++)); do
        rm -rf got && config got/r "${settings[@]}"
        run counted got "$i"
        [ "$status" -eq 137 ] || { echo "call $i: not killed ($status)"; false; }
        (cd got && mk r > /dev/null 2>&1) || { echo "call $i: the rerun failed"; false; }
        diff -r want/r/ckpt/0002 got/r/ckpt/0002 || { echo "call $i: checkpoint differs"; false; }
        diff <(untimed want/r/metrics.jsonl) <(untimed got/r/metrics.jsonl) || { echo "call $i: metrics differ"; false; }
        left=$(find got/r -name '*.tmp*' -o -name '*.part' -o -name '*.del' -o -name '.*.new.*' -o -name '.*.new')
        [ -z "$left" ] || { echo "call $i: left $left"; false; }
        # nothing was made twice: a step redone after a later one would leave the later stale
        (cd got && mk r -q) || { echo "call $i: the rerun left targets out of date"; false; }
    done
}

@test "REWARD replaces the reward stage; changing it re-runs reward onward but not the rollout" {
    needs_tiny
    config r
    # a jq program: 1 per digit in the completion
    mk r REWARD='jq -c ". + {rewards: {digits: (.completion | [scan(\"[0-9]\")] | length)}} | .reward = .rewards.digits"' 2>/dev/null
    zstd -dc r/steps/0001/scored.jsonl.zst | jq -e -s 'all(.reward == (.completion | [scan("[0-9]")] | length))'
    jq -e 'has("rewards/digits/mean")' r/steps/0001/stats.json
    zstd -dc r/steps/0001/rollouts.jsonl.zst > rollouts1.jsonl
    sleep 0.01
    touch r/marker
    mk r REWARD='jq -c ". + {reward: (.completion | length)}"' 2>/dev/null
    # step 0's rollouts (from MODEL) are kept; its scores, batch and every checkpoint are new
    [ ! r/steps/0000/rollouts.jsonl.zst -nt r/marker ]
    [ r/steps/0000/scored.jsonl.zst -nt r/marker ]
    [ r/steps/0000/batch.jsonl.zst -nt r/marker ]
    [ r/ckpt/0001/grpo/state.json -nt r/marker ]
    [ r/metrics.jsonl -nt r/marker ]
    zstd -dc r/steps/0000/scored.jsonl.zst | jq -e -s 'all(.reward == (.completion | length))'
    # the same REWARD again: nothing to do
    mk r -q REWARD='jq -c ". + {reward: (.completion | length)}"'
    # back to grpo-reward: the reward stage runs again, the rollouts of step 0 stay
    touch r/marker
    mk r 2>/dev/null
    [ ! r/steps/0000/rollouts.jsonl.zst -nt r/marker ]
    [ r/steps/0000/scored.jsonl.zst -nt r/marker ]
    zstd -dc r/steps/0000/scored.jsonl.zst | jq -e -s 'all(has("rewards") and (.rewards | has("answer")))'
    # a failing REWARD: its stderr is shown, make stops, and the stage is still to do
    cp r/steps/0000/scored.jsonl.zst scored0.jsonl.zst
    run mk r REWARD='jq -c "error(\"no reward for you\")"'
    [ "$status" -eq 2 ]
    [[ "$output" == *"no reward for you"* ]]
    run mk r -q REWARD='jq -c "error(\"no reward for you\")"'
    [ "$status" -eq 1 ]
    # the previous scores are left as they were (make knows them stale), no .tmp beside them
    cmp scored0.jsonl.zst r/steps/0000/scored.jsonl.zst
    [ ! -e r/steps/0000/scored.jsonl.zst.tmp ]
}

@test "SHARDS=2 with make -j2: the same records and checkpoints as one shard; Slurm-style shard targets too" {
    needs_tiny
    config one "ROLLOUT_FLAGS = --threads 1 --batch 4"
    config two "ROLLOUT_FLAGS = --threads 1 --batch 4"
    config slurm "ROLLOUT_FLAGS = --threads 1 --batch 4"
    mk one 2>/dev/null
    mk two SHARDS=2 -j2 2>/dev/null
    [ -s two/steps/0000/rollouts.0-of-2.jsonl.zst ]
    [ -s two/steps/0000/scored.1-of-2.jsonl.zst ]
    # both shards hold records: the split is real
    [ "$(zstd -dc two/steps/0000/rollouts.0-of-2.jsonl.zst | wc -l)" -gt 0 ]
    [ "$(zstd -dc two/steps/0000/rollouts.1-of-2.jsonl.zst | wc -l)" -gt 0 ]
    for n in 0000 0001 0002; do
        cmp <(zstd -dc one/steps/$n/rollouts.jsonl.zst) <(zstd -dc two/steps/$n/rollouts.jsonl.zst)
        cmp <(zstd -dc one/steps/$n/scored.jsonl.zst) <(zstd -dc two/steps/$n/scored.jsonl.zst)
        cmp one/steps/$n/batch.jsonl.zst two/steps/$n/batch.jsonl.zst
    done
    for f in model.safetensors grpo/optimizer.safetensors; do cmp one/ckpt/0003/$f two/ckpt/0003/$f; done
    diff <(untimed one/metrics.jsonl) <(untimed two/metrics.jsonl)
    # one array task per shard, then the step's merge and update, step by step
    mk slurm SHARDS=2 prompts
    for n in 0 1 2; do
        for i in 0 1; do mk slurm SHARDS=2 STEP=$n shard-$i-of-2 2>/dev/null; done
        [ ! -e slurm/steps/000$n/scored.jsonl.zst ]
        mk slurm SHARDS=2 step-000$n 2>/dev/null
    done
    mk slurm SHARDS=2 2>/dev/null
    cmp one/ckpt/0003/model.safetensors slurm/ckpt/0003/model.safetensors
    cmp one/steps/0002/batch.jsonl.zst slurm/steps/0002/batch.jsonl.zst
}

@test "SHARDS above 1 exports OMP_WAIT_POLICY=passive to the tools unless it is set; SHARDS=1 leaves it unset" {
    needs_tiny
    # a grpo-rollout that notes the policy it was started with, then runs the real one
    mkdir wrap
    for f in "$GRPO_ROOT"/bin/grpo-*; do [ -x "$f" ] && [[ "$f" != *.c ]] && ln -s "$f" wrap/; done
    rm wrap/grpo-rollout
    printf '#!/bin/sh\necho "${OMP_WAIT_POLICY-unset}" >> %s\nexec %s "$@"\n' "$PWD/seen" "$GRPO_ROOT/bin/grpo-rollout" \
        > wrap/grpo-rollout
    chmod +x wrap/grpo-rollout
    unset OMP_WAIT_POLICY
    for run in two own one; do config $run "STEPS = 1" "GRPO_BIN = $PWD/wrap"; done
    mk two SHARDS=2 -j2 2>/dev/null
    [ "$(sort -u seen)" = passive ]
    [ "$(wc -l < seen)" -ge 2 ]
    rm seen
    OMP_WAIT_POLICY=active mk own SHARDS=2 -j2 2>/dev/null
    [ "$(sort -u seen)" = active ]
    rm seen
    mk one 2>/dev/null
    [ "$(sort -u seen)" = unset ]
}

@test "merge.sh: shard records back in the order of the prompts; foreign ids and blank lines are errors" {
    printf '{"id":"%s"}\n' b a c f e d > order.jsonl
    printf '{"id":"b","s":0, "x":1e400}\n{"id":"b","s":1}\n{"id":"c","s":0}\n{"id":"e","s":0}\n' > s0.jsonl
    printf '{"id":"a","s":0}\n{"id":"a","s":1}\n{"id":"f"}\n{"id":"d"}\n' | zstd -q > s1.jsonl.zst
    "$GRPO_ROOT/pipelines/merge.sh" order.jsonl out.jsonl.zst s0.jsonl s1.jsonl.zst
    [ "$(zstd -dc out.jsonl.zst)" = "$(printf '%s\n' '{"id":"b","s":0, "x":1e400}' '{"id":"b","s":1}' \
        '{"id":"a","s":0}' '{"id":"a","s":1}' '{"id":"c","s":0}' '{"id":"f"}' '{"id":"e","s":0}' '{"id":"d"}')" ]
    printf '{"id":"z"}\n' > bad.jsonl
    run "$GRPO_ROOT/pipelines/merge.sh" order.jsonl o.jsonl s0.jsonl bad.jsonl
    [ "$status" -eq 65 ]; [[ "$output" == *'id "z" is not in order.jsonl'* ]]
    printf '{"id":"a"}\n\n{"id":"a"}\n' > blank.jsonl
    run "$GRPO_ROOT/pipelines/merge.sh" order.jsonl o.jsonl blank.jsonl
    [ "$status" -eq 65 ]
    [ ! -e o.jsonl ]
}

@test "KEEP=1 keeps the last checkpoint only and make does not remake the others; KEEP_RECORDS=0" {
    needs_tiny
    config r "KEEP = 1" "KEEP_RECORDS = 0"
    mk r 2>/dev/null
    [ "$(cd r/ckpt && echo *)" = "0003" ]
    [ -z "$(ls -A r/ckpt | grep -v '^0003$')" ]
    for n in 0000 0001 0002; do
        [ ! -e r/steps/$n/rollouts.jsonl.zst ]
        [ ! -e r/steps/$n/batch.jsonl.zst ]
        [ -s r/steps/$n/metrics.jsonl ]
        [ -s r/steps/$n/prompts.jsonl ]
        [ -s r/steps/$n/stats.json ]
    done
    run mk r
    [ "$status" -eq 0 ]; [ "$output" = "make: Nothing to be done for 'run'." ]
    # one more step continues from the kept checkpoint, then drops it
    mk r STEPS=4 2>/dev/null
    [ "$(cd r/ckpt && echo *)" = "0004" ]
    jq -e '.step == 4 and .parent == "r/ckpt/0003"' r/ckpt/0004/grpo/state.json
    [ "$(jq -c .step r/metrics.jsonl | tr '\n' ' ')" = "1 2 3 4 " ]
    mk r -q STEPS=4
}

@test "EVAL_EVERY: checkpoint 0, every N-th and the last evaluated in turn, the lines in metrics.jsonl" {
    needs_tiny
    config r "EVAL_EVERY = 2" "EVAL_FLAGS = --threads 1" "KEEP = 1" \
        "EVAL_PREP_FLAGS = --task arith --n 6 --split test --seed 1 --chat-template raw --word-problems 0 --model $TINY"
    run mk r
    [ "$status" -eq 0 ]
    echo "$output"
    [ "$(printf '%s\n' "$output" | grep -c '^eval [023]/3  accuracy [0-9.]*  pass@1 [0-9.]*  reward -\?[0-9.]*  len [0-9.]*$')" -eq 3 ]
    [ "$(cd r/eval && echo *.json)" = "0000.json 0002.json 0003.json" ]
    jq -e '.kind == "eval" and .step == 2 and ."eval/prompts" == 6 and ."eval/k" == 1' r/eval/0002.json
    # scripts/grpo-eval on the model itself gives the same line (but for its seconds)
    eval_args=(--in r/heldout.jsonl --k 1 --max-new-tokens 12 --seed 3 --threads 1
        --reward '--fn answer,length:0.5 --max-len 12 --overlong-buffer 10 --quiet')
    "$GRPO_ROOT/scripts/grpo-eval" --model "$TINY" --step 0 --out e0.json "${eval_args[@]}"
    "$GRPO_ROOT/scripts/grpo-eval" --model r/ckpt/0003 --step 3 --out e3.json "${eval_args[@]}"
    diff <(jq -c 'del(."eval/seconds")' e0.json) <(jq -c 'del(."eval/seconds")' r/eval/0000.json)
    diff <(jq -c 'del(."eval/seconds")' e3.json) <(jq -c 'del(."eval/seconds")' r/eval/0003.json)
    # the evaluation of checkpoint 2 came before step 3 trained on from it
    [ r/ckpt/0003/grpo/state.json -nt r/eval/0002.json ]
    # kept until evaluated, then deleted like the others
    [ "$(cd r/ckpt && echo *)" = "0003" ]
    [ "$(jq -c '[.kind // "train", .step]' r/metrics.jsonl | tr -d '\n')" = \
        '["eval",0]["train",1]["train",2]["eval",2]["train",3]["eval",3]' ]
    mk r -q
    # make eval with EVAL_EVERY=0 evaluates checkpoint 0 and the last only, both done
    mk r -q eval EVAL_EVERY=0
}

@test "the held-out set is the training prep's test split (task, options, seed); another task needs EVAL_TASK_DIFFERS=1" {
    local i
    # arith with one-digit operands: held-out problems are one-digit too, none a training prompt
    mkdir a
    printf '%s\n' 'PREP_FLAGS = --task arith --n 100 --split train --seed 2 --digits 1 --terms 2 --word-problems 0' \
        'EVAL_N = 20' > a/config.mk
    mk a a/prompts.jsonl a/heldout.jsonl
    [ "$(jq -r .task a/heldout.jsonl | sort | uniq -c | tr -s ' ')" = " 20 arith" ]
    jq -e -s 'all(.expression | test("^[0-9] [-+*/] [0-9]$"))' a/heldout.jsonl
    [ -z "$(jq -r .id a/prompts.jsonl | sort | comm -12 - <(jq -r .id a/heldout.jsonl | sort))" ]
    # GSM8K set up through PREP_FLAGS alone is evaluated on GSM8K (its test split of the same file)
    for ((i = 1; i <= 60; i++)); do
        printf '{"question":"What is %d plus %d?","answer":"%d + %d = %d\\n#### %d"}\n' $i $i $i $i $((2 * i)) $((2 * i))
    done > g.jsonl
    mkdir g
    echo "PREP_FLAGS = --task gsm8k --in $PWD/g.jsonl --split=train --format answer" > g/config.mk
    mk g g/prompts.jsonl g/heldout.jsonl
    [ "$(jq -r .task g/heldout.jsonl | sort -u)" = gsm8k ]
    [ "$(jq -s length g/heldout.jsonl)" -gt 0 ]
    [ "$(($(wc -l < g/heldout.jsonl) + $(wc -l < g/prompts.jsonl)))" -eq 60 ]
    [ -z "$(jq -r .id g/prompts.jsonl | sort | comm -12 - <(jq -r .id g/heldout.jsonl | sort))" ]
    # EVAL_PREP_FLAGS of another task: refused in one line before any work, unless EVAL_TASK_DIFFERS=1
    run mk g g/heldout.jsonl EVAL_PREP_FLAGS='--task arith --n 5 --split test'
    [ "$status" -eq 2 ]
    [ "$(printf '%s\n' "$output" | grep -c '')" -eq 1 ]
    [[ "$output" == *"the held-out set is task arith but training's is gsm8k: set EVAL_TASK_DIFFERS=1"* ]]
    [ "$(jq -r .task g/heldout.jsonl | sort -u)" = gsm8k ]
    run mk g -n eval EVAL_PREP_FLAGS='--task arith --n 5 --split test'
    [ "$status" -eq 2 ]
    mk g g/heldout.jsonl EVAL_PREP_FLAGS='--task arith --n 5 --split test' EVAL_TASK_DIFFERS=1
    [ "$(jq -r .task g/heldout.jsonl | sort -u)" = arith ]
    # a prompt file (PROMPTS) of GSM8K with the default held-out set (TASK, arith): refused too
    run mk g -n eval PROMPTS=g/prompts.jsonl
    [ "$status" -eq 2 ]
    [[ "$output" == *"the held-out set is task arith but training's is gsm8k"* ]]
    # training on every record (no --split train): the derived held-out set would overlap it
    run mk g -n eval PREP_FLAGS="--task gsm8k --in $PWD/g.jsonl"
    [ "$status" -eq 2 ]
    [[ "$output" == *"PREP_FLAGS has no --split train"* ]]
    # ... which matters only to an evaluation: training alone goes on
    mk g -n PREP_FLAGS="--task gsm8k --in $PWD/g.jsonl" > /dev/null
}

@test "step.sh: one GRPO step as a pipe, the reward swapped for jq; a failing stage leaves no checkpoint" {
    needs_tiny
    "$GRPO_ROOT/bin/grpo-prep" --task arith --n 8 --seed 1 --chat-template raw --word-problems 0 --model "$TINY" --out p.jsonl
    export K=4 MAX_NEW_TOKENS=12 SEED=5 ROLLOUT_FLAGS='--threads 1' UPDATE_FLAGS='--lr 1e-3 --threads 1'
    REWARD='jq -c ". + {reward: (.completion | length)}"' METRICS=m.jsonl "$GRPO_ROOT/pipelines/step.sh" "$TINY" p.jsonl c1
    jq -e '.step == 1' c1/grpo/state.json
    # the same stages through files: the same batch, so the same checkpoint
    grpo-rollout --model "$TINY" --in p.jsonl -k 4 --max-new-tokens 12 --temperature 1 --seed 5 --threads 1 \
        | jq -c '. + {reward: (.completion | length)}' | grpo-advantage --out b.jsonl
    [ "$(jq -r .batch_sha256 c1/grpo/state.json)" = "$(sha256sum < b.jsonl | cut -c1-64)" ]
    [ "$(jq .reward m.jsonl)" = "$(jq -s 'map(.reward) | add / length' b.jsonl)" ]
    # the pipes of pipelines/README.md
    grpo-rollout --model "$TINY" --in p.jsonl -k 4 --max-new-tokens 12 --seed 1 \
        | grpo-reward --fn answer,format:0.2 \
        | grpo-advantage \
        | grpo-update --model "$TINY" --in - --out ckpt-1 --lr 1e-5 --metrics metrics.jsonl
    jq -e '.step == 1 and .tokens > 0' metrics.jsonl
    grpo-rollout --model "$TINY" --in p.jsonl -k 4 --max-new-tokens 12 --seed 1 \
        | jq -c '. + {reward: (if .completion | test("<answer>") then 1 else 0 end)}' \
        | grpo-advantage | grpo-update --model "$TINY" --in - --out ckpt-2 --lr 1e-5
    jq -e '.step == 1' ckpt-2/grpo/state.json
    run env REWARD='jq -c "error(\"bad record\")"' "$GRPO_ROOT/pipelines/step.sh" "$TINY" p.jsonl c2
    [ "$status" -ne 0 ]
    [[ "$output" == *"step.sh: a stage of the pipe failed"* ]]
    [ ! -e c2 ]
    [ ! -e c2.part ]
}

@test "scripts/demo.sh (make demo) on the tiny model: before -> after, the exports, the plot; a progress bar on a terminal" {
    needs_tiny
    config cfg "EVAL_EVERY = 3" "EVAL_FLAGS = --threads 1" "EXPORT_FORMAT = hf gguf" \
        "EVAL_PREP_FLAGS = --task arith --n 6 --split test --seed 1 --chat-template raw --word-problems 0 --model $TINY"
    mv cfg/config.mk tiny.mk
    # not a terminal: the step lines as they are, then the summary; MAKELEVEL as
    # under `make demo`, whose inner make says "make[2]: Nothing to be done ..."
    run env MAKELEVEL=1 DEMO_CONFIG="$PWD/tiny.mk" DEMO_RUN="$PWD/d" SEED=3 bash "$GRPO_ROOT/scripts/demo.sh"
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$(printf '%s\n' "$output" | grep -c '^step [123]/3  reward')" -eq 3 ]
    [[ "$output" != *$'\r'* ]]
    before=$(jq -r 'select(.kind == "eval" and .step == 0) | ."eval/accuracy"' d/metrics.jsonl)
    after=$(jq -r 'select(.kind == "eval" and .step == 3) | ."eval/accuracy"' d/metrics.jsonl)
    [[ "$output" == *"held-out accuracy (greedy): $before -> $after"* ]]
    [[ "$output" == *"exported: $PWD/d/export/hf"* ]]
    [[ "$output" == *"exported: $PWD/d/export/model.gguf"* ]]
    [ -s d/export/hf/config.json ]
    [ -s d/export/model.gguf ]
    [ "$(head -c 8 d/curves.png | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]
    # the step lines carry the batch accuracy that the plot draws
    jq -se 'map(select(.kind == null) | .["rewards/answer/mean"] | type == "number") | length == 3 and all' d/metrics.jsonl
    [[ "$output" != *"Nothing to be done"* ]]
    # on a terminal (script(1) gives it one), a fresh run draws the bar under the lines
    command -v script > /dev/null || skip "no script(1)"
    DEMO_CONFIG="$PWD/tiny.mk" DEMO_RUN="$PWD/t" SEED=3 script -qec "bash $GRPO_ROOT/scripts/demo.sh" /dev/null > tty.out
    grep -aq $'\r\033\[K\[#*\.*\] [0-3]/3  step [1-3]: \(rollout\|reward\|advantage\|update\)' tty.out
    grep -aq $'\r\033\[K\[#\{24\}\] 3/3  ' tty.out
    grep -aq 'held-out accuracy (greedy): ' tty.out
    # the same run: the same checkpoint
    cmp d/ckpt/0003/model.safetensors t/ckpt/0003/model.safetensors
}

@test "scripts/demo.sh BASE=q8 (make demo BASE=q8): the LoRA trains over a frozen q8 base, rollout from it" {
    needs_tiny
    config cfg "STEPS = 2" "UPDATE_FLAGS = --lr 1e-3 --beta 0 --threads 1 --lora-r 4" "EVAL_EVERY = 2" \
        "EVAL_FLAGS = --threads 1" "EXPORT_FORMAT = hf" \
        "EVAL_PREP_FLAGS = --task arith --n 4 --split test --seed 1 --chat-template raw --word-problems 0 --model $TINY"
    mv cfg/config.mk tiny.mk
    run env MAKELEVEL=1 DEMO_CONFIG="$PWD/tiny.mk" DEMO_RUN="$PWD/d" SEED=3 BASE=q8 bash "$GRPO_ROOT/scripts/demo.sh"
    echo "$output"
    [ "$status" -eq 0 ]
    grep -qx 'UPDATE_FLAGS += --base-weights q8' d/config.mk
    [ "$(jq -r .flags.base_weights d/ckpt/0002/grpo/state.json)" = q8 ]
    [[ "$output" == *"held-out accuracy (greedy): "* ]]
    [ -s d/export/hf/config.json ]
    # a format grpo-update does not know: its one line, 64, from the first update
    run env MAKELEVEL=1 DEMO_CONFIG="$PWD/tiny.mk" DEMO_RUN="$PWD/e" SEED=3 BASE=q5 bash "$GRPO_ROOT/scripts/demo.sh"
    [ "$status" -ne 0 ]
    echo "$output" | grep -q -- "--base-weights.*q5"
    [ ! -e e/ckpt/0001 ]
    # make demo BASE=q4k names its run directory by the format
    run make --no-print-directory -n -C "$GRPO_ROOT" demo BASE=q4k SEED=2
    [ "$status" -eq 0 ]
    [[ "$output" == *"SEED='2' BASE='q4k' bash scripts/demo.sh"* ]]
}

@test "scripts/grpo-progress: lines pass through; --bar adds the bar from the run's files; usage errors" {
    mkdir -p r/steps/0000 r/steps/0001 r/eval
    echo '{"step":1}' > r/steps/0000/metrics.jsonl
    echo 20.5 > r/steps/0000/rollout.seconds; echo 10 > r/steps/0000/update.seconds
    touch r/steps/0001/rollouts.jsonl.zst
    run bash -c "printf 'one\ntwo\n' | '$GRPO_ROOT/scripts/grpo-progress' --steps 4 r 2>&1"
    [ "$status" -eq 0 ]; [ "$output" = $'one\ntwo' ]
    # one step of 4 done in 30 s: the bar a quarter full, step 2 at its reward stage, 90 s to go
    # (the seconds since the start are the clock's: a loaded machine may show 1s or more);
    # a line cut short by the end of the input still shown
    run bash -c "{ echo one; printf 'last'; } | '$GRPO_ROOT/scripts/grpo-progress' --bar --steps 4 r 2>&1"
    [ "$status" -eq 0 ]
    [[ "$output" =~ ^$'\r\033'\[K\[######\.{18}\]\ 1/4\ \ step\ 2:\ reward\ \ [0-9]+s,\ about\ 1m30s\ left$'\r\033'\[Kone$'\n' ]]
    [[ "$output" == *$'\r\033[Klast' ]]
    # an evaluation whose line is not written yet is what runs
    touch r/eval/0001.log
    run bash -c "echo x | '$GRPO_ROOT/scripts/grpo-progress' --bar --steps 4 r 2>&1"
    [[ "$output" == *"1/4  evaluating checkpoint 1  "* ]]
    run "$GRPO_ROOT/scripts/grpo-progress" r
    [ "$status" -eq 64 ]; [[ "$output" == *"--steps must be a positive integer"* ]]
    run "$GRPO_ROOT/scripts/grpo-progress" --steps 2
    [ "$status" -eq 64 ]; [[ "$output" == *"expected the run directory"* ]]
    run "$GRPO_ROOT/scripts/grpo-progress" --steps 2 --color r
    [ "$status" -eq 64 ]; [[ "$output" == *"unknown flag '--color'"* ]]
    "$GRPO_ROOT/scripts/grpo-progress" --help | grep -q '^usage: make -f pipelines/grpo.mk'
}

@test "pipelines/examples/guess (make example-guess): a multi-turn run through grpo.mk, the environment's success as held-out accuracy" {
    needs_tiny
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/check_env_prefix.py" make chatml chatml
    # the example's settings, shrunk for a tiny ChatML model: 2 steps of 2 games x 2 episodes
    mkdir g
    printf '%s\n' "include $GRPO_ROOT/pipelines/examples/guess/config.mk" "MODEL = $PWD/chatml" "STEPS = 2" \
        "PROMPTS_PER_STEP = 2" "K = 2" "MAX_NEW_TOKENS = 4" "EVAL_EVERY = 2" "EVAL_K = 1" \
        "UPDATE_FLAGS = --lora-r 4 --lr 1e-3 --threads 1" "SEED = 5" > g/config.mk
    mk g run eval
    mk g metrics > /dev/null
    # the steps' rollouts are episodes against guess.py: every record has turns and a mask
    zstd -dc g/steps/0000/rollouts.jsonl.zst | jq -e -s 'length == 4 and all(.turns | length >= 1)
        and all(.completion_mask | index(0) != null) and all(.finish_reason == "env")
        and all(.env_reward == 0 or .env_reward == 1)' > /dev/null
    zstd -dc g/steps/0001/scored.jsonl.zst | jq -e -s 'all(.reward == .env_reward)' > /dev/null
    [ -s g/ckpt/0002/grpo/state.json ]
    # held-out: 50 games, one episode each, accuracy = the mean success
    jq -e -s 'map(select(.kind == "eval")) | length == 2 and all(.["eval/prompts"] == 50 and .["eval/k"] == 1
        and (.["eval/accuracy"] | type == "number") and .["eval/accuracy"] == .["eval/reward"])' g/metrics.jsonl
    # make example-guess hands this config to scripts/demo.sh
    run make --no-print-directory -n -C "$GRPO_ROOT" example-guess SEED=2
    [ "$status" -eq 0 ]
    [[ "$output" == *"DEMO_CONFIG='$GRPO_ROOT/pipelines/examples/guess/config.mk' DEMO_RUN='runs/guess-seed2'"* ]]
    [[ "$output" == *"SEED='2' bash scripts/demo.sh"* ]]
}

@test "ASYNC=1: step N samples with checkpoint N - MAX_STALENESS, beside the update of step N-1; the update weighs the stale records" {
    needs_tiny
    config a "ASYNC = 1"
    mk a -j2 2>/dev/null
    # step 0 and 1 sample with the model, step 2 with checkpoint 1
    for n in 0000:0000:0 0001:0000:0 0002:0001:1; do
        IFS=: read -r step ck ps <<< "$n"
        [ "$(zstd -dc a/steps/$step/rollouts.jsonl.zst | jq -r '"\(.policy) \(.policy_step)"' | sort -u)" = "ckpt/$ck $ps" ]
    done
    [ "$(jq -r 'select(.kind != "eval") | ."policy_staleness/max"' a/metrics.jsonl | tr '\n' ' ')" = "0 1 1 " ]
    jq -e '.flags.recompute_old == false and .flags.is_correction == "none"' a/ckpt/0001/grpo/state.json
    for c in 0002 0003; do
        jq -e '.flags.recompute_old == true and .flags.is_correction == "token"' a/ckpt/$c/grpo/state.json
    done
    # the same bytes made one job at a time, and with kill -9 in between
    config b "ASYNC = 1"
    mk b 2>/dev/null
    config k "ASYNC = 1"
    for i in 1 2 3 4 5; do
        setsid make --no-print-directory -f "$GRPO_ROOT/pipelines/grpo.mk" RUN=k -j2 > /dev/null 2>&1 &
        pid=$!
        sleep "0.$((RANDOM % 6))$((RANDOM % 10))"
        kill -9 -- "-$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    mk k -j2 2>/dev/null
    for r in b k; do
        for f in model.safetensors grpo/optimizer.safetensors; do cmp a/ckpt/0003/$f $r/ckpt/0003/$f; done
        diff <(untimed a/metrics.jsonl) <(untimed $r/metrics.jsonl)
        for n in 0000 0001 0002; do cmp a/steps/$n/batch.jsonl.zst $r/steps/$n/batch.jsonl.zst; done
    done
    # step 2's rollout needs checkpoint 1 only, so it can run beside the update that makes checkpoint 2
    mv a/ckpt/0002 a/ckpt-2 && rm a/steps/0002/rollouts.jsonl.zst a/steps/0002/scored.jsonl.zst
    mk a -n a/steps/0002/scored.jsonl.zst > plan
    grep -q grpo-rollout plan
    ! grep -q grpo-update plan || false
    # a synchronous run samples otherwise: changing ASYNC re-runs the rollouts
    [ "$(mk a -n ASYNC=0 | grep -c 'grpo-rollout')" -ge 1 ]
}

@test "ASYNC=1 with MAX_STALENESS=2 and KEEP=1: the sampling checkpoints are kept until used; bad values are errors" {
    needs_tiny
    config a "ASYNC = 1" "MAX_STALENESS = 2" "KEEP = 1" "STEPS = 4"
    mk a -j2 2>/dev/null
    [ "$(zstd -dc a/steps/0002/rollouts.jsonl.zst | jq -r .policy | sort -u)" = ckpt/0000 ]
    [ "$(zstd -dc a/steps/0003/rollouts.jsonl.zst | jq -r .policy | sort -u)" = ckpt/0001 ]
    [ "$(jq -r 'select(.kind != "eval") | ."policy_staleness/max"' a/metrics.jsonl | tr '\n' ' ')" = "0 1 2 2 " ]
    # KEEP=1 keeps MAX_STALENESS + 1 checkpoints, and make remakes none
    [ "$(ls a/ckpt)" = "$(printf '0002\n0003\n0004')" ]
    mk a -q
    run mk x ASYNC=2
    [ "$status" -ne 0 ]
    [[ "$output" == *"ASYNC=2: expected 0 or 1"* ]]
    run mk x ASYNC=1 MAX_STALENESS=0
    [ "$status" -ne 0 ]
    [[ "$output" == *"MAX_STALENESS=0: expected a whole number of steps, 1 or more"* ]]
}
