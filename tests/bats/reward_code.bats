#!/usr/bin/env bats
# grpo-reward --fn code through the tool: MBPP records from grpo-prep scored
# by their own reference code, partial credit, nulls, errors, -j, and hostile
# programs (endless loop, fork bomb, memory hog, writes outside, secrets,
# the network, early exit), each scored 0 while the stage goes on, with no
# process or directory left behind.
load helpers

# The interpreter: a pyenv shim on PATH lives under a home the sandbox's
# unprivileged user cannot enter, so use the system's.
PY=/usr/bin/python3

setup() {
    T="$BATS_TEST_TMPDIR"
    cd "$T" || return 1
    mkdir -p "$T/tmp"
    export TMPDIR="$T/tmp" # run directories are made here: checked empty afterwards
    [ -x "$PY" ] || PY=$(command -v python3)
}

nothing_left() {
    run pgrep -f _grpo_harness
    [ "$status" -eq 1 ] || { echo "sandboxed processes left: $output"; return 1; }
    left=$(find "$TMPDIR" -mindepth 1 | head -n 5)
    [ -z "$left" ] || { echo "left in TMPDIR: $left"; return 1; }
}

@test "code: mbpp prompts from grpo-prep, scored by their reference code; wrong, exiting and prose completions get 0" {
    grpo-prep --task mbpp --in "$GRPO_ROOT/tests/fixtures/prep/mbpp.jsonl" --out prompts.jsonl
    jq -c '(.completion = "Here it is:\n```python\n\(.code)\n```\nDone." | .sample = 0),
           (.completion = (.code | gsub("\r"; "")) | .sample = 1),
           (.completion = "```python\n\(.code)\nimport os\nos._exit(0)\n```" | .sample = 2),
           (.completion = "```python\ndef broken(:\n```" | .sample = 3),
           (.completion = "<answer>I would loop over the list.</answer>" | .sample = 4)' prompts.jsonl > in.jsonl
    printf '{"id":"prose","sample":0,"completion":"42"}\n' >> in.jsonl
    grpo-reward --fn code --code-python "$PY" --in in.jsonl --out out.jsonl --stats st.json 2> err
    run jq -r '[.sample, .rewards.code, .reward] | @tsv' out.jsonl
    [ "${#lines[@]}" -eq 16 ]
    for i in 0 5 10; do
        [ "${lines[$i]}" = $'0\t1\t1' ]
        [ "${lines[$((i + 1))]}" = $'1\t1\t1' ]
        [ "${lines[$((i + 2))]}" = $'2\t0\t0' ]
        [ "${lines[$((i + 3))]}" = $'3\t0\t0' ]
        [ "${lines[$((i + 4))]}" = $'4\t0\t0' ]
    done
    [ "${lines[15]}" = $'0\t\t' ] # no tests: null, left out of the sum
    # 3 + 2 + 1 tests per prompt, 5 completions each
    jq -e '.code | .records == 15 and .not_applicable == 1 and .runs == 30 and .passed == 12
           and .failed == 18 and .timeouts == 0 and .setup_failures == 0' st.json
    grep -q '^grpo-reward: code: records 15, not_applicable 1, runs 30, passed 12, failed 18, timeouts 0' err
    nothing_left
}

@test "code: the reward is the fraction of tests passed" {
    printf '%s\n' \
        '{"id":"a","completion":"def f(x):\n    return 2","tests":["assert f(1) == 2","assert f(2) == 3","assert f(5) == 2","assert f(0) == 1"]}' \
        '{"id":"b","completion":"def f(x):\n    return 2","tests":["assert f(1) == 2","assert f(2) == 3","assert f(3) == 4"]}' \
        > in.jsonl
    run -0 grpo-reward --fn code:2 --code-python "$PY" --in in.jsonl --quiet
    [ "$(printf '%s\n' "$output" | jq -c '[.rewards.code, .reward]' | paste -sd ' ')" = \
      "[0.5,1] [0.3333333333333333,0.6666666666666666]" ]
}

@test "code: hostile programs are contained and score 0, the stage goes on, nothing is left behind" {
    export GRPO_BATS_SECRET=hunter2-bats
    # a listener on 127.0.0.1 that records any connection it accepts
    "$PY" -c '
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(4)
print(s.getsockname()[1], flush=True)
s.settimeout(20)
try:
    s.accept(); print("connected", flush=True)
except OSError:
    pass' > listener.out &
    listener=$!
    for _ in $(seq 50); do [ -s listener.out ] && break; sleep 0.1; done
    port=$(head -n 1 listener.out)
    [ -n "$port" ]
    mkdir -m 777 open-dir # anyone may write here: only the sandbox's read-only mounts protect it
    chmod 777 open-dir
    escape="/tmp/grpo-bats-escape-$$"
    rm -f "$escape"
    jq -nc --arg port "$port" --arg dir "$T/open-dir" --arg escape "$escape" '
        {id: "loop", completion: "while True:\n    pass", tests: ["assert f() == 1"]},
        {id: "forkbomb", completion: "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass", tests: ["assert f() == 1"]},
        {id: "memory", completion: "x = bytearray(10 * 1024 ** 3)", tests: ["assert f() == 1"]},
        {id: "write", completion: "", tests: ["assert open(\($dir | tojson) + \"/escaped\", \"w\").write(\"x\") == 1",
                                              "assert open(\($escape | tojson), \"w\").write(\"x\") == 1"]},
        {id: "secret", completion: "import os", tests: ["assert os.environ[\"GRPO_BATS_SECRET\"] == \"hunter2-bats\""]},
        {id: "network", completion: "import socket", tests: ["assert socket.create_connection((\"127.0.0.1\", \($port)), timeout=1)"]},
        {id: "exit", completion: "import sys\nsys.exit(0)\ndef f():\n    return 1", tests: ["assert f() == 1"]},
        {id: "good", completion: "def f():\n    return 1", tests: ["assert f() == 1"]}' > in.jsonl
    start=$(date +%s.%N)
    grpo-reward --fn code --code-python "$PY" --code-timeout 1 -j 2 --in in.jsonl --out out.jsonl --stats st.json --quiet
    took=$(echo "$(date +%s.%N) - $start" | bc)
    kill "$listener" 2> /dev/null || true
    wait "$listener" 2> /dev/null || true
    # where the kernel refuses a namespace, grpo-reward says so (--help) and that protection is absent
    missing=$(jq -r '.code.isolation_missing' st.json)
    expect="loop=0 forkbomb=0 memory=0 write=0 secret=0 network=0 exit=0 good=1" passed=1
    # the seccomp filter refuses AF_INET sockets with or without a network namespace
    ! grep -q connected listener.out || false
    if [[ $missing == *"read-only file system"* ]]; then
        echo "# no mount namespace on this kernel: writes where nobody may write are not contained" >&3
        expect=${expect/write=0/write=1} passed=$((passed + 2))
        rm -f "$escape"
    else
        [ ! -e open-dir/escaped ]
        [ ! -e "$escape" ]
    fi
    [ "$(jq -r '"\(.id)=\(.rewards.code)"' out.jsonl | paste -sd ' ')" = "$expect" ]
    jq -e --argjson p "$passed" '.code | .timeouts == 2 and .runs == 9 and .passed == $p' st.json
    # two 1 s deadlines on two sandboxes at once, the rest quick
    [ "$(echo "$took < 6" | bc)" -eq 1 ]
    nothing_left
}

@test "code: -j does not change the output" {
    jq -nc 'range(12) as $i | {id: "r\($i)", completion: "import time\ntime.sleep(0.0\($i % 3))\ndef f(x):\n    return x % \(1 + $i % 4)",
                              tests: ["assert f(5) == 1", "assert f(6) == 0", "assert f(7) == 1"]}' > in.jsonl
    grpo-reward --fn code --code-python "$PY" -j 1 --in in.jsonl --out one.jsonl --quiet
    grpo-reward --fn code --code-python "$PY" -j 4 --chunk 5 --in in.jsonl --out four.jsonl --quiet
    cmp one.jsonl four.jsonl
    [ "$(jq -r .rewards.code one.jsonl | sort -u | paste -sd ' ')" != "0" ] # not all the same
}

@test "code: tests of the wrong type are exit 65 naming FILE:LINE and the field" {
    printf '{"id":"a","completion":"","tests":["pass"]}\n{"id":"b","completion":"","tests":"assert 1"}\n' > in.jsonl
    run -65 grpo-reward --fn code --code-python "$PY" --in in.jsonl --out out.jsonl
    assert_one_line_error grpo-reward 'in.jsonl:2: field "tests": expected an array of strings, got string'
    [ ! -e out.jsonl ]
    no_temp_left .
    printf '{"id":"a","completion":"","checks":["pass", null]}\n' > in.jsonl
    run -65 grpo-reward --fn code --code-python "$PY" --code-tests-field checks --in in.jsonl
    assert_one_line_error grpo-reward 'in.jsonl:1: field "checks": element 1: expected a string, got null'
    nothing_left
}

@test "code: an interpreter that is missing or does not run in the sandbox is exit 69" {
    echo '{"id":"a","completion":"","tests":["pass"]}' > in.jsonl
    run -69 grpo-reward --fn code --code-python grpo-no-such-python --in in.jsonl
    assert_one_line_error grpo-reward 'code: grpo-no-such-python: not found on PATH'
    run -69 grpo-reward --fn code --code-python /bin/false --in in.jsonl
    assert_one_line_error grpo-reward 'code: /bin/false does not work in the sandbox .*exited with status 1'
    nothing_left
}
