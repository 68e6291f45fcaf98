#!/bin/sh
# Data-parallel grpo-update on this machine: one full fine-tuning
# step of SmolLM2-135M on 16 completions (4 prompts x 4, 32 + 64 tokens),
#   1 rank x 2 threads   (the peer: one process using both cores)
#   2 ranks x 1 thread   (mpirun --bind-to core) through Open MPI's TCP
#                        transport on the loopback interface, whose counter
#                        gives the bytes each rank sent in one step (against
#                        the ring all-reduce's 2 (N-1)/N x 4 x parameters)
#   2 ranks x 1 thread, --zero 1, over shared memory
#   2 ranks x 1 thread, --group-sums, over shared memory (float64 sums: the
#                        one-process step to float64 rounding)
# Prints each one's step time (the second of --iterations 2, so loading is
# not in it), the ratio to the peer (goal >= 0.9), the CPU seconds of all
# ranks together (load included), and every rank's peak RSS. No assertions:
# a benchmark prints.
#   sh bench/mpi.sh [MODEL.gguf]
set -eu
cd "$(dirname "$0")/.."
MODEL=${1:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
OUT=${BENCH_DIR:-build/bench}/mpi
PY=.venv/bin/python
mkdir -p "$OUT"
if [ ! -f "$MODEL" ]; then
    echo "bench/mpi.sh: $MODEL missing (make models); skipped" >&2
    exit 0
fi
if ! command -v mpirun > /dev/null; then
    echo "bench/mpi.sh: no mpirun (make deps installs openmpi-bin); skipped" >&2
    exit 0
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
"$PY" bench/make_batch.py "$OUT/batch.jsonl" 4 4 32 64
# an f32 HF directory, as every checkpoint after the first is (no GGUF
# dequantisation in the measured runs)
[ -e "$OUT/smol-hf/model.safetensors" ] || bin/grpo-export --model "$MODEL" --format hf --dtype f32 --out "$OUT/smol-hf"
flags="--model $OUT/smol-hf --in $OUT/batch.jsonl --lr 1e-5 --beta 0"
# step_seconds METRICS: the second step's seconds
step_seconds() { sed -n '2s/.*"seconds":\([0-9.e+-]*\).*/\1/p' "$1"; }
# rss_list PREFIX: every rank's peak RSS in MiB; cpu_sum PREFIX: CPU seconds of all ranks
rss_list() { for f in "$1".*; do awk '{ printf "%.0f ", $1 / 1024 }' "$f"; done; }
cpu_sum() { cat "$1".* | awk '{ s += $2 + $3 } END { printf "%.1f", s }'; }
lo_tx() { awk '$1 == "lo:" { print $10 }' /proc/net/dev; }
# two_ranks NAME ITERATIONS MPIRUN-FLAGS...: a 2-rank run, one thread each
two_ranks() {
    name=$1 it=$2
    extra=${extra:-}
    shift 2
    mpirun --bind-to core -np 2 "$@" sh -c '/usr/bin/time -f "%M %U %S" -o "$0.$OMPI_COMM_WORLD_RANK" "$@"' \
        "$OUT/rss-$name" bin/grpo-update $flags --iterations "$it" --threads 1 $extra --out "$OUT/c-$name" \
        --metrics "$OUT/m-$name.jsonl" 2> "$OUT/$name.log"
}

rm -rf "$OUT"/c-* "$OUT"/m-*.jsonl "$OUT"/rss-*
/usr/bin/time -f "%M %U %S" -o "$OUT/rss-one.0" bin/grpo-update $flags --iterations 2 --threads 2 --out "$OUT/c-one" \
    --metrics "$OUT/m-one.jsonl" 2> "$OUT/one.log"
# 2 ranks through Open MPI's TCP transport on the loopback interface, whose
# counter gives the bytes sent: a run of 2 steps less a run of 1 is one step
tcp="--mca btl self,tcp --mca btl_tcp_if_include lo"
b0=$(lo_tx)
# shellcheck disable=SC2086
two_ranks wire 1 $tcp
b1=$(lo_tx)
# shellcheck disable=SC2086
two_ranks z0 2 $tcp
b2=$(lo_tx)
extra="--zero 1" two_ranks z1 2
extra="--group-sums" two_ranks gs 2
step_bytes=$(( (b2 - b1 - (b1 - b0)) / 2 ))
params=134515008   # SmolLM2-135M (tied embeddings)
one=$(step_seconds "$OUT/m-one.jsonl")
z0=$(step_seconds "$OUT/m-z0.jsonl")
z1=$(step_seconds "$OUT/m-z1.jsonl")
gs=$(step_seconds "$OUT/m-gs.jsonl")
echo "grpo-update, SmolLM2-135M full fine-tuning, 16 x (32 + 64) tokens, the second of 2 steps:"
printf '  %-34s %8s %7s %11s   %s\n' layout seconds "1x2/it" "CPU s (all)" "peak RSS per rank (MiB)"
printf '  %-34s %8.2f %7s %11s   %s\n' "1 rank x 2 threads" "$one" 1.00 "$(cpu_sum "$OUT/rss-one")" "$(rss_list "$OUT/rss-one")"
printf '  %-34s %8.2f %7.2f %11s   %s\n' "2 ranks x 1 thread (TCP loopback)" "$z0" "$(echo "$one / $z0" | bc -l)" \
    "$(cpu_sum "$OUT/rss-z0")" "$(rss_list "$OUT/rss-z0")"
printf '  %-34s %8.2f %7.2f %11s   %s\n' "2 ranks x 1 thread, --zero 1 (shm)" "$z1" "$(echo "$one / $z1" | bc -l)" \
    "$(cpu_sum "$OUT/rss-z1")" "$(rss_list "$OUT/rss-z1")"
printf '  %-34s %8.2f %7.2f %11s   %s\n' "2 ranks x 1 thread, --group-sums" "$gs" "$(echo "$one / $gs" | bc -l)" \
    "$(cpu_sum "$OUT/rss-gs")" "$(rss_list "$OUT/rss-gs")"
echo "  bytes each rank sent in one step (loopback TCP): $step_bytes; ring all-reduce model 2 (N-1)/N 4 P:" \
    "$(( 2 * 4 * params / 2 ))"
echo "kv mpi one_s=$one two_s=$z0 two_zero_s=$z1 two_group_sums_s=$gs bytes_per_rank_step=$step_bytes" \
    "rss_one=\"$(rss_list "$OUT/rss-one")\" rss_two=\"$(rss_list "$OUT/rss-z0")\" rss_two_zero=\"$(rss_list "$OUT/rss-z1")\" rss_two_group_sums=\"$(rss_list "$OUT/rss-gs")\""
