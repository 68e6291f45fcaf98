#!/usr/bin/env bats
# grpo-reward --preset: each preset is its documented --fn list, auto picks
# per record by the `task` grpo-prep writes, --fn adds to a preset, and the
# errors (unknown preset, a task that is not a string, reasoning without
# --max-len).
load helpers

records() {
    grpo-prep --task arith --n 2 --seed 1 > a.jsonl
    printf '{"prompt":"name a colour","answer":"red"}\n' > raw.jsonl
    grpo-prep --task jsonl --in raw.jsonl --prompt-field prompt > j.jsonl
    jq -c '.completion = "<think>a</think><answer>\(.answer)</answer>"' a.jsonl j.jsonl > in.jsonl
    printf '%s\n' '{"id":"m","task":"mbpp","completion":"```python\ndef f():\n    return 1\n```","tests":["assert f() == 1"]}' >> in.jsonl
}

@test "--preset math|code|general|reasoning: the same output as their --fn lists" {
    records
    for p in math code general reasoning; do
        fns=$(grpo-reward --list | awk -v p="$p" '$1 == p && $2 == "--fn" { print $3 }')
        [ -n "$fns" ]
        grpo-reward --preset "$p" --max-len 100 --length-unit chars --in in.jsonl --out "$p.jsonl" --quiet
        grpo-reward --fn "$fns" --max-len 100 --length-unit chars --in in.jsonl --out "$p.fn.jsonl" --quiet
        cmp "$p.jsonl" "$p.fn.jsonl"
    done
    [ "$(grpo-reward --list | awk '$1 == "math" && $2 == "--fn" { print $3 }')" = "answer:1,format:0.2" ]
    jq -e 'select(.id == "m") | .rewards == {"code": 1, "format": 0} and .reward == 1' code.jsonl
}

@test "--preset auto: math for arith, code for mbpp, general for jsonl; the rest null and out of the sum" {
    records
    grpo-reward --preset auto --in in.jsonl --out out.jsonl --quiet
    run jq -c '[.task, .rewards.answer, .rewards.format, .rewards.code, .rewards.repetition, .reward]' out.jsonl
    [ "${lines[0]}" = '["arith",1,1,null,null,1.2]' ]
    [ "${lines[1]}" = '["arith",1,1,null,null,1.2]' ]
    [ "${lines[2]}" = '["jsonl",1,1,null,0,1.2]' ]
    [ "${lines[3]}" = '["mbpp",null,0,1,null,1]' ]
    # a record without task is general; --fn adds a function for every record
    jq -c 'del(.task)' a.jsonl | jq -c '.completion = "<answer>\(.answer)</answer>"' > notask.jsonl
    grpo-reward --preset auto --fn length:0 --max-len 1000 --length-unit chars --in notask.jsonl --quiet > out2.jsonl
    jq -e '.rewards | .repetition == 0 and .length == 0 and .code == null' out2.jsonl
}

@test "--preset: unknown name is 64, a task that is no string is 65 naming FILE:LINE, reasoning needs --max-len" {
    records
    run grpo-reward --preset bogus --in in.jsonl
    [ "$status" -eq 64 ]
    [[ "$output" == *"--preset"*"bogus"* ]]
    printf '{"id":"x","task":3,"completion":"1","answer":"1"}\n' > bad.jsonl
    run grpo-reward --preset auto --in bad.jsonl --out out.jsonl
    [ "$status" -eq 65 ]
    [[ "$output" == *"bad.jsonl:1"*"task"* ]]
    [ ! -e out.jsonl ]
    run grpo-reward --preset reasoning --in in.jsonl
    [ "$status" -eq 64 ]
    [[ "$output" == *"--max-len"* ]]
}
