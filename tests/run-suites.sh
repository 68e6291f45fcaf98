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

for t in build/tests/test_*; do
    [ -x "$t" ] && run_suite "unit/$(basename "$t")" "$t"
done
if [ "$MODE" = all ]; then
    for t in build/tests-asan/test_*; do
        [ -x "$t" ] && ASAN_OPTIONS=detect_leaks=1 run_suite "asan/$(basename "$t")" "$t"
    done
fi

export PATH="$ROOT/bin:$PATH"
export GRPO_ROOT="$ROOT"
export GRPO_PY="$ROOT/.venv/bin/python"
# Test files run side by side, one job per core (BATS_JOBS=N to change; 1 without
# GNU parallel, which bats needs for it); the tests within a file stay in order.
# The code sandbox's files run alone afterwards: each checks that no sandboxed
# process is left on the machine, which the other's running tests would be.
jobs=${BATS_JOBS:-$(nproc 2>/dev/null || echo 1)}
command -v parallel > /dev/null 2>&1 || jobs=1
files=$(for f in tests/bats/*.bats; do
    [ "$MODE" = check ] && grep -q '^# needs: *[a-z]' "$f" && continue
    echo "$f"
done)
sandbox="tests/bats/reward_code.bats tests/bats/reward_hostile.bats"
# shellcheck disable=SC2086
alone=$(printf '%s\n' $files | grep -F -x "$(printf '%s\n' $sandbox)")
together=$(printf '%s\n' $files | grep -v -F -x "$(printf '%s\n' $sandbox)")
if [ -z "$together" ]; then
    :
elif [ "$jobs" -gt 1 ]; then
    # shellcheck disable=SC2086
    run_suite bats bats --tap --jobs "$jobs" --no-parallelize-within-files $together
else
    # shellcheck disable=SC2086
    run_suite bats bats --tap $together
fi
# shellcheck disable=SC2086
[ -z "$alone" ] || run_suite bats-sandbox bats --tap $alone

# A few seconds of each fuzzer; a crash is a failure with its reproducer saved.
for f in build/fuzz/fuzz_*; do
    [ "$MODE" = all ] || break
    [ -x "$f" ] || continue
    name=$(basename "$f")
    corpus="$LOG/corpus-$name"
    mkdir -p "$corpus"
    echo "# suite fuzz/$name"
    if "$f" -max_total_time=4 -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$LOG/" -print_final_stats=1 \
        "$corpus" "tests/fuzz/corpus/$name" > "$LOG/fuzz" 2>&1; then
        echo "ok - fuzz/$name ($(grep -o 'stat::number_of_executed_units: [0-9]*' "$LOG/fuzz" | grep -o '[0-9]*$' || true) runs)" > "$LOG/out"
        st=0
    else
        st=$?
        tail -30 "$LOG/fuzz"
        echo "not ok - fuzz/$name" > "$LOG/out"
    fi
    cat "$LOG/out"
    count "fuzz/$name" "$st" "$LOG/out"
done

# Skips are named before the closing line, so none goes unseen.
if [ "$skipped" != 0 ]; then
    echo "# skipped:"
    sed 's/^/#   /' "$LOG/skips"
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
