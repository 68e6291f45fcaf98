#!/usr/bin/env bats
# grpo-reward on multi-turn records (formats/rollout.md): --fn env reads the
# environment's env_reward (null where absent), the rule rewards score
# `completion` (the last assistant message) and not the turns before it, and
# the length reward counts the policy's tokens (completion_mask 1s).
load helpers

# A calculator episode: the model calls the tool, reads its answer, answers.
# completion_tokens 2 + 3 (tool) + 2; the earlier turn holds a wrong answer.
turns_record() { # ID ENV_REWARD_JSON_OR_EMPTY
    local env=""
    [ -n "$2" ] && env=",\"env_reward\":$2"
    printf '{"id":"%s","messages":[{"role":"user","content":"6*7?"}],"answer":"42","sample":0,"prompt_tokens":[1,2],"completion_tokens":[5,6,7,8,9,10,2],"completion_mask":[1,1,0,0,0,1,1],"logprobs":[-0.1,-0.2,null,null,null,-0.3,-0.4],"turns":[{"role":"assistant","content":"<answer>41</answer> calc(6*7)"},{"role":"tool","content":"42"},{"role":"assistant","content":"<answer>42</answer>"}],"completion":"<answer>42</answer>","finish_reason":"env"%s}\n' "$1" "$env"
}

@test "env: the record's env_reward, null where absent, weighted and summed with the others" {
    { turns_record a 0.5; turns_record b ""; turns_record c -1; turns_record d null; } > in.jsonl
    grpo-reward --fn env,answer:2 --in in.jsonl --out out.jsonl --stats st.json --quiet
    [ "$(jq -c -s 'map(.rewards.env)' out.jsonl)" = "[0.5,null,-1,null]" ]
    [ "$(jq -c -s 'map(.reward)' out.jsonl)" = "[2.5,2,1,2]" ]
    jq -e '.rewards.env | .null == 2 and .count == 2 and .mean == -0.25' st.json
    # every other field passes through, in order
    diff <(jq -c 'del(.rewards, .reward)' out.jsonl) <(jq -c . in.jsonl)
}

@test "env: an env_reward that is not a number is 65 naming file, line and field; --list names env" {
    { turns_record a 1; turns_record b '"high"'; } > in.jsonl
    run grpo-reward --fn env --in in.jsonl --out out.jsonl
    [ "$status" -eq 65 ]
    assert_one_line_error grpo-reward 'in.jsonl:2: field "env_reward"'
    [ ! -e out.jsonl ]
    run grpo-reward --list
    printf '%s\n' "$output" | grep -q '^env$'
    printf '%s\n' "$output" | grep -q 'env_reward'
}

@test "rule rewards score the last assistant message (completion), not the turns before it" {
    turns_record a 1 > in.jsonl
    run -0 bash -c "grpo-reward --fn answer,format --format-tags answer --format-mode strict --in in.jsonl --quiet | jq -c .rewards"
    [ "$output" = '{"answer":1,"format":1}' ]
    # the same record with its first turn's text as the completion scores that text instead
    jq -c '.completion = .turns[0].content' in.jsonl > first.jsonl
    run -0 bash -c "grpo-reward --fn answer,format --format-tags answer --format-mode strict --in first.jsonl --quiet | jq -c .rewards"
    [ "$output" = '{"answer":0,"format":0}' ]
}

@test "length in tokens counts the policy's tokens of a multi-turn record (completion_mask 1s)" {
    turns_record a 1 > in.jsonl                                   # 4 of 7 tokens are the policy's
    jq -c 'del(.completion_mask)' in.jsonl > single.jsonl         # all 7
    jq -c '.completion_mask = null' in.jsonl > null.jsonl         # all 7
    len() { grpo-reward --fn length --max-len 6 --overlong-buffer 2 --in "$1" --quiet | jq -c .rewards.length; }
    [ "$(len in.jsonl)" = 0 ]
    [ "$(len single.jsonl)" = -1 ]
    [ "$(len null.jsonl)" = -1 ]
    jq -c '.completion_mask[1] = 2' in.jsonl > bad.jsonl
    run grpo-reward --fn length --max-len 6 --in bad.jsonl
    [ "$status" -eq 65 ]; assert_one_line_error grpo-reward 'bad.jsonl:1: field "completion_mask": entry 1: expected 0 or 1'
    jq -c '.completion_mask = "1"' in.jsonl > bad2.jsonl
    run grpo-reward --fn length --max-len 6 --in bad2.jsonl
    [ "$status" -eq 65 ]; assert_one_line_error grpo-reward 'bad2.jsonl:1: field "completion_mask": expected an array'
    # the mask is read as grpo-update reads it: one entry per completion token
    jq -c '.completion_mask += [1]' in.jsonl > long.jsonl
    run grpo-reward --fn length --max-len 6 --in long.jsonl
    [ "$status" -eq 65 ]
    assert_one_line_error grpo-reward 'long.jsonl:1: field "completion_mask": expected one entry per completion token \(7\), got 8'
}
