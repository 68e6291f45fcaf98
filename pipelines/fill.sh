#!/bin/bash
# fill.sh: DAPO's dynamic sampling for pipelines/grpo.mk (FILL_NONFLAT=1).
# A group whose rewards are all equal carries no gradient; DAPO keeps drawing
# prompts until the batch holds PROMPTS_PER_STEP groups that do.
#
#   fill.sh prompts SET OUT P KEY USED...
#       OUT: P records of the prompt set SET whose ids are in none of the USED
#       prompt files, walking SET (and wrapping around) from the position
#       SHA-256(KEY) mod |SET|. Fewer when SET runs out of unused ids.
#   fill.sh ids SCORED OUT ADVANTAGE-COMMAND...
#       OUT: the ids (as JSON strings, one a line) of the non-flat groups of
#       SCORED, by ADVANTAGE-COMMAND --drop-flat (the run's grpo-advantage,
#       so flatness is what its flags make it: --multi-objective included).
#   fill.sh run STEPDIR P ROUNDS MAKE-COMMAND...
#       Round 0 is the step's own files (STEPDIR/scored.jsonl.zst); round R
#       lives in STEPDIR/fill/RR/. While fewer than P non-flat groups are in
#       hand and fewer than ROUNDS rounds are drawn, MAKE-COMMAND makes the
#       next round's nonflat.ids (and so its prompts, rollouts and scored
#       records, each cached as a file). Then STEPDIR/filled.jsonl.zst holds
#       P groups in draw order: the first P non-flat ones, then, only when
#       the rounds ran out, flat ones to make up P; and STEPDIR/fill.json
#       the counts (formats/metrics.md).
#
# Every output is written to a temporary name and renamed, so a kill leaves a
# finished file or none; a rerun remakes only what is missing.
set -euo pipefail

die() { echo "fill.sh: $*" >&2; exit 64; }

# ids_of FILE: the id of every record of FILE (plain or zstd), as JSON, one a line
ids_of() { zstd -dcf "$1" | jq -c '.id'; }

prompts() {
    [ $# -ge 4 ] || die "usage: fill.sh prompts SET OUT P KEY USED..."
    local set=$1 out=$2 p=$3 key=$4
    shift 4
    local n start
    n=$(awk 'END { print NR }' "$set")
    start=0
    if [ "$n" -gt 0 ]; then
        start=$(( 0x$(printf '%s' "$key" | sha256sum | cut -c1-14) % n ))
    fi
    trap 'rm -f "$out.tmp"' EXIT
    # the used ids, a separator (no JSON string), then the set's ids in line order
    { for u in "$@"; do ids_of "$u"; done; echo '#set'; ids_of "$set"; } |
        awk -v start="$start" -v p="$p" -v n="$n" -v set="$set" '
            !in_set && $0 == "#set" { in_set = 1; next }
            !in_set { used[$0] = 1; next }
            { id[NR_SET++] = $0 }
            END {
                while ((getline line < set) > 0) text[k++] = line
                for (i = 0; i < n && taken < p; i++) {
                    j = (start + i) % n
                    if (!(id[j] in used)) { print text[j]; used[id[j]] = 1; taken++ }
                }
            }' > "$out.tmp"
    mv "$out.tmp" "$out"
    trap - EXIT
}

ids() {
    [ $# -ge 3 ] || die "usage: fill.sh ids SCORED OUT ADVANTAGE-COMMAND..."
    local scored=$1 out=$2
    shift 2
    trap 'rm -f "$out.tmp"' EXIT
    "$@" --drop-flat --in "$scored" --out - | jq -c '.id' | uniq > "$out.tmp"
    mv "$out.tmp" "$out"
    trap - EXIT
}

run() {
    [ $# -ge 4 ] || die "usage: fill.sh run STEPDIR P ROUNDS MAKE-COMMAND..."
    local dir=$1 p=$2 rounds=$3
    shift 3
    [ "$rounds" -ge 1 ] 2> /dev/null || die "FILL_ROUNDS: expected a number >= 1, got '$rounds'"
    local r=0 d nonflat=0 dirs=()
    while :; do
        if [ "$r" -eq 0 ]; then d=$dir; else d=$dir/fill/$(printf %02d "$r"); fi
        [ "$r" -eq 0 ] || "$@" "$d/nonflat.ids"
        dirs+=("$d")
        nonflat=$(for x in "${dirs[@]}"; do cat "$x/nonflat.ids"; done | awk '!seen[$0]++' | wc -l)
        r=$((r + 1))
        if [ "$nonflat" -ge "$p" ] || [ "$r" -ge "$rounds" ]; then break; fi
    done
    trap 'rm -f "$dir/filled.jsonl.zst.tmp" "$dir/fill.json.tmp" "$dir/fill.keep.tmp"' EXIT
    # the groups kept: non-flat ones first, in draw order; then flat ones to make up P
    { for x in "${dirs[@]}"; do cat "$x/nonflat.ids"; done | awk '!seen[$0]++' | head -n "$p"
      for x in "${dirs[@]}"; do ids_of "$x/scored.jsonl.zst" | uniq; done | awk '!seen[$0]++'
    } | awk '!seen[$0]++' | head -n "$p" > "$dir/fill.keep.tmp"
    local drawn kept
    drawn=$(for x in "${dirs[@]}"; do ids_of "$x/scored.jsonl.zst" | uniq; done | wc -l)
    kept=$(awk 'END { print NR }' "$dir/fill.keep.tmp")
    # the records of the kept groups, bytes untouched, in draw order: each line is
    # matched with its id (the same line of ids_of's output)
    for x in "${dirs[@]}"; do
        zstd -dc "$x/scored.jsonl.zst" |
            awk -v keep="$dir/fill.keep.tmp" -v ids="$x/scored.jsonl.zst" '
                BEGIN { while ((getline k < keep) > 0) want[k] = 1
                        cmd = "zstd -dc \"" ids "\" | jq -c .id" }
                NF == 0 { next } # jq skips blank lines too
                { if ((cmd | getline id) <= 0) { print "fill.sh: ids out of step" > "/dev/stderr"; exit 70 }
                  if (id in want) print }'
    done | zstd -q -c > "$dir/filled.jsonl.zst.tmp"
    jq -n -c --argjson rounds "$r" --argjson drawn "$drawn" --argjson nonflat "$nonflat" --argjson kept "$kept" \
        '{"fill/rounds": $rounds, "fill/groups_drawn": $drawn, "fill/groups_nonflat": $nonflat,
          "fill/groups_kept": $kept, "fill/groups_dropped": ($drawn - $kept)}' > "$dir/fill.json.tmp"
    rm -f "$dir/fill.keep.tmp"
    mv "$dir/filled.jsonl.zst.tmp" "$dir/filled.jsonl.zst"
    mv "$dir/fill.json.tmp" "$dir/fill.json"
    trap - EXIT
}

[ $# -ge 1 ] || die "usage: fill.sh prompts|ids|run ARGS..."
cmd=$1
shift
case $cmd in
    prompts) prompts "$@" ;;
    ids) ids "$@" ;;
    run) run "$@" ;;
    *) die "unknown command '$cmd' (prompts, ids, run)" ;;
esac
