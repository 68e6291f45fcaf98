#!/usr/bin/env bats
# grpo-prep --model: prompt_tokens from the model's tokenizer and chat
# template, checked against Hugging Face tokenizers + Jinja.
# needs: venv models
load helpers

setup_file() {
    export G="$GRPO_ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf"
}

needs_model() {
    [ -x "$GRPO_PY" ] || skip "no test venv (make venv)"
    [ -f "$G" ] || skip "no model (make models)"
}

@test "--model with the GGUF's own chat template matches HF + Jinja" {
    needs_model
    grpo-prep --task arith --n 40 --seed 3 --model "$G" --out p.jsonl
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/check_prompt_tokens.py" "$G" p.jsonl auto
    echo "$output" | grep -v '^ok'
    [ "$status" -eq 0 ]
    # prompt_tokens stands right after messages; it starts with <|im_start|> (id 1)
    [ "$(head -n 1 p.jsonl | jq -r 'keys_unsorted[3]')" = prompt_tokens ]
    [ "$(head -n 1 p.jsonl | jq '.prompt_tokens[0]')" = 1 ]
    # ...and ends with the generation prompt "<|im_start|>assistant\n"
    [ "$(head -n 1 p.jsonl | jq -c '.prompt_tokens[-4:]')" = "[1,520,9531,198]" ]
}

@test "--chat-template raw encodes the text alone, as the design's parity check" {
    needs_model
    printf '%s\n' '{"text":"Hello  world, 12345 caf\u00e9 <|im_end|>\tdone\n"}' '{"text":""}' \
        '{"text":"  leading spaces and \u6f22\u5b57 \ud83d\ude00"}' > in.jsonl
    grpo-prep --task jsonl --prompt-field text --model "$G" --chat-template raw --in in.jsonl --out r.jsonl
    [ "$(jq '.messages | length' r.jsonl | sort -u)" = 1 ]
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/check_prompt_tokens.py" "$G" r.jsonl raw
    echo "$output"
    [ "$status" -eq 0 ]
    # an explicit --format still adds its system message under raw
    grpo-prep --task jsonl --prompt-field text --model "$G" --chat-template raw --format answer --in in.jsonl --out f.jsonl
    [ "$(jq '.messages | length' f.jsonl | sort -u)" = 2 ]
}

@test "an HF tokenizer directory gives the same prompt_tokens as the GGUF" {
    needs_model
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_tok_dir.py" "$G" hf
    grpo-prep --task arith --n 10 --model "$G" --out a.jsonl
    grpo-prep --task arith --n 10 --model hf --out b.jsonl
    cmp a.jsonl b.jsonl
}

@test "--chat-template chatml and llama3 force a family" {
    needs_model
    grpo-prep --task arith --n 3 --model "$G" --chat-template chatml --out c.jsonl
    grpo-prep --task arith --n 3 --model "$G" --out a.jsonl
    cmp c.jsonl a.jsonl
    grpo-prep --task arith --n 3 --model "$G" --chat-template llama3 --out l.jsonl
    ! cmp -s l.jsonl a.jsonl || false
    # llama3 renders <|begin_of_text|>, which SmolLM2 spells as plain text
    [ "$(head -n 1 l.jsonl | jq '.prompt_tokens | length')" -gt 80 ]
}

@test "an unrecognised chat template is exit 65 naming --chat-template" {
    needs_model
    printf '%s' '{{ messages }}' > weird.jinja
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_tok_dir.py" "$G" hf "$T/weird.jinja"
    run -65 grpo-prep --task arith --n 1 --model hf --out x.jsonl
    assert_one_line_error grpo-prep "hf/tokenizer_config.json: chat template not recognised.*--chat-template"
    [ ! -e x.jsonl ]
    grpo-prep --task arith --n 1 --model hf --chat-template chatml --out x.jsonl
    [ "$(jq '.prompt_tokens | length' x.jsonl)" -gt 10 ]
}

@test "--model errors: missing model 66, --chat-template alone 64, a bad GGUF 65" {
    run -66 grpo-prep --task arith --n 1 --model no-such-model
    assert_one_line_error grpo-prep "no-such-model: cannot open model"
    run -64 grpo-prep --task arith --n 1 --chat-template raw
    assert_one_line_error grpo-prep "--chat-template needs --model"
    printf 'GGUF\003\000\000\000' > bad.gguf
    run -65 grpo-prep --task arith --n 1 --model bad.gguf --out y.jsonl
    assert_one_line_error grpo-prep "bad.gguf"
    [ ! -e y.jsonl ]
}

@test "special ids outside the vocabulary and a bad temperature are exit 65 naming the file and field" {
    [ -x "$GRPO_PY" ] || skip "no test venv (make venv)"
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_tiny_tokenizer.py" tok
    grpo-prep --task arith --n 1 --model tok --out ok.jsonl
    for gen in '{"bos_token_id": 1e300}' '{"eos_token_id": [2, 4000]}' '{"eos_token_id": 2.5}' \
        '{"eos_token_id": "2"}' '{"temperature": -1}'; do
        printf '%s' "$gen" > tok/generation_config.json
        run -65 grpo-prep --task arith --n 1 --model tok --out x.jsonl
        assert_one_line_error grpo-prep "tok/generation_config.json: field \"(bos_token_id|eos_token_id|temperature)\": expected"
        [ ! -e x.jsonl ]
    done
    # the same in a GGUF's metadata: an eos id past the last token
    "$GRPO_PY" - <<'PY'
import gguf
w = gguf.GGUFWriter("far.gguf", "llama")
w.add_tokenizer_model("gpt2")
w.add_tokenizer_pre("smollm")
w.add_token_list(["a", "b", "ab"])
w.add_token_merges(["a b"])
w.add_eos_token_id(7)
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
PY
    run -65 grpo-prep --task arith --n 1 --model far.gguf --out y.jsonl
    assert_one_line_error grpo-prep "far.gguf: tokenizer.ggml.eos_token_id 7 is outside the vocabulary \(3 tokens\)"
    [ ! -e y.jsonl ]
}
