#!/bin/bash
# prune.sh RUN KEEP KEEP_RECORDS 'EVAL_IDS': retention of a grpo.mk run.
# KEEP > 0: deletes the checkpoints RUN/ckpt/NNNN older than the last KEEP,
# except one whose evaluation (NNNN in EVAL_IDS) is not written yet (it goes
# at a later call), and with each its adapter's export RUN/server/lora/NNNN
# (SERVER_SYNC=lora). Checkpoint 0 is MODEL itself, never in RUN. KEEP_RECORDS
# = 0: deletes the rollouts, scored, filled and batch files (and the fill/
# rounds of FILL_NONFLAT) of each step whose
# checkpoint is written (its metrics.jsonl exists). A checkpoint is first
# renamed out of the way, then removed, so a kill leaves it whole or gone.
set -eu
[ $# -eq 4 ] || { echo "prune.sh: usage: prune.sh RUN KEEP KEEP_RECORDS 'EVAL_IDS'" >&2; exit 64; }
run=$1 keep=$2 keep_records=$3 evals=$4

rm -rf "$run"/ckpt/.[0-9]*.del
if [ "$keep" -gt 0 ] && [ -d "$run/ckpt" ]; then
    latest=0
    for d in "$run"/ckpt/[0-9][0-9][0-9][0-9]; do
        n=${d##*/}
        if [ -e "$d/grpo/state.json" ] && [ "$((10#$n))" -gt "$latest" ]; then latest=$((10#$n)); fi
    done
    for d in "$run"/ckpt/[0-9][0-9][0-9][0-9]; do
        [ -d "$d" ] || continue
        n=${d##*/}
        [ "$((10#$n))" -le "$((latest - keep))" ] || continue
        case " $evals " in *" $n "*) [ -e "$run/eval/$n.json" ] || continue ;; esac
        rm -rf "$run/server/lora/$n" "$run/server/lora/$n.log"
        mv "$d" "$run/ckpt/.$n.del"
        rm -rf "$run/ckpt/.$n.del"
    done
fi
if [ "$keep_records" = 0 ] && [ -d "$run/steps" ]; then
    for d in "$run"/steps/[0-9][0-9][0-9][0-9]; do
        [ -e "$d/metrics.jsonl" ] || continue
        rm -f "$d"/rollouts*.jsonl.zst "$d"/scored*.jsonl.zst "$d"/batch.jsonl.zst "$d"/filled.jsonl.zst
        rm -rf "$d"/fill
    done
fi
