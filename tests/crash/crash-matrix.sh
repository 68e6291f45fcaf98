#!/bin/bash
# tests/crash/crash-matrix.sh: `make crash-matrix [KILLS=200] [SEED=1]`.
#
# SIGKILL at random points, then a rerun, KILLS times over:
#   make      a pipelines/grpo.mk run (make -j2, SHARDS=2, 2 steps, `run export`
#             with hf and gguf) on a tiny random llama: grpo-prep, multi-turn
#             rollout against scripts/env/guess.py (--env), reward `env` and
#             `judge` through its SQLite cache against tests/ref/judge_server.py
#             injecting 429, 500, resets, truncated bodies, slow bodies and
#             replies slower than --judge-timeout, advantage, update, TensorBoard;
#             make's whole process group is killed
#   prep, rollout, rollout-env, reward, advantage, update, export
#             each tool alone, over an output it replaces (the kill hits the
#             tool itself); reward is the judge's, with faults and its cache
# Half of the kills go to the make run, the rest in turn to the tools. Each
# trial starts from fresh files (its own judge server and cache), is killed
# after a random delay in [0, T], and run again to its end. T is the
# uninterrupted run's wall time, then the latest whole run's: a tool's rerun,
# or a run that ended before its kill; such a kill is not counted, the trial
# starts again. Checked, per trial:
#   identical   the rerun's results are byte-identical to an uninterrupted run's:
#               make: the last checkpoint, both exports, metrics.jsonl without
#               its wall-clock fields (seconds, tokens_per_second); a tool: its
#               outputs
#   whole       just after the kill, each output is the previous file or the new
#               one, never a part (make: every checkpoint that exists loads as one)
#   temps       after the rerun, the run's files are exactly those of an
#               uninterrupted run: no temporary, no stray file
#   procs       processes of the trial still running 3 s after the kill
#   judge       no answer the cache held after the kill is bought again; answers
#               sold to a process killed before it stored them are counted apart
# Prints a table and exits 1 if any check failed. WORK (default
# build/crash-matrix) holds the files; a failed trial's directory is kept.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
KILLS=${KILLS:-200}
SEED=${SEED:-1}
WORK=${WORK:-$ROOT/build/crash-matrix}
PY=$ROOT/.venv/bin/python
# a fresh make: `make crash-matrix`'s flags must not reach the pipeline's
unset MAKEFLAGS MFLAGS MAKELEVEL
export LC_ALL=C
export PATH="$ROOT/bin:$PATH" GRPO_DEVICE=cpu GRPO_WEIGHTS=f32 OMP_NUM_THREADS=1
. "$ROOT/tests/crash/lib.sh"

[ -x "$PY" ] || { echo "crash-matrix: no test venv ($PY): run make venv first" >&2; exit 69; }
for t in grpo-prep grpo-rollout grpo-reward grpo-advantage grpo-update grpo-export; do
    [ -x "$ROOT/bin/$t" ] || { echo "crash-matrix: bin/$t missing: make" >&2; exit 69; }
done
RANDOM=$SEED
rm -rf "$WORK"
mkdir -p "$WORK"
FIX=$WORK/fixture
TAGBASE=crash-matrix-$$
trap 'server_stop' EXIT
echo "crash-matrix: $KILLS kills, seed $SEED, in $WORK"

# ---- the fixture and the tools' inputs ----------------------------------------
fixture "$FIX" || exit 1
(
    cd "$FIX" || exit 1
    grpo-prep --task arith --n 48 --seed 2 --model tiny --chat-template raw --word-problems 0 --out arith.jsonl &&
    grpo-rollout --model tiny --in arith.jsonl -k 8 --max-new-tokens 12 --threads 1 --seed 5 --out rollouts.jsonl &&
    grpo-reward --fn answer,length:0.5 --max-len 12 --in rollouts.jsonl --out scored.jsonl --quiet &&
    grpo-advantage --in scored.jsonl --out batch.jsonl &&
    grpo-update --model tiny --in batch.jsonl --out ckpt --lr 1e-3 --threads 1 2> /dev/null &&
    # 300k scored records for grpo-advantage alone: 75k groups of 4
    awk 'BEGIN { for (i = 0; i < 300000; i++) printf "{\"id\":\"g%d\",\"sample\":%d,\"reward\":%d,\"rewards\":{\"a\":%d}}\n", int(i / 4), i % 4, (i * 7919) % 5, i % 3 }' |
        zstd -q -c > big-scored.jsonl.zst &&
    cp -r tiny previous-ckpt && rm -f previous-ckpt/tokens.txt && echo previous > previous.txt
) || { echo "crash-matrix: the fixture failed" >&2; exit 1; }

# ---- the stages -----------------------------------------------------------------
# make: the pipeline run's config, with the judge at PORT and its cache beside RUN
make_config() { # DIR PORT
    mkdir -p "$1/r"
    cat > "$1/r/config.mk" <<EOF
MODEL = $FIX/tiny
PREP_FLAGS = --task jsonl --in $FIX/guess.jsonl --prompt-field messages --model $FIX/tiny
STEPS = 2
PROMPTS_PER_STEP = 8
K = 4
MAX_NEW_TOKENS = 4
SHARDS = 2
ROLLOUT_FLAGS = --threads 1 --max-turns 3 --env 'python3 -u $ROOT/scripts/env/guess.py'
REWARD_FLAGS = --fn env,judge:0.5 --judge-url http://127.0.0.1:$2/v1 --judge-model judge-tiny --judge-template $FIX/judge.txt \
    --judge-cache judge.sqlite --judge-timeout 0.3 --judge-concurrency 8 --quiet
UPDATE_FLAGS = --lr 1e-3 --beta 0.04 --threads 1
EXPORT_FORMAT = hf gguf
SEED = 3
EOF
}
MIX=429,500,reset,truncated,slowbody,slow

# setup_STAGE DIR: the trial's files before the run (previous outputs, server);
# cmd_STAGE: the command, run in DIR; outs_STAGE: the outputs compared
setup_make() { server_start "$1" --fault-mix "$MIX" --fault-mix-max 1 && make_config "$1" "$PORT"; }
cmd_make() { exec make --no-print-directory -f "$ROOT/pipelines/grpo.mk" RUN=r -j2 run export; }
outs_make() { echo r/ckpt/0002 r/export/hf r/export/model.gguf; }

setup_prep() { cp "$FIX/previous.txt" "$1/out.jsonl.zst"; }
cmd_prep() { exec grpo-prep --task arith --n 150000 --seed 4 --out out.jsonl.zst; }
outs_prep() { echo out.jsonl.zst; }

setup_rollout() { cp "$FIX/previous.txt" "$1/out.jsonl.zst"; }
cmd_rollout() { exec grpo-rollout --model "$FIX/tiny" --in "$FIX/arith.jsonl" -k 16 --max-new-tokens 48 --threads 1 --out out.jsonl.zst; }
outs_rollout() { echo out.jsonl.zst; }

setup_rollout_env() { cp "$FIX/previous.txt" "$1/out.jsonl"; }
cmd_rollout_env() {
    exec grpo-rollout --model "$FIX/tiny" --in "$FIX/guess.jsonl" -k 4 --max-new-tokens 4 --max-turns 3 --threads 1 \
        --env "python3 -u $ROOT/scripts/env/guess.py" --out out.jsonl
}
outs_rollout_env() { echo out.jsonl; }

setup_reward() { server_start "$1" --fault-mix "$MIX" --fault-mix-max 2 && cp "$FIX/previous.txt" "$1/out.jsonl.zst" && cp "$FIX/previous.txt" "$1/stats.json"; }
cmd_reward() {
    exec grpo-reward --fn judge,length:0.5 --max-len 12 --judge-url "http://127.0.0.1:$PORT/v1" --judge-model judge-tiny \
        --judge-template "$FIX/judge.txt" --judge-cache judge.sqlite --judge-timeout 0.3 --judge-concurrency 64 --quiet \
        --in "$FIX/rollouts.jsonl" --out out.jsonl.zst --stats stats.json
}
outs_reward() { echo out.jsonl.zst stats.json; }

setup_advantage() { cp "$FIX/previous.txt" "$1/out.jsonl.zst" && cp "$FIX/previous.txt" "$1/stats.json"; }
cmd_advantage() { exec grpo-advantage --in "$FIX/big-scored.jsonl.zst" --out out.jsonl.zst --stats stats.json; }
outs_advantage() { echo out.jsonl.zst stats.json; }

setup_update() { cp -r "$FIX/previous-ckpt" "$1/ckpt"; }
cmd_update() { exec grpo-update --model "$FIX/tiny" --in "$FIX/batch.jsonl" --out ckpt --lr 1e-3 --threads 1 --iterations 8; }
outs_update() { echo ckpt; }

setup_export() { cp -r "$FIX/previous-ckpt" "$1/hf"; }
cmd_export() { exec grpo-export --model "$FIX/wide" --format hf --dtype f32 --out hf; }
outs_export() { echo hf; }

STAGES="make prep rollout rollout_env reward advantage update export"

# same A B: file or directory A has B's bytes; grpo-reward's --stats without
# what differs from run to run by design (its seconds, the judge's counters of
# hits, misses and requests)
same() {
    if [ -d "$2" ]; then [ -d "$1" ] && diff -r "$1" "$2" > /dev/null
    elif [ "${1##*/}" = stats.json ] && [ "$s" = reward ]; then
        [ "$(jq -c 'del(.seconds, .judge)' "$1" 2> /dev/null)" = "$(jq -c 'del(.seconds, .judge)' "$2")" ]
    else cmp -s "$1" "$2"; fi
}

# whole_after_kill DIR OUT REF: OUT in DIR is the previous file or tree, or
# REF's; a checkpoint directory may be missing while the previous one is whole
# under .OUT.old-PID (the swap's fallback, lib/io/ckptdir.h)
whole_after_kill() {
    local d=$1 o=$2 ref=$3 old
    if [ -e "$d/$o" ]; then
        same "$d/$o" "$ref/$o" && return 0
        if [ -d "$d/$o" ]; then same "$d/$o" "$FIX/previous-ckpt"; else cmp -s "$d/$o" "$FIX/previous.txt"; fi
        return
    fi
    for old in "$d"/."$o".old-*; do [ -d "$old" ] && same "$old" "$FIX/previous-ckpt" && return 0; done
    return 1
}

# ---- the uninterrupted runs -------------------------------------------------------
declare -A T_MS
for s in $STAGES; do
    d=$WORK/ref/$s
    mkdir -p "$d"
    "setup_$s" "$d" || { echo "crash-matrix: $s: set-up failed" >&2; exit 1; }
    t0=$(now_ms)
    (cd "$d" && CRASH_TAG=$TAGBASE-ref "cmd_$s") > "$d/run.log" 2>&1 || {
        echo "crash-matrix: $s: the uninterrupted run failed:" >&2; tail -n 20 "$d/run.log" >&2; exit 1; }
    T_MS[$s]=$(( $(now_ms) - t0 ))
    server_stop
    listing "$d" | grep -v -e 'judge\.sqlite-\(wal\|shm\)$' -e '^\./run\.log$' -e '^\./server\.' -e '^\./sold$' -e '^\./port$' > "$d.listing"
    cp "$d/sold" "$d.sold" 2> /dev/null || : > "$d.sold"
    echo "crash-matrix: $s uninterrupted: ${T_MS[$s]} ms"
done
# the reference's bookkeeping: the make run and the judge bought each answer once
for s in make reward; do
    n=$(wc -l < "$WORK/ref/$s.sold"); u=$(sort -u "$WORK/ref/$s.sold" | wc -l)
    [ "$n" = "$u" ] || { echo "crash-matrix: $s: the uninterrupted run bought $n answers, $u distinct" >&2; exit 1; }
done

# ---- the kills --------------------------------------------------------------------
declare -A N MISSED SAME WHOLE TEMPS TIMES PROCS SOLD AGAIN LOST TWICE FAILED
for s in $STAGES; do N[$s]=0 TIMES[$s]=0 MISSED[$s]=0 SAME[$s]=0 WHOLE[$s]=0 TEMPS[$s]=0 PROCS[$s]=0 SOLD[$s]=0 AGAIN[$s]=0 LOST[$s]=0 TWICE[$s]=0 FAILED[$s]=0; done
tools=(prep rollout rollout_env reward advantage update export)
fail() { echo "  FAIL $s #$i: $*" >&2; bad=1; }
started=$(now_ms)
for ((i = 0; i < KILLS; i++)); do
    if ((i % 2 == 0)); then s=make; else s=${tools[$(( (i / 2) % ${#tools[@]} ))]}; fi
    ref=$WORK/ref/$s
    d=$WORK/trial/$s-$i
    bad=0
    tag=$TAGBASE-$i
    # a kill that finds the run ended (it was faster than T this time) does not
    # count: the trial starts again from fresh files, T becoming that run's time
    for ((try = 0; ; try++)); do
        rm -rf "$d" && mkdir -p "$d"
        "setup_$s" "$d" || { echo "crash-matrix: $s: set-up failed" >&2; exit 1; }
        wait_ms=$(delay_ms "${T_MS[$s]}")
        (cd "$d" && CRASH_TAG=$tag exec setsid bash -c "$(declare -f "cmd_$s"); FIX='$FIX' ROOT='$ROOT' PORT='${PORT:-}' cmd_$s" > "$d/killed.log" 2>&1) &
        pid=$!
        t0=$(now_ms)
        wait_for "$pid" "$wait_ms"
        if kill -9 -- "-$pid" 2> /dev/null; then
            wait "$pid" 2> /dev/null
            break
        fi
        wait "$pid" 2> /dev/null
        MISSED[$s]=$((MISSED[$s] + 1))
        T_MS[$s]=$(( $(now_ms) - t0 ))
        server_stop
        ((try < 20)) || { echo "crash-matrix: $s: 20 kills in a row found the run ended" >&2; exit 1; }
    done
    N[$s]=$((N[$s] + 1))
    left=$(settle "$tag")
    [ "$left" = 0 ] || { PROCS[$s]=$((PROCS[$s] + 1)); fail "$left processes still running 3 s after the kill"; }
    # just after the kill: each output whole (the previous one or the new one)
    whole=1
    if [ "$s" = make ]; then
        for f in "$d"/r/ckpt/*/grpo/state.json; do
            [ -e "$f" ] || continue
            grpo-export --model "${f%/grpo/state.json}" --format gguf --out "$d/probe.gguf" 2> /dev/null || whole=0
            rm -f "$d/probe.gguf"
        done
    else
        for o in $("outs_$s"); do whole_after_kill "$d" "$o" "$ref" || whole=0; done
    fi
    [ "$whole" = 1 ] && WHOLE[$s]=$((WHOLE[$s] + 1)) || fail "an output was neither the previous nor the new one after the kill"
    killed_at=0
    if [ -f "$d/sold" ]; then
        killed_at=$(wc -l < "$d/sold")
        "$PY" "$ROOT/tests/crash/judge_audit.py" stored "$d/judge.sqlite" > "$d/stored" || fail "the cache could not be read after the kill"
    fi
    # the rerun, to the end; a tool alone does the whole work again (the judge
    # aside, whose cache answers), so its time is T for the next trial
    t0=$(now_ms)
    if (cd "$d" && CRASH_TAG=$tag-rerun "cmd_$s") > "$d/rerun.log" 2>&1; then
        [ "$s" = make ] || [ "$s" = reward ] || T_MS[$s]=$(( $(now_ms) - t0 ))
        ok=1
        for o in $("outs_$s"); do same "$d/$o" "$ref/$o" || { ok=0; fail "$o differs from the uninterrupted run's"; }; done
        if [ "$s" = make ]; then
            diff <(untimed "$ref/r/metrics.jsonl") <(untimed "$d/r/metrics.jsonl") > /dev/null || { ok=0; fail "metrics.jsonl differs"; }
        fi
        [ "$ok" = 1 ] && SAME[$s]=$((SAME[$s] + 1))
    else
        fail "the rerun failed: $(tail -n 3 "$d/rerun.log" | tr '\n' ' ')"
    fi
    server_stop
    got=$(listing "$d" | grep -v -e 'judge\.sqlite-\(wal\|shm\)$' -e '^\./killed\.log$' -e '^\./rerun\.log$' -e '^\./server\.' -e '^\./sold$' -e '^\./port$' -e '^\./stored$')
    # files the uninterrupted run does not have: temporaries, strays
    extra=$(comm -13 "$ref.listing" <(echo "$got"))
    if [ -n "$extra" ]; then
        TEMPS[$s]=$((TEMPS[$s] + 1))
        fail "files an uninterrupted run does not leave: $(echo "$extra" | head -n 4 | tr '\n' ' ')"
    fi
    # files it has that this run lacks: a stage's wall time (STAGE.seconds) is
    # written after its output, so a kill between the two loses it (the rerun
    # does not redo a finished stage); anything else missing is a failure
    missing=$(comm -23 "$ref.listing" <(echo "$got"))
    if [ -n "$(echo "$missing" | grep -v -e '^$' -e '\.seconds$')" ]; then
        fail "files an uninterrupted run leaves are missing: $(echo "$missing" | head -n 4 | tr '\n' ' ')"
    elif [ -n "$missing" ]; then
        TIMES[$s]=$((TIMES[$s] + $(echo "$missing" | wc -l)))
    fi
    if [ -f "$d/sold" ]; then
        a=$("$PY" "$ROOT/tests/crash/judge_audit.py" check "$d/sold" "$killed_at" "$d/stored")
        SOLD[$s]=$((SOLD[$s] + $(jq .sold <<< "$a")))
        AGAIN[$s]=$((AGAIN[$s] + $(jq .again_stored <<< "$a")))
        LOST[$s]=$((LOST[$s] + $(jq .again_lost <<< "$a")))
        TWICE[$s]=$((TWICE[$s] + $(jq .twice_in_a_run <<< "$a")))
        [ "$(jq '.again_stored + .twice_in_a_run' <<< "$a")" = 0 ] || fail "an answer bought twice: $a"
        # every answer the uninterrupted run bought was bought
        [ "$(sort -u "$d/sold")" = "$(sort -u "$ref.sold")" ] || fail "not the uninterrupted run's answers"
    fi
    if [ "$bad" = 0 ]; then rm -rf "$d"; else FAILED[$s]=$((FAILED[$s] + 1)); fi
    if (( (i + 1) % 20 == 0 )); then echo "crash-matrix: $((i + 1))/$KILLS kills, $(( ($(now_ms) - started) / 1000 )) s"; fi
done

# ---- the table --------------------------------------------------------------------
echo
echo "| stage | kills | kills that found the run ended (not counted) | reruns identical | whole at the kill | temporaries or stray files left | stage timings lost | processes left | judge answers sold | bought again though stored | bought again, lost to the kill | bought twice in one run |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
total_failed=0
for s in $STAGES; do
    [ "${N[$s]}" -gt 0 ] || continue
    j="| | | |"
    [ "$s" = make ] || [ "$s" = reward ] && j="| ${SOLD[$s]} | ${AGAIN[$s]} | ${LOST[$s]} | ${TWICE[$s]} |"
    [ "$s" = make ] || [ "$s" = reward ] || j="| | | | |"
    echo "| ${s//_/-} | ${N[$s]} | ${MISSED[$s]} | ${SAME[$s]}/${N[$s]} | ${WHOLE[$s]}/${N[$s]} | ${TEMPS[$s]} | ${TIMES[$s]} | ${PROCS[$s]} $j"
    total_failed=$((total_failed + FAILED[$s]))
done
echo
echo "crash-matrix: $KILLS kills in $(( ($(now_ms) - started) / 1000 )) s, $total_failed trials failed"
[ "$total_failed" = 0 ]
