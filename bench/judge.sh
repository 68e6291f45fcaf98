#!/bin/sh
# The judge path: grpo-reward --fn judge against the local
# OpenAI-compatible test server (tests/ref/judge_server.py, one Python
# process) at --judge-concurrency 64. Prints requests/s and, to show the
# client is never the bottleneck, the client's CPU time per request beside
# the server's. Three runs over the same distinct records:
#   off        no cache: HTTP only
#   readwrite  a fresh cache: every answer stored in SQLite as it arrives
#   rerun      the same cache again: every record a hit, no request
# Goal: >= 2,000 requests/s. No assertions: a benchmark prints.
#   BENCH_JUDGE_N=20000 sh bench/judge.sh     (default 20000 records)
set -eu
cd "$(dirname "$0")/.."
N=${BENCH_JUDGE_N:-20000}
DIR=${BENCH_DIR:-build/bench}/judge
PY=.venv/bin/python
[ -x "$PY" ] || PY=python3
mkdir -p "$DIR"
rm -f "$DIR/port" "$DIR/cache.sqlite" "$DIR/cache.sqlite-wal" "$DIR/cache.sqlite-shm"

"$PY" tests/ref/judge_server.py --port-file "$DIR/port" > /dev/null 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT INT TERM
i=0
while [ ! -s "$DIR/port" ] && [ $i -lt 400 ]; do sleep 0.025; i=$((i + 1)); done
URL="http://127.0.0.1:$(cat "$DIR/port")/v1"

awk -v n="$N" 'BEGIN { for (i = 0; i < n; i++)
    printf "{\"id\":\"p%d\",\"sample\":%d,\"messages\":[{\"role\":\"user\",\"content\":\"What is %d + %d? Answer inside <answer></answer>.\"}],\"answer\":\"%d\",\"completion\":\"<think>add them</think><answer>%d</answer>\"}\n", i / 8, i % 8, i % 97, i % 89, i % 97 + i % 89, i }' \
    > "$DIR/in.jsonl"
printf 'Question: {prompt}\nReference answer: {answer}\nCandidate: {completion}\nScore 1-10:\n' > "$DIR/tpl.txt"

# cpu_seconds PID: user + system CPU seconds of a live process
cpu_seconds() { awk -v hz="$(getconf CLK_TCK)" '{ print ($14 + $15) / hz }' "/proc/$1/stat"; }

echo "judge path, $N distinct records, --judge-concurrency 64, --chunk 4096, local test server on $(nproc) cores"
printf '  %-10s %8s %9s %9s %10s %15s %15s\n' run seconds requests req/s records/s "client us/rec" "server us/req"
bench() { # NAME MODE
    s0=$(cpu_seconds $SERVER)
    /usr/bin/time -f '%e %U %S' -o "$DIR/time" bin/grpo-reward --fn judge --judge-url "$URL" --judge-model bench \
        --judge-template "$DIR/tpl.txt" --judge-cache "$DIR/cache.sqlite" --judge-cache-mode "$2" \
        --judge-concurrency 64 --chunk 4096 --in "$DIR/in.jsonl" --out "$DIR/out-$1.jsonl" \
        --stats "$DIR/stats-$1.json" --quiet
    s1=$(cpu_seconds $SERVER)
    read -r wall user sys < "$DIR/time"
    req=$(jq .judge.requests "$DIR/stats-$1.json")
    awk -v name="$1" -v wall="$wall" -v u="$user" -v s="$sys" -v req="$req" -v n="$N" \
        -v srv="$(echo "$s1 - $s0" | bc -l)" 'BEGIN {
        srv_per = req > 0 ? 1e6 * srv / req : 0
        printf("  %-10s %8.2f %9d %9.0f %10.0f %15.1f %15.1f\n", name, wall, req, req / wall, n / wall,
               1e6 * (u + s) / n, srv_per) }'
}
bench off off
bench readwrite readwrite
bench rerun readwrite
cmp -s "$DIR/out-off.jsonl" "$DIR/out-rerun.jsonl" && echo "  (outputs of all runs byte-identical)" || echo "  outputs differ!"
echo "  client us/rec: grpo-reward's user+system CPU per record (the whole stage: read, render, send, store, write)"
