# tests/crash/lib.sh: the crash matrix's fixture and checks (sourced by
# crash-matrix.sh). Needs ROOT, WORK, PY set.

# fixture DIR: the tiny random llama (context 512, for three turns), a wider
# one (width 512, 8 layers: 76 MB, so that exporting it takes a while), the
# guess-the-number prompts, a judge template
fixture() {
    local d=$1
    mkdir -p "$d"
    "$PY" "$ROOT/tests/ref/model_ref.py" make-tiny llama "$d/tiny" > /dev/null
    "$PY" "$ROOT/tests/ref/make_tiny_tokenizer.py" "$d/tiny" > /dev/null
    "$PY" -c 'import sys; sys.path.insert(0, sys.argv[1]); import model_ref
model_ref.TINY.update(hidden_size=512, intermediate_size=1024, num_hidden_layers=8, num_attention_heads=8,
                      num_key_value_heads=4)
model_ref.make_tiny("llama", sys.argv[2])' "$ROOT/tests/ref" "$d/wide" > /dev/null
    "$PY" "$ROOT/tests/ref/make_tiny_tokenizer.py" "$d/wide" > /dev/null
    jq '.max_position_embeddings = 512' "$d/tiny/config.json" > "$d/c.json" && mv "$d/c.json" "$d/tiny/config.json"
    python3 "$ROOT/scripts/env/guess.py" --prompts 24 --seed 1 --max 9 > "$d/guess.jsonl"
    printf 'Rate this answer from 1 to 10.\nQuestion: {prompt}\nAnswer: {completion}\n' > "$d/judge.txt"
}

# server_start DIR [FLAGS...]: tests/ref/judge_server.py in the background with
# its --log and --sold in DIR; sets SERVER_PID and PORT
server_start() {
    local d=$1 i
    shift
    rm -f "$d/port"
    "$PY" "$ROOT/tests/ref/judge_server.py" --port-file "$d/port" --log "$d/server.log" --sold "$d/sold" \
        --retry-after 0 --slow 0.6 --slow-body 0.2 "$@" > /dev/null 2> "$d/server.err" &
    SERVER_PID=$!
    for ((i = 0; i < 400; i++)); do
        [ -s "$d/port" ] && break
        sleep 0.025
    done
    PORT=$(cat "$d/port") || return 1
    touch "$d/sold"
}
server_stop() {
    [ -n "${SERVER_PID:-}" ] || return 0
    kill "$SERVER_PID" 2> /dev/null
    wait "$SERVER_PID" 2> /dev/null
    SERVER_PID=
}

# listing DIR: every path under DIR, relative, sorted; the TensorBoard event
# file's name (it holds a time and a host) as events.out.tfevents.*
listing() {
    (cd "$1" && find . -mindepth 1 | sed 's|events\.out\.tfevents\.[^/]*$|events.out.tfevents.*|' | LC_ALL=C sort)
}

# untimed FILE: metrics lines without the wall-clock fields
untimed() { jq -c 'del(.seconds, .tokens_per_second, ."eval/seconds")' "$1"; }

# left_behind TAG: processes still running whose environment holds CRASH_TAG=TAG
left_behind() {
    local p n=0
    for p in /proc/[0-9]*; do
        [ "${p#/proc/}" != "$$" ] || continue
        if { tr '\0' '\n' < "$p/environ"; } 2> /dev/null | grep -qx "CRASH_TAG=$1"; then n=$((n + 1)); fi
    done
    echo "$n"
}

# settle TAG: waits up to 3 s for the processes of TAG to end; prints how many remain
settle() {
    local i n
    for ((i = 0; i < 30; i++)); do
        n=$(left_behind "$1")
        [ "$n" = 0 ] && break
        sleep 0.1
    done
    echo "$n"
}

# delay_ms MAX: a random delay in [0, MAX] ms (bash's RANDOM, seeded)
delay_ms() { echo $(( (RANDOM * 32768 + RANDOM) % ($1 + 1) )); }

# now_ms: milliseconds since the epoch
now_ms() { local t=$EPOCHREALTIME; echo $(( ${t%.*} * 1000 + 10#${t#*.} / 1000 )); }

# wait_for PID MS: returns when PID has ended or MS milliseconds have passed,
# polling every 5 ms without starting a process (read -t on a pipe nobody writes)
wait_for() {
    local t=$EPOCHREALTIME fd
    local end=$(( ${t%.*} * 1000000 + 10#${t#*.} + $2 * 1000 ))
    exec {fd}<> <(:)
    while kill -0 "$1" 2> /dev/null; do
        t=$EPOCHREALTIME
        (( ${t%.*} * 1000000 + 10#${t#*.} < end )) || break
        read -r -t 0.005 -u "$fd" _ || :
    done
    exec {fd}>&-
}
