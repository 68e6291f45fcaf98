#!/bin/sh
# tests/run-suites.sh [check]: runs the test suites, prints their TAP, and ends
# with one line "N passed, N failed, N skipped" summing them. Exits 1 when
# anything failed.
#   (all)  C unit tests, the same under ASan+UBSan, every bats file, and a
#          short libFuzzer run of each fuzz target (make test)
#   check  C unit tests and the bats files that need nothing beyond the build
#          (make check)
# A bats file names in one line "# needs: WHAT..." what its tests cannot run
# without: venv (the test venv, make venv), models (make models), llama.cpp
# (make llama-cpp); check leaves those files out.
set -u
cd "$(dirname "$0")/.."
MODE=${1:-all}
case $MODE in
all | check) ;;
*) echo "usage: tests/run-suites.sh [check]" >&2; exit 64 ;;
esac
ROOT=$(pwd)
LOG=$(mktemp -d)
: > "$LOG/skips"
trap 'rm -rf "$LOG"' EXIT
passed=0 failed=0 skipped=0

# count NAME STATUS FILE: adds the TAP results in FILE; a non-zero STATUS with
# no failing test line (a crash, a bad plan) counts as one failure.
count() {
    p=$(grep -c '^ok ' "$3" | tr -d ' ')
    s=$(grep -c '^ok .*# [sS][kK][iI][pP]' "$3" | tr -d ' ')
    f=$(grep -c '^not ok ' "$3" | tr -d ' ')
    p=$((p - s))
    if [ "$2" != 0 ] && [ "$f" = 0 ]; then
        f=1
        echo "not ok - $1 exited with status $2"
    fi
    passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
    grep '^ok .*# [sS][kK][iI][pP]' "$3" | sed "s|^ok [0-9]* *-* *|$1: |" >> "$LOG/skips"
    echo "# $1: $p passed, $f failed, $s skipped"
}

run_suite() { # NAME COMMAND...
    name=$1; shift
    echo "# suite $name"
    "$@" > "$LOG/out" 2>&1
    st=$?
    cat "$LOG/out"
    count "$name" "$st" "$LOG/out"
}

# TEST_JOBS: tests run side by side (default: one per core)
jobs=${TEST_JOBS:-$(nproc 2>/dev/null || echo 1)}
# Side by side, a tool's OpenMP threads share the cores with the other job's:
# threads that spin while they wait (OpenMP's default) take them from those
# that work. passive unless set, as pipelines/grpo.mk does for SHARDS > 1.
if [ "$jobs" -gt 1 ]; then
    : "${OMP_WAIT_POLICY:=passive}"
    export OMP_WAIT_POLICY
fi

# unit_suites NAME DIR: the unit tests built in DIR, $jobs at a time, each
# into a log of its own, then printed and counted in order. Those that look
# for a sandbox's leftovers on the whole machine (they use proc_scan.h) run
# alone afterwards: the others' sandboxed processes would be such leftovers.
unit_suites() {
    mkdir -p "$LOG/$1"
    alone=$(grep -l 'proc_scan\.h' tests/unit/test_*.c | sed 's|.*/||; s|\.c$||')
    for t in "$2"/test_*; do
        [ -x "$t" ] || continue
        printf '%s\n' "$alone" | grep -q -x "${t##*/}" || echo "$t"
    done | xargs -r -P "$jobs" -I{} sh -c '"$1" > "$2/${1##*/}" 2>&1; echo $? > "$2/${1##*/}.status"' - {} "$LOG/$1"
    for t in "$2"/test_*; do
        [ -x "$t" ] || continue
        n=${t##*/}
        [ -e "$LOG/$1/$n.status" ] || { "$t" > "$LOG/$1/$n" 2>&1; echo $? > "$LOG/$1/$n.status"; }
        echo "# suite $1/$n"
        cat "$LOG/$1/$n"
        count "$1/$n" "$(cat "$LOG/$1/$n.status")" "$LOG/$1/$n"
    done
}

unit_suites unit build/tests
if [ "$MODE" = all ]; then
    export ASAN_OPTIONS=detect_leaks=1
    unit_suites asan build/tests-asan
fi

export PATH="$ROOT/bin:$PATH"
export GRPO_ROOT="$ROOT"
export GRPO_PY="$ROOT/.venv/bin/python"
# Test files run side by side, one job per core (BATS_JOBS=N to change; 1 without
# GNU parallel, which bats needs for it); the tests within a file stay in order.
# The code sandbox's files run alone afterwards: each checks that no sandboxed
# process is left on the machine, which the other's running tests would be.
bats_jobs=${BATS_JOBS:-$jobs}
command -v parallel > /dev/null 2>&1 || bats_jobs=1
files=$(for f in tests/bats/*.bats; do
    [ -e "$f" ] || continue
    [ "$MODE" = check ] && grep -q '^# needs: *[a-z]' "$f" && continue
    echo "$f"
done)
sandbox="tests/bats/reward_code.bats tests/bats/reward_hostile.bats"
# shellcheck disable=SC2086
alone=$(printf '%s\n' $files | grep -F -x "$(printf '%s\n' $sandbox)")
together=$(printf '%s\n' $files | grep -v -F -x "$(printf '%s\n' $sandbox)")
if [ -z "$together" ]; then
    :
elif [ "$bats_jobs" -gt 1 ]; then
    # shellcheck disable=SC2086
    run_suite bats bats --tap --jobs "$bats_jobs" --no-parallelize-within-files $together
else
    # shellcheck disable=SC2086
    run_suite bats bats --tap $together
fi
# shellcheck disable=SC2086
[ -z "$alone" ] || run_suite bats-sandbox bats --tap $alone

# A few seconds of each fuzzer, $jobs at a time; a crash is a failure, its
# output's tail printed.
if [ "$MODE" = all ]; then
    for f in build/fuzz/fuzz_*; do [ -x "$f" ] && echo "$f"; done |
        xargs -r -P "$jobs" -I{} sh -c 'n=${1##*/}; mkdir -p "$2/corpus-$n"
            "$1" -max_total_time=4 -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$2/$n-" -print_final_stats=1 \
                "$2/corpus-$n" "tests/fuzz/corpus/$n" > "$2/fuzz-$n" 2>&1
            echo $? > "$2/fuzz-$n.status"' - {} "$LOG"
    for f in build/fuzz/fuzz_*; do
        [ -e "$LOG/fuzz-${f##*/}.status" ] || continue
        name=${f##*/}
        st=$(cat "$LOG/fuzz-$name.status")
        echo "# suite fuzz/$name"
        if [ "$st" = 0 ]; then
            echo "ok - fuzz/$name ($(grep -o 'stat::number_of_executed_units: [0-9]*' "$LOG/fuzz-$name" | grep -o '[0-9]*$' || true) runs)" > "$LOG/out"
        else
            tail -30 "$LOG/fuzz-$name"
            echo "not ok - fuzz/$name" > "$LOG/out"
        fi
        cat "$LOG/out"
        count "fuzz/$name" "$st" "$LOG/out"
    done
fi

# Skips are named before the closing line, so none goes unseen.
if [ "$skipped" != 0 ]; then
    echo "# skipped:"
    sed 's/^/#   /' "$LOG/skips"
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
