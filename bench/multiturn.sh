#!/bin/sh
# Multi-turn rollout throughput: grpo-rollout --env on SmolLM2-135M
# against an environment that answers at once and one that answers 50 ms
# after each request (bench/env_peer.py; answered concurrently), beside
# single-turn rollout of the same prompts with --max-new-tokens = turns x the
# per-turn bound. Two rates per second of wall time (model loading
# included):
#   - completion tokens: every position of completion_tokens, what a rollout
#     puts through the model (the environment's tokens are prefilled in the
#     decode steps' forward calls; single-turn has none);
#   - sampled tokens: completion_mask 1 only, the policy's own.
# Goals: instant >= 90% of single-turn, 50 ms >= 70%. Each run is repeated
# ROUNDS times, the three interleaved, and the fastest of each is shown (the
# least disturbed by other work). No assertions: a benchmark prints.
#   BENCH_MT_PROMPTS=4 BENCH_MT_K=4 BENCH_MT_TURNS=4 BENCH_MT_TOKENS=24 BENCH_MT_THREADS=0 BENCH_MT_ROUNDS=3 sh bench/multiturn.sh
# (THREADS 0 = every core; on a machine shared with other work, 1 avoids
# OpenMP threads waiting on one another for a core)
set -eu
cd "$(dirname "$0")/.."
P=${BENCH_MT_PROMPTS:-4}
K=${BENCH_MT_K:-4}
TURNS=${BENCH_MT_TURNS:-4}
TOK=${BENCH_MT_TOKENS:-24}
THREADS=${BENCH_MT_THREADS:-0}
ROUNDS=${BENCH_MT_ROUNDS:-3}
DIR=${BENCH_DIR:-build/bench}/multiturn
MODEL=models/SmolLM2-135M-Instruct.Q4_1.gguf
PY=.venv/bin/python
[ -x "$PY" ] || PY=python3
mkdir -p "$DIR"
[ -f "$MODEL" ] || { echo "multiturn: no $MODEL (make models)"; exit 0; }
bin/grpo-prep --task arith --n "$P" --seed 1 --format plain --out "$DIR/prompts.jsonl"

run() { # NAME ARGS...: one timed run; its seconds appended to $DIR/NAME.times
    name=$1
    shift
    t0=$(date +%s.%N)
    bin/grpo-rollout --model "$MODEL" -k "$K" --batch $((P * K)) --temperature 1 --seed 3 --threads "$THREADS" \
        --in "$DIR/prompts.jsonl" --out "$DIR/$name.jsonl" "$@"
    t1=$(date +%s.%N)
    awk -v t0="$t0" -v t1="$t1" 'BEGIN { printf "%.3f\n", t1 - t0 }' >>"$DIR/$name.times"
}
rm -f "$DIR"/*.times
r=0
while [ "$r" -lt "$ROUNDS" ]; do
    run single --max-new-tokens $((TURNS * TOK))
    run instant --max-new-tokens "$TOK" --max-turns "$TURNS" --env "$PY -u bench/env_peer.py $TURNS"
    run delayed --max-new-tokens "$TOK" --max-turns "$TURNS" --env "$PY -u bench/env_peer.py $TURNS --delay 0.05"
    r=$((r + 1))
done

echo "multi-turn rollout, SmolLM2-135M Q4_1, $P prompts x k $K, $TURNS turns x $TOK tokens, batch $((P * K)), $(nproc) cores, --threads $THREADS, best of $ROUNDS"
printf '  %-24s %8s %11s %10s %7s %9s %10s %7s\n' run seconds completion "tokens/s" "vs one" sampled "tokens/s" "vs one"
base_all=0 base_sampled=0
for name in single instant delayed; do
    case $name in
    single) label="single-turn" ;;
    instant) label="multi-turn, instant env" ;;
    *) label="multi-turn, 50 ms env" ;;
    esac
    best=$(sort -n "$DIR/$name.times" | head -1)
    all=$(jq -s '[.[] | .completion_tokens | length] | add' "$DIR/$name.jsonl")
    sampled=$(jq -s '[.[] | if has("completion_mask") then (.completion_mask | add) else (.completion_tokens | length) end] | add' "$DIR/$name.jsonl")
    line=$(awk -v label="$label" -v s="$best" -v all="$all" -v sampled="$sampled" -v ba="$base_all" -v bs="$base_sampled" 'BEGIN {
        ra = all / s; rs = sampled / s
        va = ba > 0 ? sprintf("%.0f%%", 100 * ra / ba) : "-"
        vs = bs > 0 ? sprintf("%.0f%%", 100 * rs / bs) : "-"
        printf "  %-24s %8.2f %11d %10.1f %7s %9d %10.1f %7s|%f|%f\n", label, s, all, ra, va, sampled, rs, vs, ra, rs }')
    echo "$line" | cut -d'|' -f1
    if [ "$name" = single ]; then
        base_all=$(echo "$line" | cut -d'|' -f2)
        base_sampled=$(echo "$line" | cut -d'|' -f3)
    fi
done
