#!/usr/bin/env bats
# Conventions every stream tool follows, checked on each tool that exists:
# help, version, usage errors, missing input, invalid JSON, truncated zstd,
# very long lines, pass-through, empty input, atomic output under failure and
# kill -9, compressed output, determinism.
load helpers

# good_input TOOL FILE N: N valid records for TOOL (groups of 2 for advantage).
# (awk: a bash loop runs under bats' per-command trap, 20000 lines took seconds)
good_input() {
    awk -v tool="$1" -v n="$3" 'BEGIN {
        for (i = 0; i < n; i++) {
            if (tool == "grpo-advantage") printf "{\"id\":\"g%d\",\"reward\":%d,\"x\":1e400}\n", int(i / 2), i % 3
            else if (tool == "grpo-prep") printf "{\"prompt\":\"What is %d+1?\",\"answer\":\"%d\",\"x\":1e400}\n", i, i + 1
            else if (tool == "grpo-reward") printf "{\"id\":\"g%d\",\"completion\":\"<answer>%d</answer>\",\"answer\":\"%d\",\"x\":1e400}\n", int(i / 2), i, i % 5
        }
    }' > "$2"
}

# run_tool TOOL ARGS...: the tool with the flags its input needs.
tool_cmd() {
    case $1 in
        grpo-advantage) echo "grpo-advantage" ;;
        grpo-prep) echo "grpo-prep --task jsonl" ;;
        grpo-reward) echo "grpo-reward --fn length:0.5,format --length-unit chars --max-len 20 --quiet" ;;
    esac
}

TOOLS="grpo-prep grpo-advantage grpo-reward"

@test "--help lists every flag with its default, --version prints the version" {
    for t in $TOOLS; do
        run "$t" --help
        [ "$status" -eq 0 ]
        [[ "$output" == *"usage: $t"* ]]
        [[ "$output" == *"--in"* ]]
        [[ "$output" == *"--out"* ]]
        # every flag line but --help/--version names its default
        local missing
        missing=$(printf '%s\n' "$output" | grep -E '^  -' | grep -vE -- '--help|--version' | grep -v '(default: ' || true)
        [ -z "$missing" ] || { echo "no default: $missing"; false; }
        # ... once: a help text that states its default is not given a second
        local twice
        twice=$(printf '%s\n' "$output" | grep -E '\(default: .*\(default: ' || true)
        [ -z "$twice" ] || { echo "two defaults: $twice"; false; }
        run "$t" --version
        [ "$status" -eq 0 ]
        [[ "$output" =~ ^$t\ [0-9]+\.[0-9]+\.[0-9]+$ ]]
    done
}

@test "every tool's --help (and grpo-reward cache's) names each flag's default once" {
    local t twice
    for t in grpo-prep grpo-rollout grpo-reward "grpo-reward cache" grpo-advantage grpo-update grpo-export \
        grpo-tensorboard; do
        run $t --help
        [ "$status" -eq 0 ]
        # a help text that says its default in its own words gets no second one from the table
        twice=$(printf '%s\n' "$output" | grep -E '^  -' | grep -iE 'default.*default' || true)
        [ -z "$twice" ] || { echo "$t: two defaults: $twice"; false; }
    done
}

@test "grpo-prep --help names --format's values as they are accepted" {
    run grpo-prep --help
    [ "$status" -eq 0 ]
    local line
    line=$(printf '%s\n' "$output" | grep -E -- '^  --format ')
    [[ "$line" == *"plain"* ]]
    run grpo-prep --task arith --n 2 --format plain
    [ "$status" -eq 0 ]
    run -64 grpo-prep --task arith --n 2 --format none
}

@test "unknown flags, missing values and stray arguments exit 64 with one line" {
    for t in $TOOLS; do
        run -64 $(tool_cmd $t) --no-such-flag
        assert_one_line_error "$t" "unknown flag '--no-such-flag'"
        run -64 $(tool_cmd $t) --in
        assert_one_line_error "$t" "--in needs a value"
        run -64 $(tool_cmd $t) stray
        assert_one_line_error "$t" "unexpected argument 'stray'"
        run -64 $(tool_cmd $t) --shard 3/3
        assert_one_line_error "$t" "--shard: expected i/n"
    done
}

@test "a missing input file exits 66" {
    for t in $TOOLS; do
        run -66 $(tool_cmd $t) --in nope.jsonl
        assert_one_line_error "$t" "nope.jsonl: cannot open"
    done
}

@test "invalid JSON exits 65 naming file, line and column; no output is left" {
    for t in $TOOLS; do
        good_input "$t" in.jsonl 4
        printf '{"id":"x", oops}\n' >> in.jsonl
        run -65 $(tool_cmd $t) --in in.jsonl --out out.jsonl
        assert_one_line_error "$t" "in.jsonl:5: invalid JSON at column 12"
        [ ! -e out.jsonl ]
        no_temp_left .
    done
}

@test "truncated zstd input exits 65 and says so" {
    for t in $TOOLS; do
        good_input "$t" in.jsonl 2000
        zstd -q -c in.jsonl > full.zst
        head -c $(($(stat -c %s full.zst) - 20)) full.zst > cut.jsonl.zst
        run -65 $(tool_cmd $t) --in cut.jsonl.zst --out out.jsonl
        assert_one_line_error "$t" "cut.jsonl.zst:[0-9]+: truncated zstd"
        [ ! -e out.jsonl ]
    done
}

@test "zstd input is detected by content and .zst output is compressed" {
    for t in $TOOLS; do
        good_input "$t" in.jsonl 50
        zstd -q -c in.jsonl > in.data
        $(tool_cmd $t) --in in.jsonl --out plain.jsonl
        $(tool_cmd $t) --in in.data --out packed.jsonl.zst
        [ "$(head -c 4 packed.jsonl.zst | od -An -tx1 | tr -d ' ')" = "28b52ffd" ]
        zstd -dc packed.jsonl.zst | cmp - plain.jsonl
        $(tool_cmd $t) < in.data | cmp - plain.jsonl
        $(tool_cmd $t) --in - --out - < in.jsonl | cmp - plain.jsonl
    done
}

@test "pzstd output (a skippable frame first) reads as zstd" {
    command -v pzstd >/dev/null || skip "pzstd (apt package zstd) not installed"
    for t in $TOOLS; do
        good_input "$t" in.jsonl 50
        pzstd -q -f in.jsonl -o in.pz
        [ "$(head -c 4 in.pz | od -An -tx1 | tr -d ' ')" = "502a4d18" ]
        $(tool_cmd $t) --in in.jsonl --out plain.jsonl
        $(tool_cmd $t) --in in.pz --out pz.jsonl
        cmp pz.jsonl plain.jsonl
        $(tool_cmd $t) < in.pz | cmp - plain.jsonl
        # cut inside the data frame that follows the skippable one
        head -c $(($(stat -c %s in.pz) - 20)) in.pz > cut.pz
        run -65 $(tool_cmd $t) --in cut.pz --out out.jsonl
        assert_one_line_error "$t" "cut.pz:[0-9]+: truncated zstd"
    done
}

@test "a damaged zstd magic is 'not zstd data', not invalid JSON" {
    for t in $TOOLS; do
        good_input "$t" in.jsonl 50
        zstd -q -c in.jsonl > in.zst
        { printf '\x28\xb5\x2f\xfe'; tail -c +5 in.zst; } > bad.data
        run -65 $(tool_cmd $t) --in bad.data --out out.jsonl
        assert_one_line_error "$t" "bad.data: not zstd data \\(starts 28 b5 2f fe"
        [ ! -e out.jsonl ]
        # two bytes off: the name still says zstd
        { printf '\x00\x00\x2f\xfd'; tail -c +5 in.zst; } > bad.jsonl.zst
        run -65 $(tool_cmd $t) --in bad.jsonl.zst --out out.jsonl
        assert_one_line_error "$t" "bad.jsonl.zst: not zstd data"
        # plain JSON Lines under a .zst name still read as JSON Lines
        cp in.jsonl plain.jsonl.zst
        $(tool_cmd $t) --in plain.jsonl.zst --out plain.out
        rm plain.out
    done
}

@test "a 100 MB line passes through whole" {
    head -c 100000000 /dev/zero | tr '\0' 'a' > big.txt
    { printf '{"id":"g","reward":1,"blob":"'; cat big.txt; printf '"}\n{"id":"g","reward":0}\n'; } > adv.jsonl
    grpo-advantage --in adv.jsonl --out adv.out
    [ "$(head -n 1 adv.out | wc -c)" -gt 100000000 ]
    head -n 1 adv.out | grep -q '"blob":"aaaa'
    # (1 - 0.5) / (std([1, 0]) + 1e-4)
    [ "$(head -n 1 adv.out | tail -c 38)" = 'aaaa","advantage":0.7070067953266834}' ] || { head -n 1 adv.out | tail -c 40; false; }
    { printf '{"prompt":"'; cat big.txt; printf '","answer":"1"}\n'; } > prep.jsonl
    grpo-prep --task jsonl --in prep.jsonl --out prep.out.zst
    [ "$(zstd -dc prep.out.zst | wc -c)" -gt 100000000 ]
    { printf '{"id":"g","completion":"'; cat big.txt; printf '"}\n'; } > rew.jsonl
    grpo-reward --fn length --length-unit chars --max-len 10 --in rew.jsonl --out rew.out
    [[ "$(tail -c 60 rew.out)" == *'aaaa","rewards":{"length":-1},"reward":-1}' ]] || { tail -c 60 rew.out; false; }
}

@test "unknown fields pass through byte for byte, in order" {
    printf '{"id":"g","big":123456789012345678901234567890,"reward":1,"x":1e400,"n":{ "a" : [1, 2.50, "\\u00e9"] },"z":-0.0}\n' > in.jsonl
    printf '{"id":"g","big":1,"reward":2,"x":-1E-7,"n":null,"z":"\\ud83d\\ude00"}\n' >> in.jsonl
    grpo-advantage --in in.jsonl --out out.jsonl
    # removing the appended advantage gives the input back exactly
    sed 's/,"advantage":[^,}]*}$/}/' out.jsonl | cmp - in.jsonl
    printf '{"prompt":"q","answer":"1","big":123456789012345678901234567890,"x":1e400,"n":{ "a" : [1, 2.50] }}\n' > p.jsonl
    grpo-prep --task jsonl --in p.jsonl --out p.out
    grep -qF '"big":123456789012345678901234567890,"x":1e400,"n":{ "a" : [1, 2.50] }' p.out
}

@test "empty input gives empty output and exit 0, and \"TOOL: 0 records\" on stderr (without --progress)" {
    for t in $TOOLS; do
        : > empty.jsonl
        run --separate-stderr $(tool_cmd $t) --in empty.jsonl --out out.jsonl
        [ "$status" -eq 0 ]
        [ -f out.jsonl ]
        [ ! -s out.jsonl ]
        [ "$stderr" = "$t: 0 records" ] || { echo "$t: stderr '$stderr'"; false; }
        printf '\n\n' | $(tool_cmd $t) > out2.jsonl 2> err
        [ ! -s out2.jsonl ]
        [ "$(cat err)" = "$t: 0 records" ]
    done
    # grpo-prep: a split that keeps no record says so too
    printf '%s\n' '{"id":"x","prompt":"p","answer":"1"}' > one.jsonl
    grpo-prep --task jsonl --in one.jsonl --split test --test-fraction 0 > out3.jsonl 2> err
    [ ! -s out3.jsonl ]
    [ "$(cat err)" = "grpo-prep: 0 records" ]
}

@test "same input and flags give identical bytes" {
    for t in $TOOLS; do
        good_input "$t" in.jsonl 300
        $(tool_cmd $t) --in in.jsonl --out a.jsonl
        $(tool_cmd $t) --in in.jsonl --out b.jsonl
        cmp a.jsonl b.jsonl
    done
}

# kill_mid_write TOOL SIGNAL: the tool has written part of its output to the
# temporary when the signal arrives; the output path must never appear.
kill_mid_write() {
    good_input "$1" head.jsonl 20000
    mkfifo feed
    # fd 3 is bats' own: the background tool must not hold it
    $(tool_cmd "$1") --in feed --out out.jsonl 2> err.txt 3>&- &
    local pid=$!
    exec 7> feed
    cat head.jsonl >&7
    # wait until the temporary holds data: the tool is mid-write
    local tmp="" i
    for ((i = 0; i < 100; i++)); do
        tmp=$(find . -maxdepth 1 -name '.out.jsonl.tmp-*' -size +1k | head -n 1)
        [ -n "$tmp" ] && break
        sleep 0.05
    done
    [ -n "$tmp" ] || { echo "tool never started writing"; cat err.txt; false; }
    kill "-$2" "$pid"
    wait "$pid" || true
    exec 7>&-
    [ ! -e out.jsonl ]
}

@test "kill -9 during a write leaves no output file" {
    for t in $TOOLS; do
        rm -f feed .out.jsonl.tmp-* out.jsonl
        kill_mid_write "$t" KILL
    done
}

@test "SIGTERM during a write removes the temporary too" {
    for t in $TOOLS; do
        rm -f feed out.jsonl
        kill_mid_write "$t" TERM
        no_temp_left .
    done
}

@test "an output into a missing directory fails cleanly" {
    for t in $TOOLS; do
        good_input "$t" in.jsonl 4
        run $(tool_cmd $t) --in in.jsonl --out no/such/dir/out.jsonl
        [ "$status" -eq 73 ]
        assert_one_line_error "$t" "no/such/dir/out.jsonl: cannot create"
    done
}

@test "a line longer than memory holds: 70 naming the file and line, nothing written" {
    printf '{"id":"a","reward":1}\n{"id":"a","reward":0}\n' > big.jsonl
    { printf '{"id":"b","x":"'; head -c 600000000 /dev/zero | tr '\0' a; printf '"}\n'; } >> big.jsonl
    run -70 bash -c 'ulimit -v 400000; grpo-advantage --in big.jsonl --out out.jsonl'
    assert_one_line_error grpo-advantage 'big.jsonl:3: out of memory reading a line of more than [0-9]+ MiB'
    [ ! -e out.jsonl ]
    no_temp_left .
    rm big.jsonl
}
