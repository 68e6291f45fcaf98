#!/usr/bin/env bats
# The answer reward on MATH-style answers beside math-verify: the table of
# gold/completion pairs with known truth (tests/fixtures/answer/math_pairs.tsv)
# scored by `answer` and by `--fn math-verify` in one run; `answer` must agree
# with the truth at least as often and never call a hard negative equal.
# Also math-verify's own flags and failure modes.
# needs: venv
load helpers

PAIRS="$GRPO_ROOT/tests/fixtures/answer/math_pairs.tsv"

table_records() {
    jq -R -c 'select(startswith("#") | not) | split("\t")
              | {id: "p\(input_line_number)", sample: 0, answer: .[0], completion: .[1],
                 truth: (.[2] | tonumber), hard: (.[3] == "hard")}' "$PAIRS"
}

@test "math: answer agrees with the truth at least as often as math-verify, and calls no hard negative equal" {
    "$GRPO_PY" -c 'import math_verify' # the venv make builds has it (scripts/setup/venv.sh)
    table_records > in.jsonl
    grpo-reward --fn answer,math-verify --math-verify-python "$GRPO_PY" --in in.jsonl --out out.jsonl --quiet
    jq -s '{rows: length,
            answer: map(select(.rewards.answer == .truth)) | length,
            math_verify: map(select(.rewards["math-verify"] == .truth)) | length,
            hard: map(select(.hard)) | length,
            answer_hard_equal: map(select(.hard and .rewards.answer == 1)) | length,
            math_verify_hard_equal: map(select(.hard and .rewards["math-verify"] == 1)) | length}' out.jsonl > rates.json
    echo "# $(jq -c . rates.json)" >&3
    jq -e '.rows >= 300 and .hard >= 50' rates.json
    jq -e '.answer_hard_equal == 0' rates.json
    jq -e '.answer >= .math_verify' rates.json
}

@test "math-verify: null without a reference, a number as reference, weights and the name in rewards" {
    printf '%s\n' '{"id":"a","answer":"\\frac{1}{2}","completion":"\\boxed{0.5}"}' \
        '{"id":"b","answer":"3","completion":"\\boxed{4}"}' \
        '{"id":"c","answer":7,"completion":"so it is $7$"}' \
        '{"id":"d","completion":"\\boxed{1}"}' \
        '{"id":"e","answer":null,"completion":"\\boxed{1}"}' > in.jsonl
    grpo-reward --fn math-verify:2 --math-verify-python "$GRPO_PY" --in in.jsonl --quiet > out.jsonl
    run jq -c '[.id, .rewards["math-verify"], .reward]' out.jsonl
    [ "${lines[0]}" = '["a",1,2]' ]
    [ "${lines[1]}" = '["b",0,0]' ]
    [ "${lines[2]}" = '["c",1,2]' ]
    [ "${lines[3]}" = '["d",null,null]' ]
    [ "${lines[4]}" = '["e",null,null]' ]
}

@test "math-verify: an interpreter without the package fails the run, naming the package, and writes nothing" {
    if /usr/bin/python3 -c 'import math_verify' 2> /dev/null; then
        skip "/usr/bin/python3 has math_verify: no interpreter without it to test with"
    fi
    printf '%s\n' '{"id":"a","answer":"1","completion":"1"}' > in.jsonl
    run grpo-reward --fn math-verify --math-verify-python /usr/bin/python3 --in in.jsonl --out out.jsonl
    [ "$status" -eq 70 ]
    [[ "$output" == *"math-verify is not installed"* ]]
    [[ "$output" == *"grpo-math-verify"*"exited with status 69"* ]]
    [ ! -e out.jsonl ]
    run grpo-reward --fn math-verify --math-verify-python /nonexistent/python --in in.jsonl --out out.jsonl
    [ "$status" -eq 70 ]
    [ ! -e out.jsonl ]
}

@test "grpo-math-verify: --help, --version, bad flags and bad input lines" {
    S="$GRPO_ROOT/scripts/grpo-math-verify"
    run "$GRPO_PY" "$S" --help
    [ "$status" -eq 0 ]
    [[ "$output" == *"usage: grpo-math-verify"* ]]
    run "$GRPO_PY" "$S" --version
    [ "$status" -eq 0 ]
    [[ "$output" == *"math-verify 0.9.0"* ]]
    run "$GRPO_PY" "$S" --bogus
    [ "$status" -eq 64 ]
    run "$GRPO_PY" "$S" --timeout 0
    [ "$status" -eq 64 ]
    run "$GRPO_PY" "$S" <<< 'not json'
    [ "$status" -eq 65 ]
    [[ "$output" == *"<stdin>:1: not JSON"* ]]
}

@test "--list shows math-verify and its flag" {
    run grpo-reward --list
    [ "$status" -eq 0 ]
    [[ "$output" == *$'\nmath-verify\n'* ]]
    [[ "$output" == *"--math-verify-python"* ]]
}

@test "answer: integers compare exactly; on grpo-prep's arith with 6 digits an answer off by 1 or 1000 scores 0" {
    grpo-prep --task arith --digits 6 --ops '*' --terms 2 -n 50 --seed 3 --out prompts.jsonl
    # the answers are large (up to 12 digits): a relative tolerance would take a neighbour for them
    [ "$(jq -s 'map(.answer | tonumber | fabs) | max > 1e10' prompts.jsonl)" = true ]
    jq -c '(.answer | tonumber) as $a
           | (.completion = "#### \($a)" | .sample = 0),
             (.completion = "#### \($a + 1)" | .sample = 1),
             (.completion = "#### \($a + 1000)" | .sample = 2),
             (.completion = "The answer is \($a - 1)." | .sample = 3)' prompts.jsonl > in.jsonl
    grpo-reward --fn answer --in in.jsonl --out out.jsonl --quiet
    [ "$(jq -r 'select(.sample == 0) | .rewards.answer' out.jsonl | sort -u)" = 1 ]
    [ "$(jq -r 'select(.sample > 0) | .rewards.answer' out.jsonl | sort -u)" = 0 ]
    # a decimal may be a rounding: 1/3 against 0.3333333, within the tolerance and half its last digit
    printf '%s\n' '{"id":"a","answer":"1/3","completion":"#### 0.3333333"}' \
        '{"id":"b","answer":"1/3","completion":"#### 0.333"}' \
        '{"id":"c","answer":"1000000","completion":"#### 1000000.5"}' \
        '{"id":"d","answer":"1000000","completion":"#### 1,000,000"}' > dec.jsonl
    [ "$(grpo-reward --fn answer --in dec.jsonl --quiet | jq -r .rewards.answer | paste -sd ' ')" = "1 0 0 1" ]
    [ "$(grpo-reward --fn answer --answer-tol 0.001 --in dec.jsonl --quiet | jq -r .rewards.answer | paste -sd ' ')" = "1 1 0 1" ]
}

@test "answer: a free-text answer in scientific notation is read as the number written" {
    printf '%s\n' '{"id":"a","answer":"100000","completion":"the answer is 1e5"}' \
        '{"id":"b","answer":"5","completion":"the answer is 1e5"}' \
        '{"id":"c","answer":"0.0015","completion":"so k = 1.5e-3."}' \
        '{"id":"d","answer":"6.02e23","completion":"about 6.02 \u00d7 10^23 molecules"}' \
        '{"id":"e","answer":"6.02e23","completion":"about 6.02x10^23"}' \
        '{"id":"f","answer":"5","completion":"the answer is 5e"}' > sci.jsonl
    [ "$(grpo-reward --fn answer --in sci.jsonl --quiet | jq -r .rewards.answer | paste -sd ' ')" = "1 0 1 1 1 1" ]
}
