#!/bin/sh
# make fuzz-long: each libFuzzer target for SECONDS (FUZZ_TIME), or only the
# targets named. New inputs go to build/fuzz-corpus/NAME (the seeds under
# tests/fuzz/corpus are read, never written); a crash's input is kept in
# build/fuzz-crashes/. Prints one line per target (executions, coverage,
# corpus, crashes) and exits 1 when any target crashed.
#   sh tests/fuzz/long.sh SECONDS [fuzz_NAME...]
set -u
cd "$(dirname "$0")/../.."
seconds=${1:-600}
shift
targets=${*:-$(ls build/fuzz/ | grep '^fuzz_')}
mkdir -p build/fuzz-crashes
status=0
printf '%-22s %8s %12s %8s %8s %s\n' target seconds executions cov corpus result
for name in $targets; do
    f=build/fuzz/$name
    [ -x "$f" ] || { echo "fuzz-long: no target $f (make fuzz)" >&2; exit 64; }
    mkdir -p "build/fuzz-corpus/$name"
    log=build/fuzz-crashes/$name.log
    "$f" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="build/fuzz-crashes/$name-" "build/fuzz-corpus/$name" "tests/fuzz/corpus/$name" > "$log" 2>&1
    rc=$?
    execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | grep -o '[0-9]*$')
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | grep -o '[0-9]*$')
    corpus=$(ls "build/fuzz-corpus/$name" | wc -l)
    if [ "$rc" = 0 ]; then result="no crash"; else result="CRASH (see $log)"; status=1; fi
    printf '%-22s %8s %12s %8s %8s %s\n' "$name" "$seconds" "${execs:-?}" "${cov:-?}" "$corpus" "$result"
done
exit $status
