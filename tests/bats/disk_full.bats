#!/usr/bin/env bats
# A full disk and an unwritable output directory at every stage:
# each tool's output goes to a 1 MiB tmpfs whose free space a filler file has
# taken, or to a read-only bind mount, inside a user and mount namespace
# (unshare -rm). Promised (README, Conventions): a full disk is one line on
# stderr naming the output and exit 74; an output directory that cannot be
# written is one line and exit 73, before any work; either way the files
# there before (an older output of the same name, a checkpoint, a metrics
# file, the judge cache) keep their bytes and no temporary is left.
# pipelines/grpo.mk: make stops at the stage that cannot write (make's own
# status, 2), that stage's line on stderr, the run's files as they were; with
# the space back, the same make ends with an uninterrupted run's bytes.
# needs: venv
load helpers
unset MAKEFLAGS MFLAGS MAKELEVEL
export GRPO_ROOT # the namespaces' shells run mk, which needs it

setup_file() {
    export TINY="$BATS_FILE_TMPDIR/tiny" F="$BATS_FILE_TMPDIR"
    [ -x "$GRPO_PY" ] || return 0
    make_tiny_llama "$TINY"
    # room for two turns of the multi-turn rollout
    jq '.max_position_embeddings = 512' "$TINY/config.json" > "$F/c.json" && mv "$F/c.json" "$TINY/config.json"
    cd "$F" || return 1
    grpo-prep --task arith --n 16 --seed 2 --model "$TINY" --chat-template raw --word-problems 0 --out prompts.jsonl
    grpo-rollout --model "$TINY" --in prompts.jsonl -k 4 --max-new-tokens 8 --threads 1 --out rollouts.jsonl
    grpo-reward --fn answer,length:0.5 --max-len 8 --in rollouts.jsonl --out scored.jsonl --quiet
    grpo-advantage --in scored.jsonl --out batch.jsonl
    grpo-update --model "$TINY" --in batch.jsonl --out ckpt --lr 1e-3 --threads 1 2> /dev/null
    grpo-update --model "$TINY" --in batch.jsonl --out lora --lora-r 4 --lr 1e-3 --threads 1 2> /dev/null
}

teardown() {
    if [ -n "${SERVER_PID:-}" ]; then
        kill "$SERVER_PID" 2> /dev/null || true
        wait "$SERVER_PID" 2> /dev/null || true
    fi
}

needs_ns() {
    [ -d "$TINY" ] || skip "no test venv (make venv)"
    unshare -rm sh -c 'd=$(mktemp -d) && mount -t tmpfs -o size=64k tmpfs "$d" && umount "$d" && rmdir "$d"' 2> /dev/null ||
        skip "no user and mount namespaces here (unshare -rm): no tmpfs to fill"
}

# previous DIR: the files a run left there before: an output of each name, a
# checkpoint directory, a metrics file of exactly one page (so that appending a
# line needs a block the disk does not have)
previous() {
    mkdir -p "$1/ckpt" "$1/hf" "$1/peft"
    for f in out.jsonl out.jsonl.zst stats.json model.gguf; do echo "previous $f" > "$1/$f"; done
    cp "$TINY"/* "$1/ckpt/"
    echo 'previous export' > "$1/hf/config.json"
    echo 'previous adapter' > "$1/peft/adapter_config.json"
    { head -c 4095 /dev/zero | tr '\0' 'x'; echo; } > "$1/m.jsonl"
}

# in_ns HOW CMD...: CMD, its output directory being d/ (previous files from
# seed/): HOW = full (a 1 MiB tmpfs, filled) or readonly (a read-only bind
# mount). Sets status and stderr ($output too); d/'s files afterwards in after/.
in_ns() {
    local how=$1
    shift
    rm -rf d after && mkdir -p d after
    run --separate-stderr unshare -rm bash -c '
        how=$1; shift
        if [ "$how" = full ]; then
            mount -t tmpfs -o size=1m tmpfs d && cp -a seed/. d/ || exit 200
            dd if=/dev/zero of=d/.filler bs=4k 2> /dev/null
        else
            cp -a seed/. d/ && mount --bind d d && mount -o remount,bind,ro d || exit 200
        fi
        "$@" > /dev/null; st=$?
        rm -f d/.filler; cp -a d/. after/ || exit 201
        exit $st' _ "$how" "$@"
    [ "$status" -lt 200 ] || { echo "the namespace's set-up failed ($status): $stderr"; return 1; }
    output=$stderr
}

# intact: every file of seed/ unchanged, nothing else (no temporary) beside them
intact() {
    diff -r seed after || { echo "the files before the run changed, or others were left:"; ls -la after; return 1; }
}

# fails_in MODE STATUS WHY TOOL CMD...: STATUS, one line naming d/ and WHY, nothing changed
fails_in() {
    local mode=$1 want=$2 why=$3 tool=$4
    shift 4
    in_ns "$mode" "$@"
    [ "$status" -eq "$want" ] || { echo "$* -> $status: $output"; return 1; }
    assert_one_line_error "$tool" "d/[^ ]*: .*$why" || return 1
    intact
}
full() { fails_in full 74 'No space left on device' "$@"; }         # full TOOL CMD...
readonly_dir() { fails_in readonly 73 'Read-only file system' "$@"; } # readonly_dir TOOL CMD...

@test "grpo-prep: a full disk is 74, a read-only directory 73; one line; the previous output intact" {
    needs_ns
    previous seed
    for out in d/out.jsonl d/out.jsonl.zst; do
        full grpo-prep grpo-prep --task arith --n 20000 --out $out
        readonly_dir grpo-prep grpo-prep --task arith --n 20000 --out $out
    done
    # stdout into the full disk: 74 too, naming it
    in_ns full sh -c 'grpo-prep --task arith --n 20000 > d/stdout.jsonl'
    [ "$status" -eq 74 ]
    assert_one_line_error grpo-prep "<stdout>: write failed: No space left on device"
}

@test "grpo-rollout, single- and multi-turn: 74 on a full disk, 73 read-only, the previous output intact" {
    needs_ns
    previous seed
    full grpo-rollout grpo-rollout --model "$TINY" --in "$F/prompts.jsonl" -k 8 --max-new-tokens 16 --threads 1 --out d/out.jsonl
    readonly_dir grpo-rollout grpo-rollout --model "$TINY" --in "$F/prompts.jsonl" -k 8 --max-new-tokens 16 --threads 1 --out d/out.jsonl.zst
    python3 "$GRPO_ROOT/scripts/env/guess.py" --prompts 40 --seed 1 --max 9 > guess.jsonl
    full grpo-rollout grpo-rollout --model "$TINY" --in guess.jsonl -k 4 --max-new-tokens 3 --max-turns 2 --threads 1 \
        --env "python3 -u $GRPO_ROOT/scripts/env/guess.py" --out d/out.jsonl
}

@test "grpo-reward: --out and --stats on a full disk 74, read-only 73; the judge cache full: 74, its answers kept" {
    needs_ns
    previous seed
    R=(grpo-reward --fn answer,length:0.5 --max-len 8 --quiet --in "$F/rollouts.jsonl")
    full grpo-reward "${R[@]}" --out d/out.jsonl
    full grpo-reward "${R[@]}" --out /dev/null --stats d/stats.json
    readonly_dir grpo-reward "${R[@]}" --out d/out.jsonl.zst
    readonly_dir grpo-reward "${R[@]}" --out /dev/null --stats d/stats.json
    # the judge's cache on the full disk: the answers it holds stay, the new ones
    # cannot be stored: 74 naming the cache, no output
    start_server
    J=(grpo-reward --fn judge --judge-url "$URL" --judge-model m --judge-template "$GRPO_ROOT/examples/judge.txt" --quiet)
    head -n 4 "$F/rollouts.jsonl" > few.jsonl
    "${J[@]}" --judge-cache seed/judge.sqlite --in few.jsonl --out /dev/null
    grpo-reward cache export --judge-cache seed/judge.sqlite --out before.jsonl
    [ "$(wc -l < before.jsonl)" -eq 4 ]
    in_ns full "${J[@]}" --judge-cache d/judge.sqlite --in "$F/rollouts.jsonl" --out out.jsonl
    [ "$status" -eq 74 ]
    assert_one_line_error grpo-reward "judge cache d/judge.sqlite: .*(full|No space)"
    [ ! -e out.jsonl ]
    grpo-reward cache export --judge-cache after/judge.sqlite --out after.jsonl
    cmp before.jsonl after.jsonl
    # the cache in a read-only directory: 74 (formats/judge-cache.md: a file that
    # cannot be opened or written), one line, the file as it was
    in_ns readonly "${J[@]}" --judge-cache d/judge.sqlite --in "$F/rollouts.jsonl" --out out.jsonl
    [ "$status" -eq 74 ]
    assert_one_line_error grpo-reward "judge cache d/judge.sqlite: "
    intact
}

@test "grpo-advantage: --out and --stats on a full disk 74, read-only 73; the previous files intact" {
    needs_ns
    previous seed
    awk 'BEGIN { for (i = 0; i < 20000; i++) printf "{\"id\":\"g%d\",\"reward\":%d}\n", int(i / 4), i % 3 }' > s.jsonl
    full grpo-advantage grpo-advantage --in s.jsonl --out d/out.jsonl
    full grpo-advantage grpo-advantage --in s.jsonl --out /dev/null --stats d/stats.json
    readonly_dir grpo-advantage grpo-advantage --in s.jsonl --out d/out.jsonl.zst
    readonly_dir grpo-advantage grpo-advantage --in s.jsonl --out /dev/null --stats d/stats.json
}

@test "grpo-update: a checkpoint or --metrics on a full disk 74, read-only 73; the old checkpoint and metrics intact" {
    needs_ns
    previous seed
    U=(grpo-update --model "$TINY" --in "$F/batch.jsonl" --lr 1e-3 --threads 1)
    full grpo-update "${U[@]}" --out d/ckpt
    full grpo-update "${U[@]}" --out d/new-ckpt
    readonly_dir grpo-update "${U[@]}" --out d/ckpt
    # --metrics appends a line: on a full disk nothing of it stays (the file keeps whole
    # lines only), the message names the cause, and the checkpoint is not written:
    # both or neither
    in_ns full "${U[@]}" --out ck --metrics d/m.jsonl
    [ "$status" -eq 74 ]
    assert_one_line_error grpo-update "d/m.jsonl: write failed: No space left on device"
    intact
    [ ! -e ck ]
    no_temp_left .
    readonly_dir grpo-update "${U[@]}" --out ck --metrics d/m.jsonl
}

@test "grpo-export: hf, peft and gguf on a full disk 74, read-only 73; the previous export intact" {
    needs_ns
    previous seed
    full grpo-export grpo-export --model "$F/ckpt" --format hf --dtype f32 --out d/hf
    full grpo-export grpo-export --model "$F/lora" --format peft --out d/peft
    full grpo-export grpo-export --model "$F/ckpt" --format gguf --dtype f32 --out d/model.gguf
    readonly_dir grpo-export grpo-export --model "$F/ckpt" --format hf --out d/hf
    readonly_dir grpo-export grpo-export --model "$F/lora" --format peft --out d/peft
    readonly_dir grpo-export grpo-export --model "$F/ckpt" --format gguf --out d/model.gguf
}

# a 1-step grpo.mk run on the tiny model, as pipeline.bats configures it
mk_config() {
    mkdir -p "$1"
    cat > "$1/config.mk" <<EOF
MODEL = $TINY
PREP_FLAGS = --task arith --n 20 --split train --seed 1 --chat-template raw --word-problems 0 --model $TINY
STEPS = 1
PROMPTS_PER_STEP = 8
K = 4
MAX_NEW_TOKENS = 8
SHARDS = 2
ROLLOUT_FLAGS = --threads 1
REWARD_FLAGS = --fn answer,length:0.5 --max-len 8 --quiet
UPDATE_FLAGS = --lr 1e-3 --threads 1
SEED = 3
EOF
}
# mk DIR ARGS...: the run DIR/r, made from DIR (checkpoints name their parent
# relative to it, so runs in other directories compare byte for byte)
mk() { (cd "$1" && shift && make --no-print-directory -f "$GRPO_ROOT/pipelines/grpo.mk" RUN=r "$@"); }

@test "grpo.mk on a full disk at each stage: make stops there, the run's files as they were; with the space back it ends as an uninterrupted run" {
    needs_ns
    export -f mk
    mk_config want/r
    mk want STEPS=2 run export > /dev/null 2>&1
    mk_config seed/r
    mk seed > /dev/null 2>&1
    [ -s seed/r/ckpt/0001/grpo/state.json ]
    # step 2 (STEPS=2): made with space up to a point, then the disk filled and the
    # whole run and export asked for; then again once the filler is gone. The
    # points: before the slice of prompts, the rollout shards, the reward shards,
    # the merge of the shards (pipelines/merge.sh), the advantages, the update,
    # metrics.jsonl, the export.
    local s=r/steps/0001
    points=("" $s/prompts.jsonl "$s/rollouts.0-of-2.jsonl.zst $s/rollouts.1-of-2.jsonl.zst"
        "$s/scored.0-of-2.jsonl.zst $s/scored.1-of-2.jsonl.zst" $s/scored.jsonl.zst $s/batch.jsonl.zst
        r/ckpt/0002/grpo/state.json run)
    stages=(slice rollout reward merge advantage update metrics export)
    for k in "${!points[@]}"; do
        rm -rf d before after again && mkdir -p d before after
        run --separate-stderr unshare -rm bash -c '
            mount -t tmpfs -o size=4m tmpfs d && cp -a seed/. d/ || exit 200
            [ -z "$1" ] || mk d STEPS=2 $1 > /dev/null 2>&1 || exit 203
            cp -a d/. before/ || exit 201
            dd if=/dev/zero of=d/.filler bs=4k 2> /dev/null
            mk d STEPS=2 run export > /dev/null; st=$?
            cp -a d/. after/ && rm -f after/.filler || exit 201
            rm -f d/.filler
            mk d STEPS=2 run export > /dev/null 2> rerun.err || { cat rerun.err >&2; exit 202; }
            mkdir -p again && cp -a d/r/. again/ || exit 201
            exit $st' _ "${points[$k]}"
        echo "${stages[$k]}: $status: $stderr"
        [ "$status" -eq 2 ]
        printf '%s\n' "$stderr" | grep -Eq 'No space left on device|its stderr could not be written there'
        [[ "$stderr" == *"make: *** ["*"Error "* ]]
        # a tool fails in one line naming its output; its stderr goes to the stage's
        # log, on the full disk too, so that line may be lost: grpo.mk then says so
        case ${stages[$k]} in rollout | reward | advantage | update | export)
            printf '%s\n' "$stderr" | grep -Eq "^grpo-${stages[$k]}: r/[^ ]*: write failed: No space left on device$" ||
                printf '%s\n' "$stderr" | grep -Eq "^grpo.mk: r/[^ ]*\.log is empty: the stage failed \(exit 74\) without a message, or its stderr could not be written there" ;;
        esac
        # the run's files as they were before the full make, nothing beside them (no
        # temporary; a step's directory, made before its first file, may be there
        # empty); settings/ holds the stamps make rewrites when a setting (STEPS) changes,
        # STAGE.log the failing stage's stderr
        find after/r -mindepth 1 -type d -empty -delete
        diff -r -x settings -x '*.log' before/r after/r
        # with the space back: an uninterrupted run's checkpoint, metrics and export
        diff -r want/r/ckpt/0002 again/ckpt/0002
        diff <(jq -c 'del(.seconds, .tokens_per_second)' want/r/metrics.jsonl) <(jq -c 'del(.seconds, .tokens_per_second)' again/metrics.jsonl)
        diff -r want/r/export again/export
    done
}

@test "grpo.mk with a read-only run directory: one line, make stops before any work, nothing changed" {
    needs_ns
    export -f mk
    mk_config seed/r
    mk seed > /dev/null 2>&1
    rm -rf d after && mkdir -p d after
    run --separate-stderr unshare -rm bash -c '
        cp -a seed/. d/ && mount --bind d d && mount -o remount,bind,ro d || exit 200
        mk d STEPS=2 > /dev/null; st=$?
        cp -a d/. after/ || exit 201
        exit $st'
    [ "$status" -eq 2 ]
    [ "$(printf '%s\n' "$stderr" | grep -c '')" -eq 1 ]
    [[ "$stderr" == *"r/settings/"*"Read-only file system"* ]]
    diff -r seed after
}
