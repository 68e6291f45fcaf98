#!/bin/sh
# Multi-turn rollout throughput (issue 17): grpo-rollout --env on SmolLM2-135M
# against an environment that answers at once and one that answers 50 ms
# after each request (bench/env_peer.py; answered concurrently), beside
# single-turn rollout of the same prompts with --max-new-tokens = turns x the
# per-turn bound. The rate compared is sampled tokens (completion_mask 1)
# per second of wall time; the environment's tokens are prefilled, not
# counted. Goals: instant >= 90% of single-turn, 50 ms >= 70%. No
# assertions: a benchmark prints.
#   BENCH_MT_PROMPTS=4 BENCH_MT_K=4 BENCH_MT_TURNS=4 BENCH_MT_TOKENS=24 BENCH_MT_THREADS=0 sh bench/multiturn.sh
# (THREADS 0 = every core; on a machine shared with other work, 1 avoids
# OpenMP threads waiting on one another for a core)
set -eu
cd "$(dirname "$0")/.."
P=${BENCH_MT_PROMPTS:-4}
K=${BENCH_MT_K:-4}
TURNS=${BENCH_MT_TURNS:-4}
TOK=${BENCH_MT_TOKENS:-24}
THREADS=${BENCH_MT_THREADS:-0}
DIR=${BENCH_DIR:-build/bench}/multiturn
MODEL=models/SmolLM2-135M-Instruct.Q4_1.gguf
PY=.venv/bin/python
[ -x "$PY" ] || PY=python3
mkdir -p "$DIR"
[ -f "$MODEL" ] || { echo "multiturn: no $MODEL (make models)"; exit 0; }
bin/grpo-prep --task arith --n "$P" --seed 1 --format plain --out "$DIR/prompts.jsonl"

echo "multi-turn rollout, SmolLM2-135M Q4_1, $P prompts x k $K, $TURNS turns x $TOK tokens, batch $((P * K)), $(nproc) cores, --threads $THREADS"
printf '  %-24s %8s %14s %12s %9s\n' run seconds "sampled tokens" tokens/s "vs single"
single=0
run() { # NAME OUT ARGS...
    name=$1 out=$2
    shift 2
    t0=$(date +%s.%N)
    bin/grpo-rollout --model "$MODEL" -k "$K" --batch $((P * K)) --temperature 1 --seed 3 --threads "$THREADS" \
        --in "$DIR/prompts.jsonl" --out "$DIR/$out" "$@"
    t1=$(date +%s.%N)
    n=$(jq -s '[.[] | if has("completion_mask") then (.completion_mask | add) else (.completion_tokens | length) end] | add' "$DIR/$out")
    awk -v name="$name" -v t0="$t0" -v t1="$t1" -v n="$n" -v single="$single" 'BEGIN {
        s = t1 - t0; rate = n / s
        printf "  %-24s %8.2f %14d %12.1f %9s\n", name, s, n, rate, (single > 0 ? sprintf("%.0f%%", 100 * rate / single) : "-") }'
    [ "$single" != 0 ] || single=$(awk -v t0="$t0" -v t1="$t1" -v n="$n" 'BEGIN { print n / (t1 - t0) }')
}
run "single-turn" single.jsonl --max-new-tokens $((TURNS * TOK))
run "multi-turn, instant env" instant.jsonl --max-new-tokens "$TOK" --max-turns "$TURNS" \
    --env "$PY -u bench/env_peer.py $TURNS"
run "multi-turn, 50 ms env" delayed.jsonl --max-new-tokens "$TOK" --max-turns "$TURNS" \
    --env "$PY -u bench/env_peer.py $TURNS --delay 0.05"
