#!/usr/bin/env bats
# The environments in scripts/env (formats/env.md): each fed requests
# directly, and guess.py once end to end with grpo-rollout on a tiny model.
load helpers

E="$GRPO_ROOT/scripts/env"

req() { # req ID SAMPLE TURN CONTENT [EXTRA-JSON]: one request line
    jq -cn --arg id "$1" --argjson s "$2" --argjson t "$3" --arg c "$4" --argjson x "${5:-{\}}" \
        '{id: $id, sample: $s, turn: $t, messages: [{role: "user", content: "q"}, {role: "assistant", content: $c}]} + $x'
}

@test "calc.py: tool calls evaluated, a final answer scored against the record's answer, the last turn ends it" {
    {
        req a 0 0 "<tool_call>" '{"answer": "42", "tool_calls": [{"name": "calc", "arguments": {"expr": "(12 + 9) * 2"}}, {"name": "calc", "arguments": {"expr": "__import__(1)"}}]}'
        req a 0 1 "So it is 42." '{"answer": "42"}'
        req a 1 1 "It is 41." '{"answer": "42"}'
        req a 2 3 "<tool_call>" '{"answer": "42", "last": true, "tool_calls": [{"name": "calc", "arguments": {"expr": "1/0"}}]}'
    } > in.jsonl
    python3 "$E/calc.py" < in.jsonl > out.jsonl
    [ "$(sed -n 1p out.jsonl | jq -c .messages)" = '[{"role":"tool","content":"42"},{"role":"tool","content":"error: only numbers and + - * / // % ** are allowed"}]' ]
    [ "$(sed -n 2,4p out.jsonl | jq -c '[.sample, .turn, .done, .reward]' | tr '\n' ' ')" = "[0,1,true,1] [1,1,true,0] [2,3,true,0] " ]
    jq -e 'type == "array" and .[0].function.name == "calc"' "$E/calc.tools.json" > /dev/null
}

@test "guess.py: higher, lower, ask for a number, reward 1 when found, 0 on the last turn; --prompts" {
    {
        req g 0 0 "I guess 10" '{"secret": 37}'
        req g 0 1 "Then 50!" '{"secret": 37}'
        req g 0 2 "no idea" '{"secret": 37}'
        req g 0 3 "37" '{"secret": 37}'
        req g 1 3 "36" '{"secret": 37, "last": true}'
    } | python3 "$E/guess.py" > out.jsonl
    [ "$(jq -c '.messages[0].content // [.done, .reward]' out.jsonl | tr '\n' ' ')" = '"higher" "lower" "Please answer with one number." [true,1] [true,0] ' ]
    python3 "$E/guess.py" --prompts 5 --seed 3 > p.jsonl
    [ "$(wc -l < p.jsonl)" -eq 5 ]
    jq -e '(.secret | . >= 1 and . <= 100) and .messages[0].role == "user" and (.id | startswith("guess/3/"))' p.jsonl > /dev/null
    python3 "$E/guess.py" --prompts 5 --seed 3 | cmp - p.jsonl
}

@test "guess.py under grpo-rollout --env: episodes end with env or turns, env_reward matches the secret" {
    [ -x "$GRPO_PY" ] || skip "no test venv (make venv)"
    make_tiny_llama tiny
    # the tiny model's context of 128 positions is too short for three turns
    jq '.max_position_embeddings = 512' tiny/config.json > c.json && mv c.json tiny/config.json
    python3 "$E/guess.py" --prompts 2 --seed 1 --max 9 > p.jsonl
    grpo-rollout --model tiny -k 2 --max-new-tokens 3 --max-turns 3 --in p.jsonl --out r.jsonl --env "python3 -u $E/guess.py"
    [ "$(wc -l < r.jsonl)" -eq 4 ]
    jq -e '(.finish_reason == "env") and (.env_reward == 0 or .env_reward == 1)
           and ((.env_reward == 1) == ((.completion | [scan("-?[0-9]+")] | last // "x") == (.secret | tostring)))' r.jsonl > /dev/null
}

teardown() {
    if [ -n "${SERVER_PID:-}" ]; then
        kill "$SERVER_PID" 2> /dev/null || true
        wait "$SERVER_PID" 2> /dev/null || true
    fi
}

@test "sim_user.py: the endpoint's reply is the next user message, [DONE] or the last turn ends it; retries; the key stays secret" {
    [ -x "$GRPO_PY" ] || skip "no test venv (make venv)"
    start_server --reply-format 'It still fails {score}' --log "$T/server.log"
    {
        req s 0 0 "Try turning it off and on."
        req s 1 0 "Fixed? [[reply:thanks [DONE] bye]]"
        req s 2 0 "[[429x2]] Anything else?"
        req s 3 4 "Bye." '{"last": true}'
    } > in.jsonl
    SIM_KEY=sk-secret-123 run --separate-stderr python3 "$E/sim_user.py" --url "$URL" --model user-1 --key-env SIM_KEY \
        --retries 3 < in.jsonl
    [ "$status" -eq 0 ]
    printf '%s\n' "$output" > out.jsonl
    jq -s -e 'map(select(.sample == 0))[0] | .messages[0].role == "user" and (.messages[0].content | startswith("It still fails "))' out.jsonl > /dev/null
    jq -s -e 'map(select(.sample == 1))[0] | .done == true and (has("messages") | not)' out.jsonl > /dev/null
    jq -s -e 'map(select(.sample == 2))[0] | .messages[0].content | startswith("It still fails ")' out.jsonl > /dev/null
    jq -s -e 'map(select(.sample == 3))[0] | .done == true' out.jsonl > /dev/null
    [ "$(wc -l < out.jsonl)" -eq 4 ]
    [ "$(grep -c ' 429$' "$T/server.log")" -eq 2 ]
    ! grep -q sk-secret <<< "$stderr$output" || false
    # an endpoint that refuses: status 75, one line naming the record and turn
    run --separate-stderr python3 "$E/sim_user.py" --url "$URL" --model m --retries 0 < <(req z 0 1 "[[401]] hi")
    [ "$status" -eq 75 ]
    [[ "$stderr" == "sim_user.py: record 'z', sample 0, turn 1: "*"HTTP 401 (not retried)" ]]
}
