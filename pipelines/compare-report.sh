#!/bin/bash
# compare-report.sh OUT RUN...: the table and the plot of pipelines/compare.mk.
#   OUT/compare.md   one row per run (ALGO-seedS, a grpo.mk run under OUT): held-out greedy
#                    accuracy of checkpoint 0 and of the last checkpoint (eval/accuracy of
#                    eval/NNNN.json), the mean reward of the last step, the training's wall
#                    time (the sum of the steps' *.seconds, fill rounds included); then one
#                    row per algorithm with the means over its seeds
#   OUT/reward.png   one panel per algorithm: each seed's mean reward per step (lines) and
#                    held-out accuracy (points), gnuplot
# A run without its last evaluation is left out of the table, named on stderr. Both files
# are written to a temporary name and renamed.
set -euo pipefail
[ $# -ge 2 ] || { echo "compare-report.sh: usage: compare-report.sh OUT RUN..." >&2; exit 64; }
out=$1
shift
command -v gnuplot > /dev/null || { echo "compare-report.sh: gnuplot is not installed" >&2; exit 69; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp" "$out/compare.md.tmp" "$out/.reward.png.tmp"' EXIT

# one TSV row per finished run: algo seed acc0 acc_last last_step reward_last seconds
for r in "$@"; do
    d=$out/$r
    last=$(ls "$d"/eval/[0-9][0-9][0-9][0-9].json 2> /dev/null | sort | tail -n 1 || true)
    steps=$(ls -d "$d"/steps/[0-9][0-9][0-9][0-9] 2> /dev/null | wc -l)
    if [ -z "$last" ] || [ ! -e "$d/eval/0000.json" ] || [ "$(basename "$last" .json)" != "$(printf %04d "$steps")" ] ||
        [ ! -s "$d/metrics.jsonl" ]; then
        echo "compare-report.sh: $r is not finished (no evaluation of its last checkpoint): left out" >&2
        continue
    fi
    secs=$(find "$d/steps" -name '*.seconds' -exec cat {} + | awk '{ s += $1 } END { printf "%.0f", s }')
    jq -r -n --arg algo "${r%-seed*}" --arg seed "${r##*-seed}" --arg secs "$secs" \
        --slurpfile e0 "$d/eval/0000.json" --slurpfile el "$last" --slurpfile m "$d/metrics.jsonl" '
        ($m | map(select(has("loss"))) | last) as $u |
        [$algo, $seed, $e0[0]."eval/accuracy", $el[0]."eval/accuracy", $el[0].step, $u.reward, $secs] | @tsv'
    # the curves: step, reward (update lines); step, held-out accuracy (eval lines)
    jq -r 'select(has("loss")) | [.step, .reward] | @tsv' "$d/metrics.jsonl" > "$tmp/$r.reward"
    jq -r 'select(.kind == "eval") | [.step, ."eval/accuracy"] | @tsv' "$d/metrics.jsonl" > "$tmp/$r.acc"
done > "$tmp/rows.tsv"
[ -s "$tmp/rows.tsv" ] || { echo "compare-report.sh: no finished run under $out" >&2; exit 65; }

{
    echo "| algorithm | seed | held-out accuracy, checkpoint 0 | held-out accuracy, last | last step's mean reward | training wall time (s) |"
    echo "|---|---|---|---|---|---|"
    awk -F'\t' '{ printf "| %s | %s | %.3f | %.3f (step %d) | %.3f | %d |\n", $1, $2, $3, $4, $5, $6, $7 }' "$tmp/rows.tsv"
    awk -F'\t' '{ n[$1]++; a0[$1] += $3; a[$1] += $4; rw[$1] += $6; s[$1] += $7; if (!($1 in seen)) { seen[$1] = 1; order[++k] = $1 } }
        END { for (i = 1; i <= k; i++) { x = order[i]
            printf "| **%s** (mean of %d) | | %.3f | %.3f | %.3f | %d |\n", x, n[x], a0[x] / n[x], a[x] / n[x], rw[x] / n[x], s[x] / n[x] } }' \
        "$tmp/rows.tsv"
} > "$out/compare.md.tmp"

# the plot: a panel per algorithm
algos=$(cut -f1 "$tmp/rows.tsv" | awk '!seen[$0]++')
n=$(printf '%s\n' "$algos" | wc -l)
cols=$(( n < 2 ? 1 : 2 )); rows=$(( (n + cols - 1) / cols ))
{
    echo "set terminal pngcairo size $((cols * 600)),$((rows * 420)) font ',10'"
    echo "set output '$out/.reward.png.tmp'"
    echo "set multiplot layout $rows,$cols title 'arith demo settings: mean reward per step (lines), held-out accuracy (points)'"
    echo "set xlabel 'step'; set key bottom right; set grid"
    for a in $algos; do
        plots=() k=0
        while IFS=$'\t' read -r algo seed _; do
            [ "$algo" = "$a" ] || continue
            k=$((k + 1)) # one colour per seed
            plots+=("'$tmp/$algo-seed$seed.reward' using 1:2 with lines lw 2 lc $k title 'reward, seed $seed'")
            plots+=("'$tmp/$algo-seed$seed.acc' using 1:2 with points pt 7 ps 1.3 lc $k title 'held-out acc, seed $seed'")
        done < "$tmp/rows.tsv"
        echo "set title '$a'"
        (IFS=,; echo "plot ${plots[*]}")
    done
    echo "unset multiplot"
} > "$tmp/plot.gp"
gnuplot "$tmp/plot.gp"
mv "$out/compare.md.tmp" "$out/compare.md"
mv "$out/.reward.png.tmp" "$out/reward.png"
cat "$out/compare.md"
