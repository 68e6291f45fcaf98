#!/usr/bin/env bats
# Native chat templates against Jinja (tests/ref/check_chat.py).
# needs: venv models
load helpers

@test "chat templates render exactly as Jinja does (SmolLM2, ChatML, Llama 3, 3.1)" {
    [ -x "$GRPO_PY" ] || skip "no test venv (make venv)"
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/check_chat.py" "$T" "$GRPO_ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"ok 1 - smollm2"* ]]
    [[ "$output" != *"not ok"* ]]
}
