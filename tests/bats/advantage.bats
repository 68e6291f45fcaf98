#!/usr/bin/env bats
# grpo-advantage: every flag, the exact-0 and null rules, group structure
# errors, pass-through, determinism, shards, and agreement with the Python
# reference (tests/ref/advantage_ref.py) on random records from a fixed seed.
#
# Tolerance against the reference: 1e-12 relative, absolute below 1 (TOL in
# advantage_ref.py); flat groups must be exactly 0 and null rewards exactly null.
# needs: venv

load helpers

REF="$GRPO_ROOT/tests/ref/advantage_ref.py"

setup_file() {
    # ~3000 records, groups of 2..8, nulls, missing rewards, flat groups,
    # odd pass-through values, non-ASCII ids
    "$GRPO_PY" "$REF" gen --seed 20240611 --groups 600 > "$BATS_FILE_TMPDIR/scored.jsonl"
}

scored() { printf '%s\n' "$BATS_FILE_TMPDIR/scored.jsonl"; }

# ref_check FLAGS...: our output and stats against the reference's.
ref_check() {
    grpo-advantage --in "$(scored)" --out got.jsonl --stats got.json "$@"
    "$GRPO_PY" "$REF" check --in "$(scored)" --got got.jsonl --got-stats got.json "$@"
}

# advantages FILE: the advantage of every line, one per line.
advantages() { sed -E 's/.*,"advantage":([^,]*)\}$/\1/' "$1"; }

@test "reference: --scale group --baseline mean" { ref_check --scale group --baseline mean; }
@test "reference: --scale group --baseline loo" { ref_check --scale group --baseline loo; }
@test "reference: --scale batch --baseline mean" { ref_check --scale batch --baseline mean; }
@test "reference: --scale batch --baseline loo" { ref_check --scale batch --baseline loo; }
@test "reference: --scale none --baseline mean" { ref_check --scale none --baseline mean; }
@test "reference: --scale none --baseline loo" { ref_check --scale none --baseline loo; }
@test "reference: --scale group --baseline mean --drop-flat" { ref_check --scale group --baseline mean --drop-flat; }
@test "reference: --scale group --baseline loo --drop-flat" { ref_check --scale group --baseline loo --drop-flat; }
@test "reference: --scale batch --baseline mean --drop-flat" { ref_check --scale batch --baseline mean --drop-flat; }
@test "reference: --scale batch --baseline loo --drop-flat" { ref_check --scale batch --baseline loo --drop-flat; }
@test "reference: --scale none --baseline mean --drop-flat" { ref_check --scale none --baseline mean --drop-flat; }
@test "reference: --scale none --baseline loo --drop-flat" { ref_check --scale none --baseline loo --drop-flat; }

@test "reference: --scale batch from stdin, no temporary left in TMPDIR" {
    mkdir tmp
    TMPDIR="$T/tmp" grpo-advantage --scale batch --stats got.json < "$(scored)" > got.jsonl
    [ -z "$(ls -A tmp)" ]
    [ "$(wc -l < got.jsonl)" -gt 2000 ]
    "$GRPO_PY" "$REF" check --in "$(scored)" --got got.jsonl --got-stats got.json --scale batch
}

@test "--help lists every flag with its default; --version" {
    run grpo-advantage --help
    [ "$status" -eq 0 ]
    for f in --in --out --scale --baseline --multi-objective --weights --drop-flat --allow-partial --stats --shard --progress; do
        printf '%s\n' "$output" | grep -Eq -- "^  $f .*\(default: [^)]+\)$" || { echo "missing $f"; false; }
    done
    printf '%s\n' "$output" | grep -Eq -- '--scale group\|batch\|none .*\(default: group\)'
    printf '%s\n' "$output" | grep -Eq -- '--baseline mean\|loo .*\(default: mean\)'
    printf '%s\n' "$output" | grep -Eq -- '--multi-objective sum-then-normalize\|normalize-then-sum .*\(default: sum-then-normalize\)'
    run grpo-advantage --version
    [ "$status" -eq 0 ]
    [[ "$output" =~ ^grpo-advantage\ [0-9]+\.[0-9]+ ]]
}

@test "usage errors: exit 64, one line" {
    for args in "--scale std" "--baseline median" "--shard 3/3" "--shard x" "--bogus" "stray" "--drop-flat=1" "--in" \
        "--multi-objective gdpo" "--weights a:1" "--multi-objective normalize-then-sum --scale batch" \
        "--multi-objective normalize-then-sum --weights a:" "--multi-objective normalize-then-sum --weights :1" \
        "--multi-objective normalize-then-sum --weights a:x" "--multi-objective normalize-then-sum --weights a:1e999" \
        "--multi-objective normalize-then-sum --weights a,b,a"; do
        # shellcheck disable=SC2086
        run grpo-advantage $args < /dev/null
        [ "$status" -eq 64 ] || { echo "$args: status $status"; false; }
        assert_one_line_error grpo-advantage '.'
    done
}

@test "defaults: --scale group --baseline mean, stdin to stdout" {
    grpo-advantage < "$(scored)" > a.jsonl
    grpo-advantage --in "$(scored)" --out b.jsonl --scale group --baseline mean
    grpo-advantage --in - --out - < "$(scored)" > c.jsonl
    cmp a.jsonl b.jsonl
    cmp a.jsonl c.jsonl
    ! cmp -s a.jsonl <(grpo-advantage --in "$(scored)" --baseline loo) || false
    ! cmp -s a.jsonl <(grpo-advantage --in "$(scored)" --scale none) || false
}

@test "flat groups get exactly 0 in every mode (the computed mean of 3 x 0.1 is not 0.1)" {
    cat > in.jsonl <<'EOF'
{"id":"f1","reward":0.1}
{"id":"f1","reward":0.1}
{"id":"f1","reward":0.1}
{"id":"f2","reward":0.3333333333333333}
{"id":"f2","reward":null}
{"id":"f2","reward":0.3333333333333333}
{"id":"f3","reward":-7.25}
{"id":"f3","reward":-7.25}
{"id":"one","reward":5}
{"id":"one"}
{"id":"moving","reward":1}
{"id":"moving","reward":2}
EOF
    for scale in group batch none; do
        for baseline in mean loo; do
            grpo-advantage --in in.jsonl --out out.jsonl --scale $scale --baseline $baseline
            [ "$(advantages out.jsonl | head -n 10 | tr '\n' ' ')" = "0 0 0 0 null 0 0 0 0 null " ]
            [ "$(advantages out.jsonl | tail -n 2 | grep -c '^0$')" = 0 ]
        done
    done
}

@test "--drop-flat leaves flat groups out (all equal, one or no non-null reward) and counts them" {
    cat > in.jsonl <<'EOF'
{"id":"flat","reward":1}
{"id":"flat","reward":1}
{"id":"keep","reward":0}
{"id":"keep","reward":1}
{"id":"one","reward":1}
{"id":"one","reward":null}
{"id":"none","reward":null}
{"id":"none"}
{"id":"keep2","reward":0.5}
{"id":"keep2","reward":null}
{"id":"keep2","reward":0.25}
EOF
    grpo-advantage --in in.jsonl --out out.jsonl --drop-flat --stats st.json
    [ "$(cut -d, -f1 out.jsonl | tr '\n' ' ')" = '{"id":"keep" {"id":"keep" {"id":"keep2" {"id":"keep2" {"id":"keep2" ' ]
    grep -q '"groups":5,"groups_flat":3,"groups_dropped":3,"null_rewards":4,"records_written":5,' st.json
    grpo-advantage --in in.jsonl --out all.jsonl --stats st.json
    [ "$(wc -l < all.jsonl)" = 11 ]
    grep -q '"groups_flat":3,"groups_dropped":0,.*"records_written":11,' st.json
    "$GRPO_PY" "$REF" check --in in.jsonl --got out.jsonl --drop-flat
}

@test "null or missing reward: advantage null, and left out of the group's statistics" {
    printf '%s\n' '{"id":"g","reward":1}' '{"id":"g","reward":null}' '{"id":"g","reward":3}' '{"id":"g","x":1}' > in.jsonl
    printf '%s\n' '{"id":"g","reward":1}' '{"id":"g","reward":3}' > two.jsonl
    for flags in "" "--baseline loo" "--scale none" "--scale batch"; do
        # shellcheck disable=SC2086
        grpo-advantage --in in.jsonl --out out.jsonl --stats st.json $flags
        # shellcheck disable=SC2086
        grpo-advantage --in two.jsonl --out two.out $flags
        [ "$(advantages out.jsonl | sed -n 2p)" = null ]
        [ "$(advantages out.jsonl | sed -n 4p)" = null ]
        [ "$(advantages out.jsonl | sed -n '1p;3p')" = "$(advantages two.out)" ]
        grep -q '"null_rewards":2,' st.json
        grep -q '"reward_mean":2,' st.json
        grep -q '"reward_std_batch":1.4142135623730951,' st.json
    done
}

@test "a 1-record group: exit 65 naming file, line and id; --allow-partial gives it 0" {
    printf '%s\n' '{"id":"a","reward":1}' '{"id":"a","reward":2}' '{"id":"solo","reward":5}' \
        '{"id":"b","reward":1}' '{"id":"b","reward":2}' > in.jsonl
    run grpo-advantage --in in.jsonl
    [ "$status" -eq 65 ]
    assert_one_line_error grpo-advantage '^grpo-advantage: in.jsonl:3: .*"solo".*1 record'
    printf '%s\n' '{"id":"z","reward":1}' >> in.jsonl
    run grpo-advantage --in in.jsonl --scale batch
    [ "$status" -eq 65 ]
    grpo-advantage --in in.jsonl --allow-partial --out out.jsonl
    [ "$(advantages out.jsonl | sed -n '3p;6p' | tr '\n' ' ')" = "0 0 " ]
    [ "$(wc -l < out.jsonl)" = 6 ]
}

@test "a split group: exit 65 naming the id and its lines; --allow-partial takes each run as a group" {
    printf '%s\n' '{"id":"a","reward":1}' '{"id":"a","reward":2}' '{"id":"b","reward":1}' \
        '{"id":"b","reward":3}' '{"id":"a","reward":5}' '{"id":"a","reward":6}' > in.jsonl
    for scale in group batch none; do
        run grpo-advantage --in in.jsonl --scale $scale
        [ "$status" -eq 65 ]
        assert_one_line_error grpo-advantage '^grpo-advantage: in.jsonl:5: id "a" appears again after its group ended at line 2'
    done
    grpo-advantage --in in.jsonl --allow-partial --out out.jsonl
    [ "$(wc -l < out.jsonl)" = 6 ]
    # runs (1,2) and (5,6) deviate alike from their own means: merged, they would not
    [ "$(advantages out.jsonl | sed -n 1p)" = "$(advantages out.jsonl | sed -n 5p)" ]
    [ "$(advantages out.jsonl | sed -n 2p)" = "$(advantages out.jsonl | sed -n 6p)" ]
}

@test "a group split by another group (a b a b): exit 65 naming the id and both lines, not \"1 record\"" {
    printf '%s\n' '{"id":"a","reward":1}' '{"id":"b","reward":1}' '{"id":"a","reward":2}' '{"id":"b","reward":3}' > in.jsonl
    for scale in group batch none; do
        run grpo-advantage --in in.jsonl --scale $scale
        [ "$status" -eq 65 ]
        assert_one_line_error grpo-advantage '^grpo-advantage: in.jsonl:1: group id "a" is split: its records at lines 1 and 3 '
    done
    # a lone record whose id does not come back is still "1 record"
    printf '%s\n' '{"id":"a","reward":1}' '{"id":"a","reward":2}' '{"id":"b","reward":1}' '{"id":"c","reward":3}' > in.jsonl
    run grpo-advantage --in in.jsonl
    [ "$status" -eq 65 ]
    assert_one_line_error grpo-advantage '^grpo-advantage: in.jsonl:3: group id "b" has 1 record'
}

@test "a reward of the wrong type or out of range: exit 65 naming line and field" {
    for bad in '"0.5"' true '[1]' '{"v":1}' 1e400 -1e999; do
        printf '%s\n' '{"id":"a","reward":1}' "{\"id\":\"a\",\"reward\":$bad}" > in.jsonl
        run grpo-advantage --in in.jsonl
        [ "$status" -eq 65 ] || { echo "$bad: status $status"; false; }
        assert_one_line_error grpo-advantage '^grpo-advantage: in.jsonl:2: field "reward": expected a (finite )?number'
    done
    printf '%s\n' '{"id":"a","reward":1}' '{"id":"a","reward":}' > in.jsonl
    run grpo-advantage --in in.jsonl
    [ "$status" -eq 65 ]
    assert_one_line_error grpo-advantage '^grpo-advantage: in.jsonl:2: invalid JSON'
}

@test "a bad rewards object fails only where it is read (--stats): exit 65 naming key" {
    printf '%s\n' '{"id":"a","reward":1,"rewards":{"acc":"yes"}}' '{"id":"a","reward":0}' > in.jsonl
    grpo-advantage --in in.jsonl > /dev/null
    run grpo-advantage --in in.jsonl --stats st.json
    [ "$status" -eq 65 ]
    assert_one_line_error grpo-advantage '^grpo-advantage: in.jsonl:1: field "rewards": key "acc": expected a number or null, got string'
    [ ! -e st.json ]
}

@test "missing, null or non-string id: exit 65" {
    for rec in '{"reward":1}' '{"id":null,"reward":1}' '{"id":7,"reward":1}' '{"id":["a"],"reward":1}'; do
        printf '%s\n' '{"id":"a","reward":1}' '{"id":"a","reward":2}' "$rec" > in.jsonl
        run grpo-advantage --in in.jsonl
        [ "$status" -eq 65 ]
        assert_one_line_error grpo-advantage '^grpo-advantage: in.jsonl:3: field "id": expected a string'
    done
}

@test "empty input: empty output, exit 0, stats with zero counts and null means" {
    : > empty.jsonl
    grpo-advantage --in empty.jsonl --out out.jsonl --stats st.json
    [ -e out.jsonl ]
    [ ! -s out.jsonl ]
    grep -q '^{"records":0,"groups":0,.*"reward_mean":null,' st.json
    printf '\n  \n\n' | grpo-advantage --scale batch > out2.jsonl
    [ ! -s out2.jsonl ]
}

@test "unknown fields pass through byte for byte, in order; advantage is appended" {
    cat > in.jsonl <<'EOF'
{"id":"p1","big":123456789012345678901234567890,"inf":1e400,"neg0":-0.0,"exp":1E-7,"reward":0.25,"nested":{ "a" :[ 1 ,2.50,{"b" : null}] ,"c":"x\u00e9\n" },"s":"tab\there \"q\" \ud83d\ude00 é","t":true,"n":null,"e":[],"o":{}}
{"reward":0.75,"id":"p1","rewards":{ "acc" : 1 , "fmt":null },"z":"\u0000","k\u00e9y":0.10000000000000000001}
{"id":"p2","reward":null,"deep":[[[[{"x":[1,{"y":[]}]}]]]]}
{"id":"p2","reward":3}
EOF
    for scale in group batch; do
        grpo-advantage --in in.jsonl --out out.jsonl --scale $scale --stats st.json
        sed -E 's/,"advantage":[^,]*\}$/}/' out.jsonl > stripped.jsonl
        cmp stripped.jsonl in.jsonl
        [ "$(grep -c ',"advantage":[^,]*}$' out.jsonl)" = 4 ]
    done
}

@test "an existing advantage is replaced in place; top-level spacing is compacted" {
    printf '%s\n' '{"id":"a","advantage":"stale","reward":1,"x":2}' '{ "id" : "a" , "reward" : 2 , "advantage" : null }' > in.jsonl
    grpo-advantage --in in.jsonl --out out.jsonl
    [[ "$(sed -n 1p out.jsonl)" =~ ^\{\"id\":\"a\",\"advantage\":-0\.70[0-9]*,\"reward\":1,\"x\":2\}$ ]]
    [[ "$(sed -n 2p out.jsonl)" =~ ^\{\"id\":\"a\",\"reward\":2,\"advantage\":0\.70[0-9]*\}$ ]]
}

@test "deterministic: two runs give identical bytes" {
    for flags in "" "--scale batch --baseline loo --drop-flat"; do
        # shellcheck disable=SC2086
        grpo-advantage --in "$(scored)" --out a.jsonl --stats a.json $flags
        # shellcheck disable=SC2086
        grpo-advantage --in "$(scored)" --out b.jsonl --stats b.json $flags
        cmp a.jsonl b.jsonl
        cmp a.json b.json
    done
}

@test "--shard 0/3, 1/3, 2/3 together equal the whole (group and batch)" {
    for scale in group batch; do
        grpo-advantage --in "$(scored)" --scale $scale --out whole.jsonl --stats whole.json
        total=0
        for i in 0 1 2; do
            grpo-advantage --in "$(scored)" --scale $scale --shard $i/3 --out s$i.jsonl --stats s$i.json
            [ -s s$i.jsonl ]
            n=$(grep -o '"records":[0-9]*' s$i.json | cut -d: -f2)
            total=$((total + n))
        done
        [ "$total" = "$(grep -o '"records":[0-9]*' whole.json | cut -d: -f2)" ]
        sort s0.jsonl s1.jsonl s2.jsonl > union.jsonl
        sort whole.jsonl > whole.sorted
        cmp union.jsonl whole.sorted
        # a group is never cut across shards
        [ -z "$(cat s0.jsonl s1.jsonl s2.jsonl | cut -d, -f1 | uniq | sort | uniq -d)" ]
    done
    grpo-advantage --in "$(scored)" --scale batch --shard 0/1 --out one.jsonl
    cmp one.jsonl whole.jsonl
    # every record is checked in every shard, so a bad input fails them all alike
    { head -n 40 "$(scored)"; echo '{"id":"bad","reward":"x"}'; } > bad.jsonl
    for i in 0 1 2; do
        run grpo-advantage --in bad.jsonl --shard $i/3
        [ "$status" -eq 65 ]
        assert_one_line_error grpo-advantage '^grpo-advantage: bad.jsonl:41: field "reward"'
    done
}

@test "--scale batch --allow-partial --shard: runs of one id stay separate groups when the ids between are in another shard" {
    # sha256 puts "a" in shard 1/2 and "b" in shard 0/2
    printf '%s\n' '{"id":"a","reward":1}' '{"id":"a","reward":2}' '{"id":"b","reward":1}' \
        '{"id":"b","reward":3}' '{"id":"a","reward":5}' '{"id":"a","reward":9}' > in.jsonl
    grpo-advantage --in in.jsonl --scale batch --allow-partial --out whole.jsonl
    grpo-advantage --in in.jsonl --scale batch --allow-partial --shard 1/2 --out a.jsonl
    grpo-advantage --in in.jsonl --scale batch --allow-partial --shard 0/2 --out b.jsonl
    [ "$(wc -l < a.jsonl)" = 4 ]
    [ "$(wc -l < b.jsonl)" = 2 ]
    cmp a.jsonl <(sed -n '1,2p;5,6p' whole.jsonl)
    cmp b.jsonl <(sed -n '3,4p' whole.jsonl)
}

@test "--scale batch spills to \$TMPDIR: a missing TMPDIR is an I/O error naming it" {
    run env TMPDIR="$T/missing" grpo-advantage --in "$(scored)" --scale batch --out out.jsonl
    [ "$status" -eq 74 ]
    assert_one_line_error grpo-advantage "$T/missing"
    [ ! -e out.jsonl ]
    env TMPDIR="$T/missing" grpo-advantage --in "$(scored)" --out out.jsonl # one pass needs none
}

@test "--out F.zst writes zstd; zstd input is read alike" {
    grpo-advantage --in "$(scored)" --out plain.jsonl
    grpo-advantage --in "$(scored)" --out packed.jsonl.zst
    [ "$(head -c 4 packed.jsonl.zst | od -An -tx1 | tr -d ' ')" = 28b52ffd ]
    zstd -dc packed.jsonl.zst | cmp - plain.jsonl
    grpo-advantage --in packed.jsonl.zst --out again.jsonl
    zstd -q -c "$(scored)" > scored.jsonl.zst
    grpo-advantage --in scored.jsonl.zst --scale batch --out b.jsonl
    grpo-advantage --in "$(scored)" --scale batch --out b2.jsonl
    cmp b.jsonl b2.jsonl
}

@test "on an error, neither --out nor --stats is left (and an old file is untouched)" {
    head -n 200 "$(scored)" > bad.jsonl
    echo '{"id":"zz","reward":"x"}' >> bad.jsonl
    mkdir tmp
    for scale in group batch; do
        run env TMPDIR="$T/tmp" grpo-advantage --in bad.jsonl --out out.jsonl --stats st.json --scale $scale
        [ "$status" -eq 65 ]
        assert_one_line_error grpo-advantage '^grpo-advantage: bad.jsonl:201: field "reward"'
        [ ! -e out.jsonl ]
        [ ! -e st.json ]
        no_temp_left .
        [ -z "$(ls -A tmp)" ]
    done
    echo old > out.jsonl
    run grpo-advantage --in bad.jsonl --out out.jsonl
    [ "$status" -eq 65 ]
    [ "$(cat out.jsonl)" = old ]
    no_temp_left .
}

@test "--in missing: exit 66; --out in a missing directory: one-line error" {
    run grpo-advantage --in nope.jsonl
    [ "$status" -eq 66 ]
    assert_one_line_error grpo-advantage 'nope.jsonl'
    run grpo-advantage --in "$(scored)" --out nodir/out.jsonl
    [ "$status" -ne 0 ]
    assert_one_line_error grpo-advantage 'nodir/out.jsonl'
    run grpo-advantage --in "$(scored)" --stats nodir/st.json --out out.jsonl
    [ "$status" -ne 0 ]
    assert_one_line_error grpo-advantage 'nodir/st.json'
    [ ! -e out.jsonl ]
}

@test "--in and --out may be the same file" {
    grpo-advantage --in "$(scored)" --out want.jsonl
    cp "$(scored)" x.jsonl
    grpo-advantage --in x.jsonl --out x.jsonl
    cmp x.jsonl want.jsonl
}

@test "--progress draws on stderr only; without it a non-terminal stderr stays quiet" {
    grpo-advantage --in "$(scored)" --out quiet.jsonl 2> quiet.err
    [ ! -s quiet.err ]
    grpo-advantage --in "$(scored)" --progress > loud.jsonl 2> loud.err
    cmp quiet.jsonl loud.jsonl
    grep -q records loud.err
    grpo-advantage --in "$(scored)" --scale batch --progress > /dev/null 2> batch.err
    grep -q 'pass 2' batch.err
}

@test "--stats: counts, TRL-named means, per-function means over non-null values" {
    cat > in.jsonl <<'EOF'
{"id":"a","reward":1,"rewards":{"acc":1,"fmt":0.5}}
{"id":"a","reward":0,"rewards":{"acc":0,"fmt":null}}
{"id":"b","reward":2,"rewards":{"acc":1}}
{"id":"b","reward":2}
{"id":"c","reward":null,"rewards":null}
{"id":"c","reward":4,"rewards":{"acc":null,"fmt":0.25}}
EOF
    grpo-advantage --in in.jsonl --out out.jsonl --stats st.json
    grep -q '^{"records":6,"groups":3,"groups_flat":2,"groups_dropped":0,"null_rewards":1,"records_written":6,"reward_mean":1.8,' st.json
    grep -q '"reward_std":0.2357022603955158[0-9]*,' st.json           # (sqrt(1/2) + 0 + 0) / 3
    grep -q '"frac_reward_zero_std":0.6666666666666666,' st.json
    grep -q '"rewards/acc/mean":0.6666666666666666,"rewards/acc/std":0.57735026918962[0-9]*,"rewards/fmt/mean":0.375,"rewards/fmt/std":0.17677669529663[0-9]*}$' st.json
    "$GRPO_PY" "$REF" check --in in.jsonl --got out.jsonl --got-stats st.json
}

# ---- --multi-objective normalize-then-sum (GDPO) ------------------------------

multi_scored() {
    [ -e "$BATS_FILE_TMPDIR/multi.jsonl" ] ||
        "$GRPO_PY" "$REF" gen --seed 20260105 --groups 400 --multi > "$BATS_FILE_TMPDIR/multi.jsonl"
    printf '%s\n' "$BATS_FILE_TMPDIR/multi.jsonl"
}

# multi_check FLAGS...: normalize-then-sum against the reference, with weights
multi_check() {
    local w='acc:2,format:0.5,lené:-1'
    grpo-advantage --in "$(multi_scored)" --out got.jsonl --stats got.json \
        --multi-objective normalize-then-sum --weights "$w" "$@"
    "$GRPO_PY" "$REF" check --in "$(multi_scored)" --got got.jsonl --got-stats got.json \
        --multi-objective normalize-then-sum --weights "$w" "$@"
}

@test "reference: normalize-then-sum --scale group --baseline mean" { multi_check --scale group --baseline mean; }
@test "reference: normalize-then-sum --scale group --baseline loo --drop-flat" { multi_check --scale group --baseline loo --drop-flat; }
@test "reference: normalize-then-sum --scale none --baseline mean --drop-flat" { multi_check --scale none --baseline mean --drop-flat; }
@test "reference: normalize-then-sum --scale none --baseline loo" { multi_check --scale none --baseline loo; }

@test "normalize-then-sum: no --weights weighs every reward 1; the weights change the advantages" {
    grpo-advantage --in "$(multi_scored)" --out a.jsonl --multi-objective normalize-then-sum
    "$GRPO_PY" "$REF" check --in "$(multi_scored)" --got a.jsonl --multi-objective normalize-then-sum
    grpo-advantage --in "$(multi_scored)" --out b.jsonl --multi-objective normalize-then-sum --weights acc,format,lené
    cmp a.jsonl b.jsonl
    grpo-advantage --in "$(multi_scored)" --out c.jsonl --multi-objective normalize-then-sum --weights acc:3,format,lené
    ! cmp -s a.jsonl c.jsonl || false
    # the default mode reads `reward`, not `rewards`
    grpo-advantage --in "$(multi_scored)" --out d.jsonl --multi-objective sum-then-normalize
    cmp d.jsonl <(grpo-advantage --in "$(multi_scored)")
}

@test "normalize-then-sum sees a reward's spread that a flat weighted sum hides" {
    # group a: reward 1 for both (flat), but `acc` and `fmt` each tell the two apart;
    # group b: every reward flat. sum-then-normalize gives a 0; GDPO with acc:2 does not.
    printf '%s\n' '{"id":"a","rewards":{"acc":1,"fmt":0},"reward":1}' '{"id":"a","rewards":{"acc":0,"fmt":1},"reward":1}' \
        '{"id":"b","rewards":{"acc":1,"fmt":1},"reward":2}' '{"id":"b","rewards":{"acc":1,"fmt":1},"reward":2}' \
        '{"id":"c","rewards":{"acc":1,"fmt":null},"reward":1}' '{"id":"c","rewards":{"acc":0,"fmt":null},"reward":0}' > in.jsonl
    grpo-advantage --in in.jsonl --stats st.json > sum.jsonl
    [ "$(advantages sum.jsonl | head -n 2 | tr '\n' ' ')" = "0 0 " ]
    grpo-advantage --in in.jsonl --multi-objective normalize-then-sum --weights acc:2,fmt --scale none --stats mst.json > none.jsonl
    # --scale none: each reward centred in its group, then 2*acc + fmt
    [ "$(advantages none.jsonl | tr '\n' ' ')" = "0.5 -0.5 0 0 1 -1 " ]
    grpo-advantage --in in.jsonl --multi-objective normalize-then-sum --weights acc:2,fmt > group.jsonl
    # --scale group: each reward over its group std, +-0.5/(sqrt(0.5) + 1e-4) = +-u; sums u, -u, 0, 0, 2u, -2u,
    # then over the batch's mean (0) and std
    "$GRPO_PY" -c '
import json, math, statistics
a = [json.loads(l)["advantage"] for l in open("group.jsonl")]
u = 0.5 / (math.sqrt(0.5) + 1e-4)
s = [u, -u, 0, 0, 2 * u, -2 * u]
sd = statistics.stdev(s)
want = [x / (sd + 1e-4) for x in s]
assert all(abs(x - y) <= 1e-15 for x, y in zip(a, want)), (a, want)
'
    [ "$(advantages none.jsonl | sed -n 3,4p | tr '\n' ' ')" = "0 0 " ] # flat in every reward: exactly 0
    # the weighted sum is flat in groups a and b, GDPO's rewards only in b
    [ "$(jq .groups_flat st.json)" = 2 ]
    [ "$(jq .groups_flat mst.json)" = 1 ]
    grpo-advantage --in in.jsonl --multi-objective normalize-then-sum --weights acc:2,fmt --drop-flat > dropped.jsonl
    [ "$(jq -r .id dropped.jsonl | tr -d '\n')" = aacc ]
}

@test "normalize-then-sum: a record without numeric rewards gets null and takes no part" {
    printf '%s\n' '{"id":"a","rewards":{"x":1}}' '{"id":"a","rewards":{"x":null}}' '{"id":"a"}' '{"id":"a","rewards":{"x":0}}' > in.jsonl
    run grpo-advantage --in in.jsonl --multi-objective normalize-then-sum --scale none
    [ "$status" -eq 0 ]
    [ "$(printf '%s\n' "$output" | jq -c .advantage | tr '\n' ' ')" = "0.5 null null -0.5 " ]
}

@test "normalize-then-sum: bad rewards and weights are exit 65 naming file, line and key; nothing left" {
    printf '%s\n' '{"id":"a","rewards":{"x":1,"y":2}}' '{"id":"a","rewards":{"x":0,"y":"2"}}' > type.jsonl
    printf '%s\n' '{"id":"a","rewards":{"x":1}}' '{"id":"a","rewards":{"x":0,"x":1}}' > twice.jsonl
    printf '%s\n' '{"id":"a","rewards":{"x":1}}' '{"id":"a","rewards":[0]}' > array.jsonl
    printf '%s\n' '{"id":"a","rewards":{"x":1}}' '{"id":"a","rewards":{"x":1e400}}' > inf.jsonl
    for f in type twice array inf; do
        run grpo-advantage --in $f.jsonl --out out.jsonl --stats st.json --multi-objective normalize-then-sum
        [ "$status" -eq 65 ] || { echo "$f: $status"; false; }
        assert_one_line_error grpo-advantage "^grpo-advantage: $f.jsonl:2: field \"rewards\""
        [ ! -e out.jsonl ]
        [ ! -e st.json ]
    done
    run grpo-advantage --in type.jsonl --out out.jsonl --multi-objective normalize-then-sum --weights x
    [ "$status" -eq 65 ]
    assert_one_line_error grpo-advantage '^grpo-advantage: type.jsonl:1: field "rewards": key "y" has no weight in --weights'
    printf '%s\n' '{"id":"a","rewards":{"x":1}}' '{"id":"a","rewards":{"x":0}}' > ok.jsonl
    run grpo-advantage --in ok.jsonl --out out.jsonl --multi-objective normalize-then-sum --weights x,typo:2
    [ "$status" -eq 65 ]
    assert_one_line_error grpo-advantage '^grpo-advantage: ok.jsonl: --weights names "typo", which no record'
    [ ! -e out.jsonl ]
}

@test "normalize-then-sum: shards together equal the whole; two passes leave nothing in TMPDIR" {
    mkdir tmp
    TMPDIR="$T/tmp" grpo-advantage --multi-objective normalize-then-sum --weights acc:2,format,lené < "$(multi_scored)" > whole.jsonl
    [ -z "$(ls -A tmp)" ]
    for i in 0 1 2; do
        grpo-advantage --in "$(multi_scored)" --multi-objective normalize-then-sum --weights acc:2,format,lené \
            --shard $i/3 --out s$i.jsonl
    done
    cmp <(sort whole.jsonl) <(cat s0.jsonl s1.jsonl s2.jsonl | sort)
    run env TMPDIR="$T/missing" grpo-advantage --in "$(multi_scored)" --multi-objective normalize-then-sum --out out.jsonl
    [ "$status" -eq 74 ]
    assert_one_line_error grpo-advantage "$T/missing"
}
