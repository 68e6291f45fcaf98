#!/usr/bin/env bats
# grpo-update on multi-turn records (formats/loss.md, "Multi-turn records"):
# completion_mask picks the tokens trained on, environment tokens are
# context only, a record without the mask (or with all 1s) trains exactly as
# before, and a bad mask or log-prob is 65 naming file, line and field. The
# loss and gradient against autograd: tests/bats/train_grad.bats (turns cases).
# needs: venv
load helpers

setup_file() {
    update_fixture
    [ -x "$GRPO_PY" ] || return 0
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/update_ref.py" make-turns "$BATS_FILE_TMPDIR/batch.jsonl" \
        "$BATS_FILE_TMPDIR/turns.jsonl" 97
}

B() { echo "$BATS_FILE_TMPDIR/batch.jsonl"; }
MT() { echo "$BATS_FILE_TMPDIR/turns.jsonl"; }
ref() { "$GRPO_PY" "$GRPO_ROOT/tests/ref/update_ref.py" "$@"; }

@test "a completion_mask of all 1s (or null) trains exactly as a record without one" {
    needs_tiny
    grpo-update --model "$TINY" --in "$(B)" --out a --lr 1e-3 --beta 0.04 --metrics a.jsonl 2> /dev/null
    jq -c '.completion_mask = [.completion_tokens[] | 1]' "$(B)" > ones.jsonl
    grpo-update --model "$TINY" --in ones.jsonl --out b --lr 1e-3 --beta 0.04 --metrics b.jsonl 2> /dev/null
    jq -c '.completion_mask = null' "$(B)" > null.jsonl
    grpo-update --model "$TINY" --in null.jsonl --out c --lr 1e-3 --beta 0.04 2> /dev/null
    cmp a/model.safetensors b/model.safetensors
    cmp a/grpo/optimizer.safetensors b/grpo/optimizer.safetensors
    cmp a/model.safetensors c/model.safetensors
    diff <(jq -c 'del(.seconds, .tokens_per_second)' a.jsonl) <(jq -c 'del(.seconds, .tokens_per_second)' b.jsonl)
}

@test "environment tokens are context: their log-probs are never read, their ids are" {
    needs_tiny
    grpo-update --model "$TINY" --in "$(MT)" --out a --lr 1e-3 --metrics a.jsonl 2> err
    # the log-probs of mask-0 tokens may be numbers too; nothing reads them
    jq -c '.logprobs = [.logprobs[] | if . == null then -123.5 else . end]' "$(MT)" > num.jsonl
    grpo-update --model "$TINY" --in num.jsonl --out b --lr 1e-3 2> /dev/null
    cmp a/model.safetensors b/model.safetensors
    # an environment token before the policy's later tokens is in their context
    jq -c '.completion_tokens[1] = (if .completion_tokens[1] == 50 then 51 else 50 end)' "$(MT)" > ctx.jsonl
    grpo-update --model "$TINY" --in ctx.jsonl --out c --lr 1e-3 2> /dev/null
    ref differ a/model.safetensors c/model.safetensors
    # counts are of the policy's tokens: the stderr line and completions/mean_length
    local model all n
    model=$(jq -s '[.[].completion_mask | add] | add' "$(MT)")
    all=$(jq -s '[.[].completion_tokens | length] | add' "$(MT)")
    n=$(jq -s 'length' "$(MT)")
    [ "$model" -lt "$all" ]
    grep -q " $model completion tokens trained on" err || { cat err; false; }
    jq -e --argjson m "$model" --argjson n "$n" '."completions/mean_length" == $m / $n' a.jsonl
}

@test "environment tokens at the end of a completion change nothing: the same update as without them" {
    needs_tiny
    # trailing env tokens predict nothing and precede nothing
    jq -c '.completion_tokens += [5, 6, 7] | .completion_mask += [0, 0, 0] | .logprobs += [null, null, null]' \
        "$(MT)" > tail.jsonl
    grpo-update --model "$TINY" --in "$(MT)" --out a --lr 1e-3 --beta 0.04 2> /dev/null
    grpo-update --model "$TINY" --in tail.jsonl --out b --lr 1e-3 --beta 0.04 2> /dev/null
    # AdamW's first moment after one step is 0.1 * gradient; more rows in a
    # GEMM may change OpenBLAS's summation order, hence a tolerance
    ref close a/grpo/optimizer.safetensors b/grpo/optimizer.safetensors 1e-5
}

@test "a record whose mask is all 0 counts as an empty completion; a batch of them has nothing to train on" {
    needs_tiny
    { head -n 1 "$(MT)" | jq -c '.completion_mask = [.completion_mask[] | 0]'; tail -n +2 "$(MT)"; } > z.jsonl
    run grpo-update --model "$TINY" --in z.jsonl --out a --lr 1e-3
    [ "$status" -eq 0 ]
    printf '%s\n' "$output" | grep -q "16 completions"
    jq -c '.completion_mask = [.completion_mask[] | 0]' "$(MT)" > zz.jsonl
    run grpo-update --model "$TINY" --in zz.jsonl --out b
    [ "$status" -eq 65 ]; assert_one_line_error grpo-update "no record to train on"
    [ ! -e b ]
}

@test "bad completion_mask or log-probs: 65 naming file, line and field; nothing written" {
    needs_tiny
    bad() { # FILTER PATTERN: the third record changed by jq FILTER is 65 with an error matching PATTERN
        { head -n 2 "$(MT)"; sed -n 3p "$(MT)" | jq -c "$1"; } > bad.jsonl
        run grpo-update --model "$TINY" --in bad.jsonl --out c
        [ "$status" -eq 65 ] || { echo "$1: status $status: $output"; return 1; }
        assert_one_line_error grpo-update "$2"
        [ ! -e c ]
    }
    bad '.completion_mask = .completion_mask[1:]' 'bad.jsonl:3: field "completion_mask": expected one entry per completion token \([0-9]+\), got [0-9]+'
    bad '.completion_mask[0] = 2' 'bad.jsonl:3: field "completion_mask": entry 0: expected 0 or 1'
    bad '.completion_mask[2] = 0.5' 'bad.jsonl:3: field "completion_mask": entry 2: expected 0 or 1'
    bad '.completion_mask[0] = "1"' 'bad.jsonl:3: field "completion_mask": entry 0: expected 0 or 1'
    bad '.completion_mask = "1101"' 'bad.jsonl:3: field "completion_mask": expected an array of 0 and 1'
    bad '.logprobs[0] = null' 'bad.jsonl:3: field "logprobs": entry 0: expected a finite log-probability <= 0 \(completion_mask 1'
    bad '.logprobs[1] = "x"' 'bad.jsonl:3: field "logprobs": entry 1: expected null or a number \(completion_mask 0\)'
    bad '.logprobs = .logprobs[1:]' 'bad.jsonl:3: field "logprobs": expected one per completion token'
    # without a mask a null log-prob is an error wherever it is
    { head -n 2 "$(B)"; sed -n 3p "$(B)" | jq -c '.logprobs[1] = null'; } > s.jsonl
    run grpo-update --model "$TINY" --in s.jsonl --out c
    [ "$status" -eq 65 ]; assert_one_line_error grpo-update 's.jsonl:3: field "logprobs": entry 1: expected a finite log-probability <= 0$'
    no_temp_left .
}

@test "multi-turn records through every loss and importance level, --mask-truncated and LoRA" {
    needs_tiny
    jq -c 'if .sample == 1 then .finish_reason = "length" else . end' "$(MT)" > m.jsonl
    for args in "--loss grpo" "--loss bnpo --importance-level sequence" "--loss dr_grpo" "--loss dapo --beta 0.04" \
        "--loss cispo" "--loss sapo --importance-level sequence" "--top-entropy-quantile 0.3 --entropy-coef 0.01" \
        "--off-policy-mask-threshold 0.1" "--is-correction token --is-mode truncate" "--is-correction sequence" \
        "--mask-truncated --lora-r 2"; do
        # shellcheck disable=SC2086
        grpo-update --model "$TINY" --in m.jsonl --out c --lr 1e-3 $args --metrics m1.jsonl 2> /dev/null ||
            { echo "failed: $args"; false; }
        ref differ "$TINY/model.safetensors" c/model.safetensors 2> /dev/null || [ -e c/adapter_model.safetensors ]
        rm -rf c
    done
    [ "$(wc -l < m1.jsonl)" -eq 11 ]
    jq -e -s 'all(.[]; (.loss | isnan | not) and .grad_norm > 0)' m1.jsonl
}

@test "grpo-reward --fn env, grpo-advantage and grpo-update in a pipe on multi-turn records" {
    needs_tiny
    # the environment's verdicts: env_reward on most records, none on every fifth
    jq -c 'del(.reward, .advantage) | if (.sample + (.id | ltrimstr("p") | tonumber)) % 5 == 4 then .
           else .env_reward = ((.completion_tokens | add) % 3 - 1) end' "$(MT)" > rollouts.jsonl
    grpo-reward --fn env --in rollouts.jsonl --quiet | grpo-advantage --out adv.jsonl
    # every field of the rollout passes through, in order
    diff <(jq -c 'del(.rewards, .reward, .advantage)' adv.jsonl) rollouts.jsonl
    jq -e -s 'map(select(.env_reward == null)) | length > 0 and all(.[]; .rewards.env == null and .advantage == null)' adv.jsonl
    run grpo-update --model "$TINY" --in adv.jsonl --out c --lr 1e-3 --metrics m.jsonl
    [ "$status" -eq 0 ]
    local skipped
    skipped=$(jq -s 'map(select(.advantage == null)) | length' adv.jsonl)
    printf '%s\n' "$output" | grep -q "($skipped skipped without advantage" || { echo "$output"; false; }
    ref differ "$TINY/model.safetensors" c/model.safetensors
}
