#!/usr/bin/env bats
# grpo-reward's rule functions through the tool: answer (final answers and
# the countdown check), format, length and repetition, their flags, their
# nulls and the errors that name FILE:LINE and the field.
load helpers

@test "answer: prep's arith answers, right, wrong, normalised, and null without a reference" {
    grpo-prep --task arith --n 4 --seed 3 > prompts.jsonl
    # four samples per prompt: the answer in tags, with $ and a unit, one off, and only a number at the end
    jq -c '(.completion = "<think>ok</think><answer>\(.answer)</answer>" | .sample = 0),
           (.completion = "<answer>$\(.answer).00 dollars</answer>" | .sample = 1),
           (.completion = "<answer>\(.answer | tonumber + 1)</answer>" | .sample = 2),
           (.completion = "I get \(.answer)" | .sample = 3)' prompts.jsonl > in.jsonl
    printf '{"id":"x","sample":0,"completion":"<answer>4</answer>"}\n' >> in.jsonl
    grpo-reward --fn answer --in in.jsonl --out out.jsonl --stats st.json --quiet
    run jq -r '[.sample, .rewards.answer, .reward] | @tsv' out.jsonl
    [ "${#lines[@]}" -eq 17 ]
    for i in 0 4 8 12; do
        [ "${lines[$i]}" = $'0\t1\t1' ]
        [ "${lines[$((i + 1))]}" = $'1\t1\t1' ]
        [ "${lines[$((i + 2))]}" = $'2\t0\t0' ]
        [ "${lines[$((i + 3))]}" = $'3\t1\t1' ]
    done
    [ "${lines[16]}" = $'0\t\t' ] # null reward and null sum (jq prints null as empty)
    jq -e '.rewards.answer | .null == 1 and .count == 16' st.json
    jq -e '.answer | .correct == 12 and .wrong == 4 and .null == 1
           and .extracted_from.answer_tag == 12 and .extracted_from.last_number == 4' st.json
}

@test "answer: countdown records from prep are scored by the equation" {
    grpo-prep --task countdown --n 3 --seed 5 > prompts.jsonl
    # the sum of the numbers as target: "a + b + c" is right, dropping one number or reusing one is wrong
    jq -c '.target = (.numbers | add)
           | (.completion = "<answer>\(.numbers | map(tostring) | join(" + "))</answer>" | .sample = 0),
             (.completion = "so:\n\(.numbers | map(tostring) | join(" + ")) = \(.target)" | .sample = 1),
             (.completion = "<answer>\(.numbers[1:] | map(tostring) | join(" + "))</answer>" | .sample = 2),
             (.completion = "<answer>\(.numbers | map(tostring) | join(" + ")) + \(.numbers[0])</answer>" | .sample = 3),
             (.completion = "<answer>\(.target)</answer>" | .sample = 4)' prompts.jsonl > in.jsonl
    grpo-reward --fn answer --in in.jsonl --out out.jsonl --stats st.json --quiet
    run jq -c '[.sample, .rewards.answer]' out.jsonl
    [ "${#lines[@]}" -eq 15 ]
    for i in 0 5 10; do
        [ "${lines[$i]}" = '[0,1]' ]
        [ "${lines[$((i + 1))]}" = '[1,1]' ]
        [ "${lines[$((i + 2))]}" = '[2,0]' ]
        [ "${lines[$((i + 3))]}" = '[3,0]' ]
        [ "${lines[$((i + 4))]}" = '[4,0]' ]
    done
    jq -e '.answer.countdown | .ok == 6 and .numbers == 9' st.json
}

@test "answer: a field of the wrong type is exit 65 naming FILE:LINE and the field" {
    printf '{"id":"a","answer":"1","completion":"1"}\n{"id":"b","answer":[1],"completion":"1"}\n' > in.jsonl
    run -65 grpo-reward --fn answer --in in.jsonl --out out.jsonl
    assert_one_line_error grpo-reward 'in.jsonl:2: field "answer": expected a string or a number, got array'
    [ ! -e out.jsonl ]
    no_temp_left .
    printf '{"id":"a","numbers":[1,"2"],"target":3,"completion":"1+2"}\n' > in.jsonl
    run -65 grpo-reward --fn answer --in in.jsonl
    assert_one_line_error grpo-reward 'in.jsonl:1: field "numbers": element 1: expected an integer'
    printf '{"id":"a","numbers":[1,2],"target":3.5,"completion":"1+2"}\n' > in.jsonl
    run -65 grpo-reward --fn answer --in in.jsonl
    assert_one_line_error grpo-reward 'in.jsonl:1: field "target": expected an integer'
}

@test "format: strict, soft and partial, with --format-tags" {
    printf '%s\n' '{"id":"a","completion":"<think>x</think>\n<answer>4</answer>"}' \
        '{"id":"a","completion":"Sure. <think>x</think> so <answer>4</answer>"}' \
        '{"id":"a","completion":"<think>x</think> and <answer>4"}' \
        '{"id":"a","completion":"<answer>4</answer><think>x</think>"}' > in.jsonl
    for mode in strict soft partial; do
        grpo-reward --fn format --format-mode $mode --in in.jsonl --quiet | jq -c .rewards.format | paste -sd' ' > $mode.txt
    done
    [ "$(cat strict.txt)" = "1 0 0 0" ]
    [ "$(cat soft.txt)" = "1 1 0 0" ]
    [ "$(cat partial.txt)" = "1 1 0.5 1" ]
    [ "$(grpo-reward --fn format --format-tags answer --in in.jsonl --quiet | jq -c .rewards.format | paste -sd' ')" = "1 1 0 1" ]
    run -64 grpo-reward --fn format --format-tags 'think,,answer' --in in.jsonl
    assert_one_line_error grpo-reward '--format-tags: expected a comma list of tag names'
}

@test "length: the DAPO ramp in tokens and in characters, the minimum, and its usage errors" {
    for n in 1 2 6 7 8 9 10 11; do
        printf '{"id":"a","completion":"%s","completion_tokens":[%s]}\n' "$(printf 'é%.0s' $(seq 1 $n))" "$(seq -s, 1 $n)"
    done > in.jsonl
    run -0 bash -c 'grpo-reward --fn length --max-len 10 --overlong-buffer 4 --min-len 2 --in in.jsonl --quiet | jq -c .rewards.length | paste -sd" "'
    [ "$output" = "-1 0 0 -0.25 -0.5 -0.75 -1 -1" ]
    run -0 bash -c 'grpo-reward --fn length --length-unit chars --max-len 10 --overlong-buffer 4 --in in.jsonl --quiet | jq -c .rewards.length | paste -sd" "'
    [ "$output" = "0 0 0 -0.25 -0.5 -0.75 -1 -1" ]
    run -64 grpo-reward --fn length --in in.jsonl
    assert_one_line_error grpo-reward 'length: set --max-len .* or --min-len'
    run -64 grpo-reward --fn length --max-len 4 --overlong-buffer 5 --in in.jsonl
    assert_one_line_error grpo-reward '--overlong-buffer \(5\) must not exceed --max-len \(4\)'
    printf '{"id":"a","completion":"abc"}\n' > bare.jsonl
    run -65 grpo-reward --fn length --max-len 4 --in bare.jsonl
    assert_one_line_error grpo-reward 'bare.jsonl:1: field "completion_tokens": expected an array of token ids'
}

@test "length: completion_tokens must be token ids, not strings, nested arrays or fractions" {
    local bad
    for bad in '["a","b","c"]' '[[1,2],[3,4,5,6,7]]' '[1,2.5]' '[1,-2]' '[{"t":1}]' '[1,true]'; do
        printf '{"id":"a","completion":"abc","completion_tokens":[1]}\n{"id":"b","completion":"abc","completion_tokens":%s}\n' "$bad" > in.jsonl
        run -65 grpo-reward --fn length --max-len 4 --in in.jsonl --out out.jsonl
        assert_one_line_error grpo-reward 'in.jsonl:2: field "completion_tokens": element [01]: expected a token id'
        [ ! -e out.jsonl ]
    done
    printf '{"id":"a","completion":"abc","completion_tokens":[ 1 , 2 ,3 ]}\n{"id":"b","completion":"","completion_tokens":[ ]}\n' > ok.jsonl
    run -0 bash -c 'grpo-reward --fn length --min-len 3 --in ok.jsonl --quiet | jq -c .rewards.length | paste -sd" "'
    [ "$output" = "0 -1" ]
}

@test "repetition: open-r1's penalty with --rep-ngram and --rep-penalty, weighted with the others" {
    printf '%s\n' '{"id":"a","answer":"4","completion":"a b c a b c a b c"}' \
        '{"id":"a","answer":"4","completion":"<think>one two three</think><answer>4</answer>"}' > in.jsonl
    grpo-reward --fn repetition --in in.jsonl --out r3.jsonl --quiet
    # trigrams of a b c a b c a b c: 7, of which 3 distinct
    jq -e -s '((.[0].rewards.repetition + (1 - 3/7)) | fabs) < 1e-15 and .[1].rewards.repetition == 0' r3.jsonl
    grpo-reward --fn repetition --rep-ngram 1 --rep-penalty -0.5 --in in.jsonl --out r1.jsonl --quiet
    jq -e -s '((.[0].rewards.repetition + 0.5 * (1 - 3/9)) | fabs) < 1e-15 and .[1].rewards.repetition == 0' r1.jsonl
    grpo-reward --fn answer:2,format:0.5,repetition --in in.jsonl --out all.jsonl --quiet
    jq -e -s '.[0].rewards.answer == 0 and .[0].rewards.format == 0 and .[0].reward == .[0].rewards.repetition
              and .[1].rewards == {"answer": 1, "format": 1, "repetition": 0} and .[1].reward == 2.5' all.jsonl
}
