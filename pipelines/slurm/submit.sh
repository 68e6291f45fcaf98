#!/bin/bash
# Submits a GRPO run to Slurm: per step an array job of rollout+reward
# shards, then a data-parallel update step depending on it; each step
# depends on the one before. Resumable like the make run: a step whose
# checkpoint exists is not submitted again, and the jobs themselves are make
# targets, so a step cut short redoes only what is missing. The run
# directory and the checkout must be on a file system every node sees.
#
#   pipelines/slurm/submit.sh RUN STEPS SHARDS RANKS
#
# RUN/config.mk holds the run's settings (pipelines/grpo.mk); RANKS is the
# number of MPI ranks of each update (--ntasks; --zero 1 in the run's
# UPDATE_FLAGS shards the AdamW state across them); more sbatch options (partition,
# account, time) go in SBATCH_* environment variables, which sbatch reads.
set -euo pipefail
if [ $# -ne 4 ]; then
    echo "usage: $0 RUN STEPS SHARDS RANKS" >&2
    exit 64
fi
run=$1 steps=$2 shards=$3 ranks=$4
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
mk=(make -f "$root/pipelines/grpo.mk" RUN="$run" SHARDS="$shards" STEPS="$steps")
"${mk[@]}" prompts                      # the prompt set and its slices, once, here
export GRPO_ROOT="$root" RUN="$run" SHARDS="$shards"
prev=
for n in $(seq 0 $((steps - 1))); do
    step=$(printf %04d "$n") next=$(printf %04d $((n + 1)))
    [ -e "$run/ckpt/$next/grpo/state.json" ] && continue   # done in an earlier submission
    a=$(STEP=$n sbatch --parsable ${prev:+--dependency=afterok:$prev} --array=0-$((shards - 1)) \
        --export=ALL,STEP="$n" "$here/grpo-shards.sbatch")
    prev=$(sbatch --parsable --dependency=afterok:"$a" --ntasks="$ranks" \
        --export=ALL,STEPNAME="$step" "$here/grpo-step.sbatch")
    echo "step $step: shards job $a, update job $prev" >&2
done
if [ -n "$prev" ]; then
    sbatch --parsable --dependency=afterok:"$prev" --wrap "${mk[*]}" > /dev/null   # evaluations, metrics.jsonl
fi
