#!/bin/sh
# OpenMP's wait policy for tools run alone, in a pipe and side by side:
# grpo-rollout on SmolLM2-135M (the quick start's model), wall seconds of
#   alone  one rollout, every core
#   pipe   grpo-rollout | grpo-reward | grpo-advantage, the quick start's pipe
#   pair   two rollouts started together, every core each (make -j, SHARDS=2)
# under each policy: the tools' default (what a user gets without setting
# anything), libgomp's own default without OMP_WAIT_POLICY (GOMP_SPINCOUNT
# 300000: a spin of 300,000 iterations before a thread sleeps), shorter
# spins (GOMP_SPINCOUNT 10000, 1000, 100), OMP_WAIT_POLICY=passive (no spin)
# and =active (spin only); BENCH_OMP_POLICIES chooses among them. The runs are interleaved ROUNDS times and the fastest of each
# shown. No assertions: a benchmark prints.
#   BENCH_OMP_PROMPTS=8 BENCH_OMP_K=4 BENCH_OMP_TOKENS=48 BENCH_OMP_ROUNDS=3 sh bench/omp_wait.sh
set -eu
cd "$(dirname "$0")/.."
P=${BENCH_OMP_PROMPTS:-8}
K=${BENCH_OMP_K:-4}
TOK=${BENCH_OMP_TOKENS:-48}
ROUNDS=${BENCH_OMP_ROUNDS:-3}
DIR=${BENCH_DIR:-build/bench}/omp_wait
MODEL=models/SmolLM2-135M-Instruct.Q4_1.gguf
mkdir -p "$DIR"
[ -f "$MODEL" ] || { echo "omp_wait: no $MODEL (make models)"; exit 0; }
bin/grpo-prep --task arith --n "$P" --seed 1 --out "$DIR/prompts.jsonl"

rollout() { # OUT: one rollout of the prompts to OUT
    bin/grpo-rollout --model "$MODEL" -k "$K" --max-new-tokens "$TOK" --temperature 1 --seed 3 \
        --in "$DIR/prompts.jsonl" --out "$1"
}
pipe() {
    rollout - | bin/grpo-reward --fn answer,format:0.2 --quiet | bin/grpo-advantage --out "$DIR/pipe.jsonl"
}
pair() {
    rollout "$DIR/a.jsonl" &
    a=$!
    rollout "$DIR/b.jsonl"
    wait "$a"
}
# policy NAME: this (sub)shell's environment for a run under that policy
policy() {
    unset OMP_WAIT_POLICY GOMP_SPINCOUNT
    case $1 in
    spin300k) export GOMP_SPINCOUNT=300000 ;;
    spin10k) export GOMP_SPINCOUNT=10000 ;;
    spin1k) export GOMP_SPINCOUNT=1000 ;;
    spin100) export GOMP_SPINCOUNT=100 ;;
    passive | active) export OMP_WAIT_POLICY="$1" ;;
    esac
}
timed() { # POLICY SCENARIO: its wall seconds appended to $DIR/SCENARIO-POLICY.times
    t0=$(date +%s.%N)
    (policy "$1" && "$2") > /dev/null 2>&1
    t1=$(date +%s.%N)
    awk -v t0="$t0" -v t1="$t1" 'BEGIN { printf "%.2f\n", t1 - t0 }' >> "$DIR/$2-$1.times"
}
alone() { rollout "$DIR/alone.jsonl"; }
POLICIES=${BENCH_OMP_POLICIES:-tools spin300k spin10k spin1k passive}
rm -f "$DIR"/*.times
r=0
while [ "$r" -lt "$ROUNDS" ]; do
    for s in alone pipe pair; do
        for p in $POLICIES; do timed "$p" "$s"; done
    done
    r=$((r + 1))
done

echo "OpenMP wait policy: grpo-rollout on SmolLM2-135M Q4_1, $P prompts x k $K, $TOK new tokens, $(nproc) cores, best of $ROUNDS (seconds)"
printf '  %-8s' policy
for s in alone pipe pair; do printf ' %8s' "$s"; done
echo
for p in $POLICIES; do
    printf '  %-8s' "$p"
    for s in alone pipe pair; do printf ' %8s' "$(sort -n "$DIR/$s-$p.times" | head -n 1)"; done
    echo
done
