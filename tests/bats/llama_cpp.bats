#!/usr/bin/env bats
# llama.cpp itself loads what grpo-export --format gguf writes. llama.cpp's
# library (pinned, built by `make llama-cpp`: scripts/setup/llama_cpp.sh) runs
# through tests/llama/llama_ids.c, which prints llama.cpp's token ids of a text
# and its greedy continuation; both are compared with grpo-prep's ids and
# grpo-rollout --temperature 0 on the model that was exported (a GGUF, an HF
# directory, an adapter checkpoint), so an export that our own loader reads
# back the same wrong way (a Q/K layout, a RoPE convention) still fails.
# tests/llama/llama_logits prints llama.cpp's logits at every position, for
# the mixture of experts (qwen3moe), compared with ours within a tolerance.
# needs: venv models llama.cpp
load helpers

LLAMA="$GRPO_ROOT/build/llama.cpp/llama_ids"
LOGITS="$GRPO_ROOT/build/llama_logits"
SMOL="$GRPO_ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf"

needs_llama() { [ -x "$LLAMA" ] || skip "llama.cpp not built (make llama-cpp)"; }
needs_logits() { [ -x "$LOGITS" ] || skip "tests/llama/llama_logits not built (make llama-cpp)"; }
needs_smol() { [ -f "$SMOL" ] || skip "no model (make models)"; }

# llama MODEL N TEXT: llama.cpp's ids of TEXT in L_PROMPT, its N greedy tokens
# in L_GEN, its warnings and errors in L_ERR; fails when llama_ids does.
llama() {
    run --separate-stderr "$LLAMA" "$1" "$2" "$3"
    L_ERR=$stderr
    [ "$status" -eq 0 ] || { echo "llama_ids $1: status $status: $stderr"; return 1; }
    L_PROMPT=$(printf '%s\n' "$output" | sed -n 1p)
    L_GEN=$(printf '%s\n' "$output" | sed -n 2p)
}

# ours_ids MODEL TEXT: grpo-prep's ids of TEXT as is (--chat-template raw).
ours_ids() {
    jq -nc --arg p "$2" '{prompt: $p, answer: "-"}' |
        grpo-prep --task jsonl --model "$1" --chat-template raw | jq -r '.prompt_tokens | map(tostring) | join(" ")'
}

# ours_greedy MODEL IDS N: grpo-rollout's greedy tokens (N at most) after the ids IDS.
ours_greedy() {
    jq -nc --arg t "$2" '{id: "p", prompt_tokens: ($t | split(" ") | map(tonumber))}' |
        grpo-rollout --model "$1" -k 1 --temperature 0 --max-new-tokens "$3" --threads 1 |
        jq -r '.completion_tokens | map(tostring) | join(" ")'
}

# same WHAT A B: A and B are equal, both shown when not.
same() {
    [ "$2" = "$3" ] && return 0
    printf '%s differ:\n  llama.cpp: %s\n  ours:      %s\n' "$1" "$2" "$3"
    return 1
}

# same_greedy WHAT MODEL N: grpo-rollout's greedy N tokens after L_PROMPT on
# MODEL (the export's source) are llama.cpp's L_GEN; when the rollout stopped at the model's
# end-of-sequence token, the tokens up to it (llama_ids never stops: llama.cpp
# would end at any token named like an end marker, <|endoftext|> too).
same_greedy() {
    local r ours
    r=$(jq -nc --arg t "$L_PROMPT" '{id: "p", prompt_tokens: ($t | split(" ") | map(tonumber))}' |
        grpo-rollout --model "$2" -k 1 --temperature 0 --max-new-tokens "$3" --threads 1)
    ours=$(jq -r '.completion_tokens | map(tostring) | join(" ")' <<< "$r")
    if [ "$(jq -r .finish_reason <<< "$r")" = stop ]; then
        same "$1 (up to the rollout's stop)" "$(cut -d' ' -f1-"$(wc -w <<< "$ours")" <<< "$L_GEN")" "$ours"
    else
        same "$1" "$L_GEN" "$ours"
    fi
}

# Texts for the tokenizer: digits (split one by one), spaces and newlines of
# every run length, contractions, accents, CJK, an emoji, a tab, CR LF, and
# the special tokens of a ChatML prompt written in the text.
TEXTS=(
    "The capital of France is"
    $'Hello  world!\n\n  It\'s 12345 apples, they\'d say; naïve café — 日本語 🙂\ttabs\r\nend   '
    $'<|im_start|>system\nYou are a calculator.<|im_end|>\n<|im_start|>user\nWhat is 7 times 6?<|im_end|>\n<|im_start|>assistant\n'
)

@test "SmolLM2 exported to f32: llama.cpp loads it without a warning, tokenizes and continues greedily as our tools on the source GGUF" {
    needs_llama; needs_smol
    grpo-export --model "$SMOL" --format gguf --dtype f32 --out x.gguf
    for text in "${TEXTS[@]}"; do
        llama x.gguf 16 "$text"
        [ -z "$L_ERR" ] || { echo "llama.cpp warned: $L_ERR"; false; }
        same "ids of '$text'" "$L_PROMPT" "$(ours_ids "$SMOL" "$text")"
        [ "$(wc -w <<< "$L_GEN")" -eq 16 ]
        same_greedy "greedy continuation of '$text'" "$SMOL" 16
    done
}

@test "SmolLM2 exported to f16 and q8_0: llama.cpp loads it, tokenizes as grpo-prep does and generates 16 tokens" {
    needs_llama; needs_smol
    text=${TEXTS[0]}
    for dt in f16 q8_0; do
        grpo-export --model "$SMOL" --format gguf --dtype "$dt" --out "x.$dt.gguf"
        llama "x.$dt.gguf" 16 "$text"
        [ -z "$L_ERR" ] || { echo "llama.cpp warned: $L_ERR"; false; }
        same "$dt ids" "$L_PROMPT" "$(ours_ids "$SMOL" "$text")"
        [ "$(wc -w <<< "$L_GEN")" -eq 16 ]
        # rounding may tip a greedy choice: reported, not required
        if same_greedy "$dt greedy" "$SMOL" 16 > /dev/null; then
            echo "# $dt: greedy tokens equal" >&3
        else
            echo "# $dt: greedy tokens differ" >&3
        fi
    done
}

# o200k's pre-tokenizer (tokenizer.ggml.pre "gpt-4o": GPT-4o, gpt-oss) on
# what splits it apart from the others: case runs, contraction suffixes,
# digit triples, "/" after punctuation and newlines, whitespace runs, CJK.
# llama.cpp rewrites o200k's regex with ASCII-only case classes and without
# \p{M}, so a non-ASCII lower-case letter before an upper-case one ("оЛ") or
# combining marks before "'s" split otherwise there; Hugging Face tokenizers
# is the reference for those (export.bats, check_tokenizer.py).
O200K_TEXTS=(
    "camelCase getHTTPResponseCode XMLHttpRequest iPhone McDonald's HELLOworld helloWORLD ÉCOLEécole écoleÉCOLE"
    "I'M they'll don't DON'T We'Ve SHE'D it'S o'clock rock'n'roll 'tis x''s ABC'sdef abc'Sdef Ab'LLc"
    "1 12 123 1234 12345 123456 1234567 ١٢٣٤ ½ 0x7F 3.14159 1,000,000 v1.2.3 a1b22c333d4444"
    $'a/b/c //comment\n/path ./x .\n/\n/ :// ?!/\r\n/ </div>\n/ */\n'
    $'  \n  \n\n \t\n\r\n  x  \n\t\t\n\n   \r\r\n\u00a0\n\u3000\n'
    "中文English混合テキストKatakanaカタカナ한국어Korean 👍🏽 🇫🇷 ❤️"
)

@test "a GGUF whose tokenizer.ggml.pre is gpt-4o (o200k): llama.cpp's ids are grpo-prep's" {
    needs_llama; needs_smol
    [ -x "$GRPO_PY" ] || skip "no test venv (make venv)"
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/edit_gguf.py" "$GRPO_ROOT/build/llama.cpp/src" "$SMOL" o200k.gguf \
        "kv['tokenizer.ggml.pre'][0] = 'gpt-4o'"
    for text in "${O200K_TEXTS[@]}" "${TEXTS[@]}"; do
        llama o200k.gguf 0 "$text"
        [ -z "$L_ERR" ] || { echo "llama.cpp warned: $L_ERR"; false; }
        same "ids of '$text'" "$L_PROMPT" "$(ours_ids o200k.gguf "$text")"
    done
    # the same texts split otherwise under SmolLM2's own pre-tokenizer
    llama "$SMOL" 0 "${O200K_TEXTS[0]}"
    [ "$L_PROMPT" != "$(ours_ids o200k.gguf "${O200K_TEXTS[0]}")" ]
}

@test "tiny HF llama (plain, tied with llama3 RoPE), qwen2 and qwen3 exported to f32: llama.cpp's ids and greedy tokens are ours on the HF directory" {
    needs_llama
    [ -x "$GRPO_PY" ] || skip "no test venv (make venv)"
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" tiny-suite tiny
    text=$'hello world, it\'s 42!\n'
    n=0
    for d in tiny/*/; do
        d=${d%/}
        "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_tiny_tokenizer.py" "$d"
        grpo-export --model "$d" --format gguf --dtype f32 --out "$d.gguf"
        llama "$d.gguf" 16 "$text"
        same "$d ids" "$L_PROMPT" "$(ours_ids "$d" "$text")"
        same_greedy "$d greedy" "$d" 16
        n=$((n + 1))
    done
    [ "$n" -eq 7 ]
}

@test "tiny qwen3_moe exported to f32: llama.cpp's logits are ours on the HF directory; its ids and greedy tokens too" {
    needs_llama; needs_logits
    [ -x "$GRPO_PY" ] || skip "no test venv (make venv)"
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" make-tiny qwen3_moe moe --norm-topk
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_tiny_tokenizer.py" moe
    grpo-export --model moe --format gguf --dtype f32 --out moe.gguf
    run --separate-stderr "$LOGITS" moe.gguf moe/tokens.txt llama.f64
    echo "$stderr"
    [ "$status" -eq 0 ]
    GRPO_MODEL_DIR=moe GRPO_MODEL_TOKENS=moe/tokens.txt GRPO_MODEL_OUT=ours.f32 run "$GRPO_ROOT/build/tests/test_model"
    [ "$status" -eq 0 ]
    # 1e-4, as against the float64 reference (model.bats): llama.cpp in float32
    # with a float32 cache and no flash attention; measured 1.7e-6
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" compare ours.f32 llama.f64 1e-4
    echo "$output"
    [ "$status" -eq 0 ]
    text=$'hello world, it\'s 42!\n'
    llama moe.gguf 16 "$text"
    same "qwen3_moe ids" "$L_PROMPT" "$(ours_ids moe "$text")"
    same_greedy "qwen3_moe greedy" moe 16
}

@test "a tiny llama exported to q4_k: llama.cpp's logits on our Q4_K blocks are ours on the same file" {
    needs_llama; needs_logits
    [ -x "$GRPO_PY" ] || skip "no test venv (make venv)"
    # 256 wide, so every matrix is Q4_K (rows of whole super-blocks)
    make_wide_llama wide
    grpo-export --model wide --format gguf --dtype q4_k --out q4k.gguf
    run --separate-stderr "$LOGITS" q4k.gguf wide/tokens.txt llama.f64
    echo "$stderr"
    [ "$status" -eq 0 ]
    GRPO_MODEL_DIR=q4k.gguf GRPO_MODEL_TOKENS=wide/tokens.txt GRPO_MODEL_OUT=ours.f32 \
        run "$GRPO_ROOT/build/tests/test_model"
    [ "$status" -eq 0 ]
    # llama.cpp rounds the activations to 8 bits (Q8_K, a scale per 256) for
    # its Q4_K dot products, we keep them float32 over the same weights:
    # 0.1 absolute on logits up to 3.3 (measured 0.071; a Q8_0 export of the
    # same model, Q8_0 activations there, 0.040). The weights' values
    # themselves are checked exactly against gguf-py (update_base_weights.bats).
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" compare ours.f32 llama.f64 0.1
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "a LoRA checkpoint of grpo-update, merged into a GGUF: llama.cpp continues as grpo-rollout does on the checkpoint" {
    needs_llama
    [ -x "$GRPO_PY" ] || skip "no test venv (make venv)"
    make_tiny_llama tiny
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/update_ref.py" make-batch batch.jsonl 16 97
    grpo-update --model tiny --in batch.jsonl --out ad --lr 0.1 --lora-r 4 --lora-alpha 8 \
        --lora-targets q,k,v,o,gate,up,down --threads 1
    [ -f ad/adapter_model.safetensors ]
    grpo-export --model ad --format gguf --dtype f32 --out ad.gguf
    llama ad.gguf 16 "hello world"
    same_greedy "greedy of the merged adapter" ad 16
    # the adapter changed the model: the base continues otherwise
    [ "$L_GEN" != "$(ours_greedy tiny "$L_PROMPT" 16)" ]
}

@test "llama_ids fails on a file llama.cpp cannot load (65) and on bad usage (64)" {
    needs_llama; needs_smol
    head -c 100000 "$SMOL" > cut.gguf
    run --separate-stderr "$LLAMA" cut.gguf 4 "hi"
    [ "$status" -eq 65 ]
    [[ "$stderr" == *"could not load cut.gguf"* ]]
    run --separate-stderr "$LLAMA" cut.gguf
    [ "$status" -eq 64 ]
    run --separate-stderr "$LLAMA" cut.gguf x "hi"
    [ "$status" -eq 64 ]
}
