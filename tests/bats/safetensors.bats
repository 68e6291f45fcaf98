#!/usr/bin/env bats
# Our safetensors writer and reader against the independent Python package
# (tests/ref/check_safetensors.py: every dtype, both directions, bit exact).
# needs: venv
load helpers

@test "safetensors files cross-check with the Python safetensors package" {
    [ -x "$GRPO_PY" ] || skip "no test venv (make venv)"
    export GRPO_ST_TEST_BIN="$GRPO_ROOT/build/tests/test_safetensors"
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/check_safetensors.py" "$T"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" != *"not ok"* ]]
    [[ "$output" == *"ok "* ]]
}
