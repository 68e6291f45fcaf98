#!/bin/sh
# Rule rewards and the judge cache.
# 1. bench_reward: answer + format + length inside the library on one core,
#    next to the ceiling of any per-record function (parsing and decoding the
#    record alone). Goal: >= 200k records/s.
# 2. End to end: grpo-reward --fn answer,format,length over the same records
#    as a JSONL file, next to the Python peer bench/reward_peer.py (the same
#    three rewards written as TRL / open-r1 write reward functions).
# 3. bench_judge_cache: lookups/s in a 100k-entry cache. Goal: >= 100k/s.
#   BENCH_REWARD_N=200000 sh bench/reward.sh
set -eu
cd "$(dirname "$0")/.."
N=${BENCH_REWARD_N:-200000}
DIR=${BENCH_DIR:-build/bench}/reward
mkdir -p "$DIR"

echo "rule rewards (one core):"
build/bench/bench_reward 16384 2 | sed 's/^/  /'

IN="$DIR/in-$N.jsonl"
[ -f "$IN" ] || { build/bench/bench_reward --emit "$N" > "$IN.tmp" && mv "$IN.tmp" "$IN"; }
MB=$(($(wc -c < "$IN") / 1000000))
best_of3() {
    b=999999
    for _ in 1 2 3; do
        /usr/bin/time -f %e -o "$DIR/t" "$@" < "$IN" > "$DIR/out.jsonl"
        b=$(echo "t=$(cat "$DIR/t"); if (t < $b) t else $b" | bc -l)
    done
    echo "$b"
}
ours=$(best_of3 bin/grpo-reward --fn answer,format,length --max-len 160 --overlong-buffer 32 --quiet)
ceiling=$(best_of3 bin/grpo-reward --fn length --max-len 160 --overlong-buffer 32 --quiet)
PY=.venv/bin/python
[ -x "$PY" ] || PY=python3
peer=$(best_of3 "$PY" bench/reward_peer.py)
echo "end to end, $N records ($MB MB of JSONL), best of 3, one core:"
awk -v n="$N" -v o="$ours" -v c="$ceiling" -v p="$peer" 'BEGIN {
    printf("  %-58s %7.2f s %9.0f records/s\n", "grpo-reward --fn answer,format,length", o, n / o)
    printf("  %-58s %7.2f s %9.0f records/s  (ours at %.0f%% of it)\n", "ceiling: grpo-reward --fn length (read, count, write)", c, n / c, 100 * c / o)
    printf("  %-58s %7.2f s %9.0f records/s  (ours %.1fx faster)\n", "peer: Python re + json (bench/reward_peer.py)", p, n / p, p / o)
}'

echo "judge cache, 100k entries:"
build/bench/bench_judge_cache 100000 200000 | sed 's/^/  /' | grep -v '^  {'
