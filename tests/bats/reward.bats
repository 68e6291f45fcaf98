#!/usr/bin/env bats
# grpo-reward's stage: --fn parsing, the rewards object and weighted sum,
# statistics, shards, chunks, and the cmd function's contract and failures.
load helpers

# rollouts FILE N: N rollout records, two per id, with a field to pass through.
rollouts() {
    local i
    for ((i = 0; i < $2; i++)); do
        printf '{"id":"p%d","sample":%d,"completion":"%s","completion_tokens":[%s],"big":123456789012345678901234567890,"x":1e400}\n' \
            $((i / 2)) $((i % 2)) "$(printf 'w%.0s ' $(seq 1 $((i % 7 + 1))))" "$(seq -s, 1 $((i % 5 + 1)))"
    done > "$1"
}

# jq answering one line per record as soon as it reads it
LEN_CMD="jq --unbuffered -c '{reward: (.completion | length)}'"

@test "rewards.cmd and the weighted reward are appended; every other byte passes through" {
    rollouts in.jsonl 6
    grpo-reward --fn cmd:0.5 --cmd "$LEN_CMD" --in in.jsonl --out out.jsonl --quiet
    [ "$(wc -l < out.jsonl)" -eq 6 ]
    # removing the two appended fields gives the input back exactly
    sed -E 's/,"rewards":\{[^}]*\},"reward":[^,}]*}$/}/' out.jsonl | cmp - in.jsonl
    # the values: rewards.cmd = characters of the completion, reward = 0.5 of it
    jq -e -s 'all(.[]; .rewards.cmd == (.completion | length) and .reward == 0.5 * .rewards.cmd)' out.jsonl
    grep -qF '"big":123456789012345678901234567890,"x":1e400' out.jsonl
}

@test "several named rewards from one program, nulls left out of the sum, all-null gives null" {
    rollouts in.jsonl 4
    grpo-reward --fn cmd:2 --quiet --in in.jsonl --out out.jsonl --cmd \
        "jq --unbuffered -c 'if .sample == 0 then {rewards: {a: 1.5, b: null}} else {rewards: {a: null, b: null}} end'"
    run jq -c '[.rewards, .reward]' out.jsonl
    [ "${lines[0]}" = '[{"a":1.5,"b":null},3]' ]
    [ "${lines[1]}" = '[{"a":null,"b":null},null]' ]
}

@test "re-scoring a scored record replaces rewards and reward in place" {
    rollouts in.jsonl 2
    grpo-reward --fn cmd --cmd "$LEN_CMD" --in in.jsonl --out once.jsonl --quiet
    grpo-reward --fn cmd:3 --cmd "$LEN_CMD" --in once.jsonl --out twice.jsonl --quiet
    [ "$(jq -c 'keys_unsorted' once.jsonl | head -1)" = "$(jq -c 'keys_unsorted' twice.jsonl | head -1)" ]
    jq -e -s 'all(.[]; .reward == 3 * .rewards.cmd)' twice.jsonl
}

@test "--fn: unknown, repeated, bad weight and missing are usage errors (64)" {
    rollouts in.jsonl 2
    run -64 grpo-reward --in in.jsonl
    assert_one_line_error grpo-reward "no reward function given"
    run -64 grpo-reward --fn nosuch --in in.jsonl
    assert_one_line_error grpo-reward "unknown reward function 'nosuch'.*--list"
    run -64 grpo-reward --fn cmd,cmd --cmd cat --in in.jsonl
    assert_one_line_error grpo-reward "'cmd' is given twice"
    run -64 grpo-reward --fn cmd:x --cmd cat --in in.jsonl
    assert_one_line_error grpo-reward "--fn cmd: expected a finite weight, got 'x'"
    run -64 grpo-reward --fn cmd: --cmd cat --in in.jsonl
    assert_one_line_error grpo-reward "expected a weight after ':'"
    run -64 grpo-reward --fn :1 --in in.jsonl
    assert_one_line_error grpo-reward "expected NAME\[:WEIGHT\]"
    run -64 grpo-reward --fn cmd --in in.jsonl
    assert_one_line_error grpo-reward "--fn cmd needs --cmd"
}

@test "--list names every function with its flags and their defaults" {
    run grpo-reward --list
    [ "$status" -eq 0 ]
    for f in answer format length repetition code cmd judge rm env; do
        printf '%s\n' "$output" | grep -q "^$f\$"
    done
    printf '%s\n' "$output" | grep -q -- '--cmd-timeout S .*(default: 60)'
    printf '%s\n' "$output" | grep -q -- '--cmd .*(default: none)'
}

@test "--stats: per reward name and for the sum, with null counts and the function's counters" {
    rollouts in.jsonl 4
    grpo-reward --fn cmd --in in.jsonl --out out.jsonl --stats st.json --quiet --cmd \
        "jq --unbuffered -c 'if .sample == 0 then {rewards: {a: 1, b: 2}} else {rewards: {a: 3, b: null}} end'"
    jq -e '.records == 4 and .rewards.a.mean == 2 and .rewards.a.count == 4 and .rewards.a.null == 0
           and .rewards.b.mean == 2 and .rewards.b.null == 2 and .rewards.b.weight == 1
           and .reward.mean == 3 and .reward.min == 3 and .reward.max == 3 and .reward.std == 0
           and .cmd.answers == 4' st.json
}

@test "a closing counter line on stderr unless --quiet" {
    rollouts in.jsonl 3
    run --separate-stderr grpo-reward --fn cmd --cmd "$LEN_CMD" --in in.jsonl --out out.jsonl
    [ "$status" -eq 0 ]
    [ "$stderr" = "grpo-reward: cmd: answers 3" ]
    run --separate-stderr grpo-reward --fn cmd --cmd "$LEN_CMD" --in in.jsonl --out out.jsonl --quiet
    [ -z "$stderr" ]
}

@test "--shard i/n: disjoint shards that together are the whole output, groups kept whole" {
    rollouts in.jsonl 40
    grpo-reward --fn cmd --cmd "$LEN_CMD" --in in.jsonl --out all.jsonl --quiet
    for i in 0 1 2; do grpo-reward --fn cmd --cmd "$LEN_CMD" --in in.jsonl --out s$i.jsonl --shard $i/3 --quiet; done
    cat s0.jsonl s1.jsonl s2.jsonl | sort | cmp - <(sort all.jsonl)
    [ -s s0.jsonl ]
    [ -s s1.jsonl ]
    [ -s s2.jsonl ]
    # an id never appears in two shards
    [ -z "$(comm -12 <(jq -r .id s0.jsonl | sort -u) <(jq -r .id s1.jsonl | sort -u))" ]
    # --shard needs ids
    printf '{"completion":"x"}\n' > noid.jsonl
    run -65 grpo-reward --fn cmd --cmd "$LEN_CMD" --in noid.jsonl --shard 0/2
    assert_one_line_error grpo-reward 'noid.jsonl:1: .*"id"'
}

@test "every record needs a string id, sharded or not (as every stage requires)" {
    local rec
    for rec in '{"completion":"x"}' '{"id":null,"completion":"x"}' '{"id":3,"completion":"x"}'; do
        printf '{"id":"a","completion":"y"}\n%s\n' "$rec" > in.jsonl
        run -65 grpo-reward --fn cmd --cmd "$LEN_CMD" --in in.jsonl --out out.jsonl
        assert_one_line_error grpo-reward 'in.jsonl:2: field "id": expected a string'
        [ ! -e out.jsonl ]
    done
}

@test "--chunk does not change the output" {
    rollouts in.jsonl 25
    grpo-reward --fn cmd --cmd "$LEN_CMD" --in in.jsonl --out a.jsonl --chunk 512 --quiet
    for c in 1 4 24 25 26; do
        grpo-reward --fn cmd --cmd "$LEN_CMD" --in in.jsonl --out b.jsonl --chunk $c --quiet
        cmp a.jsonl b.jsonl
    done
}

@test "a program that buffers its output works when the input ends with the chunk" {
    rollouts in.jsonl 5
    # plain jq writes nothing until its input ends: the last chunk closes its stdin
    grpo-reward --fn cmd --cmd "jq -c '{reward: 1}'" --in in.jsonl --out out.jsonl --quiet
    [ "$(jq -s 'map(.reward) | add' out.jsonl)" = 5 ]
}

@test "a program that crashes, is silent, or answers badly is an error naming it; no output is left" {
    rollouts in.jsonl 4
    run -70 grpo-reward --fn cmd --cmd "exit 3" --in in.jsonl --out out.jsonl
    assert_one_line_error grpo-reward "in.jsonl:1: cmd 'exit 3' exited with status 3 before answering this record"
    run -70 grpo-reward --fn cmd --cmd "head -n 1 | jq -c '{reward:1}'; kill -9 \$\$" --in in.jsonl --out out.jsonl
    assert_one_line_error grpo-reward "in.jsonl:2: cmd .* was killed by signal 9 before answering this record \(1 answers given\)"
    # sh -c runs sleep as its child: the timeout kills the program's whole process group
    # (else the sleep would hold bats' stderr pipe open for as long as it sleeps)
    SECONDS=0
    run -70 grpo-reward --fn cmd --cmd "sleep 987650; true" --cmd-timeout 0.3 --in in.jsonl --out out.jsonl
    assert_one_line_error grpo-reward "in.jsonl:1: cmd 'sleep 987650; true' gave no answer for this record within 0.3 s"
    [ "$SECONDS" -lt 10 ]
    ! pgrep -f 'sleep 987650' || false
    run -65 grpo-reward --fn cmd --cmd "jq --unbuffered -c '{score: 1}'" --in in.jsonl --out out.jsonl
    assert_one_line_error grpo-reward 'in.jsonl:1: cmd .*: answer 1: expected \{"reward": number or null\}'
    run -65 grpo-reward --fn cmd --cmd "jq --unbuffered -c '{reward: \"1\"}'" --in in.jsonl --out out.jsonl
    assert_one_line_error grpo-reward 'answer 1: expected'
    run -65 grpo-reward --fn cmd --cmd "while read l; do echo '{\"rewards\":{\"a\":1e999}}'; done" --in in.jsonl --out out.jsonl
    assert_one_line_error grpo-reward 'finite number or null'
    run -65 grpo-reward --fn cmd --cmd "while read l; do echo '{\"rewards\":{\"a\":1,\"a\":2}}'; done" --in in.jsonl --out out.jsonl
    assert_one_line_error grpo-reward 'in.jsonl:1: reward name "a" is given twice'
    run -70 grpo-reward --fn cmd --cmd "jq --unbuffered -c '{reward: 1}, {reward: 2}'" --in in.jsonl --out out.jsonl
    assert_one_line_error grpo-reward "cmd .* gave more answers than there were records"
    run -70 grpo-reward --fn cmd --cmd "jq --unbuffered -c '{reward: 1}'; exit 4" --in in.jsonl --out out.jsonl
    assert_one_line_error grpo-reward "cmd .* exited with status 4"
    [ ! -e out.jsonl ]
    no_temp_left .
}

@test "a program is not left running after an error elsewhere" {
    rollouts in.jsonl 3
    printf '{"id":"p9","completion":"x","completion_tokens":"bad"}\n' >> in.jsonl
    run -65 grpo-reward --fn cmd --cmd "exec sleep 987654" --cmd-timeout 100 --in in.jsonl --out out.jsonl
    assert_one_line_error grpo-reward 'in.jsonl:4: field "completion_tokens": expected an array of token ids'
    gone 'sleep 987654'
}

@test "grpo-reward stopped by a signal takes the program and all it started down with it" {
    rollouts in.jsonl 3
    grpo-reward --fn cmd --cmd "sleep 987651 | sleep 987652" --in in.jsonl --out out.jsonl 3>&- &
    pid=$!
    for ((i = 0; i < 100; i++)); do pgrep -f 'sleep 987652' > /dev/null && break; sleep 0.05; done
    pgrep -f 'sleep 987651'
    pgrep -f 'sleep 987652'
    kill -TERM "$pid"
    wait "$pid" || true
    gone 'sleep 98765[12]'
    [ ! -e out.jsonl ]
    no_temp_left .
}

@test "cmd with a Python reward program, next to a built-in function" {
    rollouts in.jsonl 6
    cat > my_reward.py <<'PY'
import json, sys
for line in sys.stdin:
    rec = json.loads(line)
    words = len(rec["completion"].split())
    print(json.dumps({"rewards": {"words": words, "short": 1.0 if words < 4 else None}}), flush=True)
PY
    grpo-reward --fn length:0.5,cmd:2 --length-unit chars --max-len 8 --cmd "/usr/bin/python3 my_reward.py" \
        --in in.jsonl --out out.jsonl --quiet
    jq -e -s 'all(.[]; (.completion | split(" ") | map(select(. != "")) | length) as $w
        | .rewards.words == $w
        and .rewards.short == (if $w < 4 then 1 else null end)
        and (.rewards | keys_unsorted) == ["length", "words", "short"]
        and .reward == 0.5 * .rewards.length + 2 * ($w + (if $w < 4 then 1 else 0 end)))' out.jsonl
}

@test "completion_tokens are counted whatever their spacing; anything but token ids is exit 65" {
    printf '%s\n' '{"id":"a","completion":"","completion_tokens":[]}' '{"id":"b","completion":"","completion_tokens":[ ]}' \
        '{"id":"c","completion":"","completion_tokens":[7]}' '{"id":"d","completion":"","completion_tokens":[ 1 , 2 ,3 ]}' \
        '{"id":"e","completion":"","completion_tokens":["a,b",[1,2],{"x":[3,4]}]}' '{"id":"f","completion":""}' > in.jsonl
    # the length reward is -1 exactly where the count is under --min-len
    head -n 4 in.jsonl > four.jsonl
    for max in 0 1 2 3; do
        grpo-reward --fn length --max-len $((max + 1000)) --min-len $((max + 1)) --in four.jsonl --quiet | jq -c .rewards.length | paste -sd ' ' > got-$max
    done
    [ "$(cat got-0)" = "-1 -1 0 0" ]
    [ "$(cat got-1)" = "-1 -1 -1 0" ]
    [ "$(cat got-2)" = "-1 -1 -1 0" ]
    [ "$(cat got-3)" = "-1 -1 -1 -1" ]
    run -65 grpo-reward --fn length --max-len 5 --in in.jsonl
    assert_one_line_error grpo-reward 'in.jsonl:5: field "completion_tokens": element 0: expected a token id'
    sed 5d in.jsonl > nofive.jsonl
    run -65 grpo-reward --fn length --max-len 5 --in nofive.jsonl
    assert_one_line_error grpo-reward 'nofive.jsonl:5: .*"completion_tokens"'
}
