#!/usr/bin/env bats
# lib/ops/packed_q4k's values against gguf-py's numpy Q4_K dequantizer (the
# pinned llama.cpp's copy; tests/ref/q4k_ref.py), bit for bit.
# needs: venv llama.cpp
load helpers

@test "Q4_K blocks: packed and unpacked, gguf-py's dequantize_blocks bit for bit" {
    [ -x "$GRPO_PY" ] || skip "no test venv (make venv)"
    [ -d "$GRPO_ROOT/build/llama.cpp/src/gguf-py" ] || skip "no llama.cpp source (make llama-cpp)"
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/q4k_ref.py" --bin "$GRPO_ROOT/build/tests/test_packed_q4k" \
        --llama "$GRPO_ROOT/build/llama.cpp/src"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" != *"not ok"* ]]
    [ "$(printf '%s\n' "$output" | grep -c '^ok ')" -eq 1 ]
}
