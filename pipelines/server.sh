#!/bin/bash
# server.sh: the inference server of a grpo.mk run with SERVER_SYNC=restart.
#
#   server.sh ensure RUN N MODEL   the server at $ROLLOUT_SERVER serves checkpoint N,
#                                  whose weights are MODEL (step 0's: grpo.mk's MODEL)
#   server.sh stop RUN             the server this run started is stopped
#
# ensure, unless the server this run started is alive and serves N: writes N's
# export (RUN/server/NNNN.gguf or RUN/server/NNNN/, grpo-export --format
# $SERVER_EXPORT --dtype $SERVER_DTYPE; step 0's MODEL as it is when it is
# already of that format), stops the old server (TERM, KILL after 30 s),
# starts $SERVER_CMD (sh -c, in its own session so that it outlives make's
# recipe; GRPO_SERVER_MODEL holds the export's path) and waits until GET
# $ROLLOUT_SERVER/v1/models answers 200, at most $SERVER_WAIT seconds (then,
# or when the command dies first, 69 with the end of its log,
# RUN/server/server.log). Then the exports of other checkpoints go.
# RUN/server/pid holds the server's pid and start time (a pid reused by
# another process is not taken for it), RUN/server/serving the checkpoint
# it serves once it answers. A lock serialises shards of one step.
# Environment: ROLLOUT_SERVER, SERVER_CMD, SERVER_EXPORT, SERVER_DTYPE,
# SERVER_WAIT, GRPO_BIN.
set -euo pipefail
die() { echo "server.sh: $2" >&2; exit "$1"; }
[ $# -ge 2 ] || die 64 "usage: server.sh ensure RUN N MODEL | server.sh stop RUN"
cmd=$1 run=$2
dir=$run/server
mkdir -p "$dir"

# the start time of process $1 (field 22 of /proc/PID/stat), empty when it is gone (or a zombie)
started() { [ -r "/proc/$1/stat" ] && sed 's/^.*) //' "/proc/$1/stat" | awk '$1 != "Z" { print $20 }' || true; }
# the server this run started, when it still runs: its pid
alive() {
    [ -s "$dir/pid" ] || return 1
    local pid start
    read -r pid start < "$dir/pid"
    [ -n "$pid" ] && [ "$(started "$pid")" = "$start" ] && echo "$pid"
}
stop() {
    local pid i
    pid=$(alive) || { rm -f "$dir/pid" "$dir/serving"; return 0; }
    kill -TERM -- "-$pid" 2> /dev/null || kill -TERM "$pid" 2> /dev/null || true
    for ((i = 0; i < 300; i++)); do
        [ "$(started "$pid")" ] || break
        sleep 0.1
    done
    [ -z "$(started "$pid")" ] || kill -KILL -- "-$pid" 2> /dev/null || kill -KILL "$pid" 2> /dev/null || true
    rm -f "$dir/pid" "$dir/serving"
}
answers() { curl -sf -o /dev/null --max-time 5 "${ROLLOUT_SERVER%/}/v1/models"; }

case $cmd in
stop)
    exec 9> "$dir/lock"
    flock 9
    stop
    exit 0
    ;;
ensure) [ $# -eq 4 ] || die 64 "usage: server.sh ensure RUN N MODEL" ;;
*) die 64 "unknown command $cmd" ;;
esac
n=$3 model=$4
: "${ROLLOUT_SERVER:?}" "${SERVER_CMD:?SERVER_CMD is empty: SERVER_SYNC=restart needs the command that starts the server}"
exec 9> "$dir/lock"
flock 9
if alive > /dev/null && [ "$(cat "$dir/serving" 2> /dev/null)" = "$n" ] && answers; then exit 0; fi

# the weights to serve
case $SERVER_EXPORT in
gguf) out=$dir/$n.gguf; as_is=$([[ $model == *.gguf && -f $model ]] && echo 1 || true) ;;
hf) out=$dir/$n; as_is=$([[ -f $model/config.json && ! -d $model/grpo ]] && echo 1 || true) ;;
*) die 64 "SERVER_EXPORT: expected gguf or hf, got '$SERVER_EXPORT'" ;;
esac
if [ "$n" = 0000 ] && [ -n "$as_is" ]; then
    serve=$model
else
    serve=$out
    [ -e "$out" ] || "$GRPO_BIN/grpo-export" --model "$model" --format "$SERVER_EXPORT" --dtype "$SERVER_DTYPE" --out "$out"
fi

stop
# another server there would answer for the one started below
! answers || die 69 "$ROLLOUT_SERVER answers though this run's server is stopped: SERVER_CMD's must be the only one there"
echo "server.sh: starting the server of checkpoint $n ($serve): $SERVER_CMD" >> "$dir/server.log"
# without the locks' descriptors: this lock's (9) and grpo.mk's rollout lock (8), which the server,
# outliving the recipe, would otherwise hold for as long as it runs
GRPO_SERVER_MODEL=$serve setsid sh -c "$SERVER_CMD" < /dev/null >> "$dir/server.log" 2>&1 8>&- 9>&- &
pid=$!
echo "$pid $(started "$pid")" > "$dir/pid"
deadline=$((SECONDS + ${SERVER_WAIT:-600}))
until answers; do
    if [ -z "$(started "$pid")" ]; then
        tail -n 20 "$dir/server.log" >&2
        rm -f "$dir/pid"
        die 69 "SERVER_CMD exited before $ROLLOUT_SERVER answered (the end of $dir/server.log above)"
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
        stop
        tail -n 20 "$dir/server.log" >&2
        die 69 "$ROLLOUT_SERVER did not answer within SERVER_WAIT=${SERVER_WAIT:-600} s of starting SERVER_CMD"
    fi
    sleep 0.2
done
[ -n "$(started "$pid")" ] || die 69 "SERVER_CMD exited after $ROLLOUT_SERVER answered (the end of $dir/server.log above)"
echo "$n" > "$dir/serving"
for f in "$dir"/[0-9][0-9][0-9][0-9] "$dir"/[0-9][0-9][0-9][0-9].gguf; do
    [ -e "$f" ] && [ "$f" != "$serve" ] && rm -rf "$f"
done
exit 0
