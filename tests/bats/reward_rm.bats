#!/usr/bin/env bats
# grpo-reward --fn rm: a reward model (tiny random Llama / Qwen2 / Qwen3
# sequence classifiers) against an independent float64 PyTorch forward
# (tests/ref/rm_ref.py: Jinja renders the chat template, HF `tokenizers`
# encodes, transformers' last-non-pad rule picks the token), batching,
# and the errors.
# needs: venv
load helpers

REF="$GRPO_ROOT/tests/ref/rm_ref.py"

# Records the tiny tokenizer can encode (bytes 0x20..0x7C and newlines):
# a system message, several turns, a null and an absent completion, an
# empty user message, a completion holding the ChatML end token.
records() {
    cat > "$1" <<'EOF'
{"id":"a","sample":0,"messages":[{"role":"user","content":"What is 2+3?"}],"completion":"<think>2+3=5</think><answer>5</answer>"}
{"id":"a","sample":1,"messages":[{"role":"user","content":"What is 2+3?"}],"completion":"It is 6."}
{"id":"b","sample":0,"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Name a colour."}],"completion":"Blue"}
{"id":"b","sample":1,"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Name a colour."}],"completion":null}
{"id":"c","sample":0,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"},{"role":"user","content":"count to five"}],"completion":"1 2 3 4 5\nDone."}
{"id":"c","sample":1,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"},{"role":"user","content":"count to five"}]}
{"id":"d","sample":0,"messages":[{"role":"user","content":"Say the end token."}],"completion":"Here: <|im_end|> done"}
{"id":"d","sample":1,"messages":[{"role":"user","content":""}],"completion":"   spaced   out   \n\n"}
EOF
}

# The three classifiers and their reference values, made once: llama says
# num_labels by id2label and has no pad token (the last token is read);
# qwen2 says num_labels and pads with "\n" (id 4), which every ChatML text
# ends with, so the value is read one token earlier; qwen3 says neither (the
# label count comes from score.weight) and pads with an id the text lacks.
setup_file() {
    [ -x "$GRPO_PY" ] || return 0
    local d="$BATS_FILE_TMPDIR"
    records "$d/recs.jsonl"
    "$GRPO_PY" "$REF" make llama "$d/llama" --label-key id2label --seed 11
    "$GRPO_PY" "$REF" make qwen2 "$d/qwen2" --label-key num_labels --pad 4 --seed 12
    "$GRPO_PY" "$REF" make qwen3 "$d/qwen3" --label-key none --pad 0 --seed 13
    for m in llama qwen2 qwen3; do "$GRPO_PY" "$REF" score "$d/$m" "$d/recs.jsonl" "$d/$m.ref"; done
}

need_models() {
    [ -x "$GRPO_PY" ] || skip "no test venv (make venv)"
    D="$BATS_FILE_TMPDIR"
}

@test "rm on tiny Llama, Qwen2 and Qwen3 classifiers matches the PyTorch float64 reference within 1e-4" {
    need_models
    for m in llama qwen2 qwen3; do
        grpo-reward --fn rm --rm-model "$D/$m" --in "$D/recs.jsonl" --out $m.jsonl --stats $m.stats --quiet
        # values are O(1) (here -2.3 .. 0); fp32 through 2 layers of width 64-96
        # is off by ~1e-6, any wrong op (a missed pad rule, the wrong token, a
        # missing system message) by 1e-2 or more
        run "$GRPO_PY" "$REF" compare $m.jsonl "$D/$m.ref" 1e-4
        echo "$m: $output"
        [ "$status" -eq 0 ]
        jq -e '.rm.sequences == 8 and .rm.tokens > 400 and .rm.seconds >= 0 and .rewards.rm.count == 8' $m.stats
        # reward = rewards.rm, every input field kept
        jq -e -s 'all(.[]; .reward == .rewards.rm and (.messages | length) > 0)' $m.jsonl
    done
    # the pad rule drops the one trailing "\n" of each of qwen2's 8 texts
    [ "$(jq .rm.tokens qwen2.stats)" -eq $(($(jq .rm.tokens llama.stats) - 8)) ]
}

@test "--rm-device: cuda without a GPU or a CUDA build exits 69 in one line; on a GPU, the CPU's values within bf16 tolerance" {
    need_models
    run grpo-reward --fn rm --rm-model "$D/llama" --rm-device cuda --in "$D/recs.jsonl" --out gpu.jsonl --quiet
    if [ "$status" -eq 69 ]; then
        assert_one_line_error grpo-reward "--rm-device cuda: (this build has no CUDA support|no CUDA device)"
        skip "no CUDA device: the GPU half did not run"
    fi
    [ "$status" -eq 0 ]
    for m in llama qwen2 qwen3; do
        grpo-reward --fn rm --rm-model "$D/$m" --rm-device cuda --rm-batch 3 --in "$D/recs.jsonl" --out g$m.jsonl --quiet
        # bf16 weights and products through 2 layers: values O(1) off by ~1e-2 at most
        run "$GRPO_PY" "$REF" compare g$m.jsonl "$D/$m.ref" 3e-2
        echo "$m: $output"
        [ "$status" -eq 0 ]
    done
}

@test "--rm-batch 1, 3 and 16 and --threads 1 agree (byte-identical where weights are packed)" {
    need_models
    for b in 1 3 16; do
        grpo-reward --fn rm --rm-model "$D/qwen2" --rm-batch $b --in "$D/recs.jsonl" --out b$b.jsonl --quiet
    done
    grpo-reward --fn rm --rm-model "$D/qwen2" --threads 1 --in "$D/recs.jsonl" --out t1.jsonl --quiet
    # packed sequences do not see each other; only the summation order of
    # the matrix products may change with the batch: none with packed weights
    # (AVX-512), a few ulp with OpenBLAS (seen: 1e-6 relative on AMD Zen)
    for f in b3 b16 t1; do
        run "$GRPO_PY" "$REF" compare $f.jsonl <(jq '.rewards.rm' b1.jsonl) 1e-5
        echo "$f: $output"
        [ "$status" -eq 0 ]
    done
    if grep -q avx512f /proc/cpuinfo; then
        cmp b1.jsonl b16.jsonl
    fi
}

@test "rm under ASan (the driver of test_reward_rm) agrees with the reference" {
    need_models
    [ -x "$GRPO_ROOT/build/tests-asan/test_reward_rm" ] || skip "no ASan build (make unit-asan)"
    GRPO_RM_DIR="$D/qwen3" GRPO_RM_RECORDS="$D/recs.jsonl" GRPO_RM_BATCH=3 \
        "$GRPO_ROOT/build/tests-asan/test_reward_rm" > asan.txt
    run "$GRPO_PY" "$REF" compare asan.txt "$D/qwen3.ref" 1e-4
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "no --rm-model is a usage error (64)" {
    records recs.jsonl
    run -64 grpo-reward --fn rm --in recs.jsonl
    assert_one_line_error grpo-reward "--fn rm needs --rm-model"
}

@test "a causal LM, two labels, a missing chat template: data errors (65) naming what is wrong" {
    need_models
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" make-tiny llama lm
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_tiny_tokenizer.py" lm
    run -65 grpo-reward --fn rm --rm-model lm --in "$D/recs.jsonl"
    assert_one_line_error grpo-reward 'architecture "LlamaForCausalLM" is not a sequence classifier'
    "$GRPO_PY" "$REF" make llama two --labels 2
    run -65 grpo-reward --fn rm --rm-model two --in "$D/recs.jsonl"
    assert_one_line_error grpo-reward "num_labels is 2; --fn rm reads a reward model with one label"
    cp -r "$D/llama" notmpl
    jq 'del(.chat_template)' "$D/llama/tokenizer_config.json" > notmpl/tokenizer_config.json
    run -65 grpo-reward --fn rm --rm-model notmpl --in "$D/recs.jsonl"
    assert_one_line_error grpo-reward "chat template is missing; choose one with --rm-chat-template"
    # and the tools that generate refuse a classifier
    echo "1 2 3" > toks.txt
    GRPO_MODEL_DIR="$D/llama" GRPO_MODEL_TOKENS=toks.txt run -65 "$GRPO_ROOT/build/tests/test_model"
    [[ "$output" == *'"LlamaForSequenceClassification" is a sequence classifier (a reward model), not a causal LM'* ]]
}

@test "a record without messages, or with a bad message, is a data error naming FILE:LINE" {
    need_models
    head -n 2 "$D/recs.jsonl" > bad.jsonl
    echo '{"id":"x","completion":"no conversation"}' >> bad.jsonl
    run -65 grpo-reward --fn rm --rm-model "$D/llama" --in bad.jsonl --out out.jsonl
    assert_one_line_error grpo-reward 'bad.jsonl:3: field "messages": expected an array of \{role, content\} messages, got nothing'
    [ ! -e out.jsonl ]
    no_temp_left .
    echo '{"id":"x","messages":"hi","completion":"a"}' > bad.jsonl
    run -65 grpo-reward --fn rm --rm-model "$D/llama" --in bad.jsonl
    assert_one_line_error grpo-reward 'bad.jsonl:1: field "messages": expected an array .*, got string'
    echo '{"id":"x","messages":[{"role":"user"}],"completion":"a"}' > bad.jsonl
    run -65 grpo-reward --fn rm --rm-model "$D/llama" --in bad.jsonl
    assert_one_line_error grpo-reward 'bad.jsonl:1: field "messages": message 0: expected'
}

@test "a conversation longer than the reward model's context is a data error naming the record" {
    need_models
    # 128 positions; the template and the question take ~40 tokens, the
    # completion one token per character
    long=$(printf 'x%.0s' $(seq 1 120))
    { head -n 1 "$D/recs.jsonl"; printf '{"id":"l","messages":[{"role":"user","content":"q"}],"completion":"%s"}\n' "$long"; } > long.jsonl
    run -65 grpo-reward --fn rm --rm-model "$D/llama" --in long.jsonl
    assert_one_line_error grpo-reward "long.jsonl:2: field \"completion\": the conversation with this completion is [0-9]+ tokens, longer than the reward model's context of 128"
}

@test "a multi-turn record is scored as its messages plus its turns (the whole episode), as the reference" {
    need_models
    cat > turns.jsonl <<'JSONL'
{"id":"t","sample":0,"messages":[{"role":"user","content":"What is 6*7?"}],"completion":"42","turns":[{"role":"assistant","content":"calc 6*7"},{"role":"tool","content":"42"},{"role":"assistant","content":"42"}],"completion_mask":[1,1,0,1]}
{"id":"t","sample":1,"messages":[{"role":"user","content":"What is 6*7?"}],"completion":"42"}
{"id":"t","sample":2,"messages":[{"role":"user","content":"What is 6*7?"}],"completion":"42","turns":null}
JSONL
    "$GRPO_PY" "$REF" score "$D/llama" turns.jsonl turns.ref
    grpo-reward --fn rm --rm-model "$D/llama" --in turns.jsonl --out out.jsonl --quiet
    run "$GRPO_PY" "$REF" compare out.jsonl turns.ref 1e-4
    echo "$output"
    [ "$status" -eq 0 ]
    # the episode scores otherwise than its last answer alone; null turns is
    # single-turn (the same text: equal up to OpenBLAS's summation order)
    jq -e -s '((.[0].rewards.rm - .[1].rewards.rm) | fabs) > 1e-3 and ((.[1].rewards.rm - .[2].rewards.rm) | fabs) < 1e-5' out.jsonl
    echo '{"id":"x","messages":[{"role":"user","content":"q"}],"completion":"a","turns":"a"}' > bad.jsonl
    run -65 grpo-reward --fn rm --rm-model "$D/llama" --in bad.jsonl
    assert_one_line_error grpo-reward 'bad.jsonl:1: field "turns": expected an array of messages, got string'
}
