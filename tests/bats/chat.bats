#!/usr/bin/env bats
# Native chat templates against Jinja (tests/ref/check_chat.py); harmony against gpt-oss's own
# template, which the pinned llama.cpp source carries (make llama-cpp).
# needs: venv models llama.cpp
load helpers

@test "chat templates render exactly as Jinja does (SmolLM2, ChatML, Llama 3, 3.1)" {
    [ -x "$GRPO_PY" ] || skip "no test venv (make venv)"
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/check_chat.py" "$T" "$GRPO_ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"ok 1 - smollm2"* ]]
    [[ "$output" != *"not ok"* ]]
}

@test "harmony renders exactly as gpt-oss's own template (the pinned llama.cpp's copy of it)" {
    [ -x "$GRPO_PY" ] || skip "no test venv (make venv)"
    local tpl="$GRPO_ROOT/build/llama.cpp/src/models/templates/openai-gpt-oss-120b.jinja"
    [ -f "$tpl" ] || skip "no llama.cpp source (make llama-cpp) carrying gpt-oss's chat_template.jinja"
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/check_chat.py" "$T" "" "$tpl"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"ok 5 - harmony: 20 renderings identical to Jinja"* ]]
    [[ "$output" == *"ok 7 - harmony-tools: 20 renderings identical to Jinja"* ]]
    [[ "$output" != *"not ok"* ]]
}
