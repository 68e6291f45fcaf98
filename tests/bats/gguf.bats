#!/usr/bin/env bats
# Our GGUF reader and dequantizers against gguf-py (tests/ref/check_gguf.py):
# every supported type in a file GGUFWriter writes, and the real SmolLM2
# file's metadata and tensors, bit for bit.
# needs: venv models
load helpers

@test "GGUF reading and dequantization cross-check with gguf-py" {
    [ -x "$GRPO_PY" ] || skip "no test venv (make venv)"
    export GRPO_GGUF_TEST_BIN="$GRPO_ROOT/build/tests/test_gguf"
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/check_gguf.py" \
        "$GRPO_ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf" "$T/work"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" != *"not ok"* ]]
    [[ "$output" == *"ok "*"token_embd.weight (Q8_0"* ]]
    [[ "$output" == *"ok "*"t.q6_k (Q6_K"* ]]
}

@test "a truncated copy of the model is a one-line data error" {
    [ -f "$GRPO_ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf" ] || skip "no model (make models)"
    head -c 4000000 "$GRPO_ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf" > cut.gguf
    GRPO_GGUF_DUMP=cut.gguf GRPO_GGUF_DUMP_OUT=. run "$GRPO_ROOT/build/tests/test_gguf"
    echo "$output"
    [ "$status" -eq 65 ]
    [ "$(printf '%s\n' "$output" | grep -c '')" -eq 1 ]
    [[ "$output" == "cut.gguf: tensor '"*"past the end of the file"* ]]
}
