#!/usr/bin/env bats
# The byte-level BPE tokenizer against Hugging Face `tokenizers` on the real
# SmolLM2 vocabulary and the GPT-2 / Llama-3 / Qwen2 / o200k pre-tokenizers
# (tests/ref/check_tokenizer.py: encode parity, decode parity, round trip,
# and the encode speed as a TAP comment).
# needs: venv models
load helpers

@test "tokenizer matches Hugging Face tokenizers (SmolLM2, GPT-2, Llama-3, Qwen2, o200k pre-tokenizers)" {
    [ -x "$GRPO_PY" ] || skip "no test venv (make venv)"
    [ -f "$GRPO_ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf" ] || skip "no model (make models)"
    export GRPO_TOK_TEST_BIN="$GRPO_ROOT/build/tests/test_tokenizer"
    [ -x "$GRPO_TOK_TEST_BIN" ] || skip "unit tests not built (make unit)"
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/check_tokenizer.py" "$T"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" != *"not ok"* ]]
    [[ "$output" == *"ok "* ]]
}
