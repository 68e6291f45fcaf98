#!/usr/bin/env bats
# lib/ops/packed_mxfp4's packing and values against gguf-py's MXFP4 (the
# pinned llama.cpp's copy: the test venv's gguf release lacks the type),
# transformers' gpt-oss dequantization and llama.cpp's gpt-oss converter
# (tests/ref/mxfp4_ref.py), exactly.
# needs: venv llama.cpp
load helpers

@test "MXFP4 blocks: gguf-py's quantizer and dequantizer, transformers' gpt-oss rule, llama.cpp's converter, bit for bit" {
    [ -x "$GRPO_PY" ] || skip "no test venv (make venv)"
    [ -d "$GRPO_ROOT/build/llama.cpp/src/gguf-py" ] || skip "no llama.cpp source (make llama-cpp)"
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/mxfp4_ref.py" --bin "$GRPO_ROOT/build/tests/test_packed_mxfp4" \
        --llama "$GRPO_ROOT/build/llama.cpp/src"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" != *"not ok"* ]]
    [ "$(printf '%s\n' "$output" | grep -c '^ok ')" -eq 4 ]
}
