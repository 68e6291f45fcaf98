#!/usr/bin/env bats
# The GGUF export (lib/export/gguf_export.c over lib/formats/gguf_write.c) through the export driver of
# build/tests/test_gguf_write (until bin/grpo-export exists), checked with
# gguf-py (tests/ref/check_gguf_export.py: keys, types, tokenizer arrays,
# tensor order and shapes, data equal to gguf-py's own quantize) and by
# loading the file back with our loader and comparing logits
# (tests/ref/model_ref.py and build/tests/test_model's driver mode).
# needs: venv models
load helpers

BIN="$GRPO_ROOT/build/tests/test_gguf_write"
MODEL_BIN="$GRPO_ROOT/build/tests/test_model"
CHECK="$GRPO_ROOT/tests/ref/check_gguf_export.py"
SMOL="$GRPO_ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf"

# export_dtypes DIR: DIR exported to DIR.DTYPE.gguf in every dtype, each
# (DIR, file, dtype) appended to the array triples.
export_dtypes() {
    local dt
    for dt in f32 f16 bf16 q8_0; do
        run "$BIN" --export "$1" "$1.$dt.gguf" "$dt"
        echo "$output"
        [ "$status" -eq 0 ]
        triples+=("$1" "$1.$dt.gguf" "$dt")
    done
}

# logits MODEL TOKENS OUT: our prefill logits for TOKENS as raw float32.
logits() {
    GRPO_MODEL_DIR="$1" GRPO_MODEL_TOKENS="$2" GRPO_MODEL_OUT="$3" run "$MODEL_BIN"
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "tiny HF llama/qwen2/qwen3 exported in every dtype: llama.cpp's keys, the tokenizer, gguf-py-equal data, the reference logits" {
    [ -x "$GRPO_PY" ] || skip "no test venv (make venv)"
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" tiny-suite "$T/tiny"
    echo "$output"
    [ "$status" -eq 0 ]
    triples=()
    for d in "$T"/tiny/*/; do
        d=${d%/}
        "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_tiny_tokenizer.py" "$d"
        export_dtypes "$d"
    done
    [ "${#triples[@]}" -eq 84 ]
    run "$GRPO_PY" "$CHECK" from-hf "${triples[@]}"
    echo "$output"
    [ "$status" -eq 0 ]
    no_temp_left "$T/tiny"
    # F32 holds the weights exactly: the logits of the GGUF (Q/K permuted,
    # RoPE factors as rope_freqs) match the float64 reference of the HF
    # model as closely as the HF directory's own do (model.bats: 1e-4).
    for d in "$T"/tiny/*/; do
        d=${d%/}
        logits "$d.f32.gguf" "$d/tokens.txt" "$d.ours.f32"
        run "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" compare "$d.ours.f32" "$d/ref.f64" 1e-4
        echo "$(basename "$d"): $output"
        [ "$status" -eq 0 ]
    done
}

@test "tiny qwen3_moe exported in every dtype: qwen3moe keys, stacked experts, gguf-py-equal data, gguf-py's weights give our logits" {
    [ -x "$GRPO_PY" ] || skip "no test venv (make venv)"
    d="$T/moe"
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" make-tiny qwen3_moe "$d" --norm-topk
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_tiny_tokenizer.py" "$d"
    triples=()
    export_dtypes "$d"
    run "$GRPO_PY" "$CHECK" from-hf "${triples[@]}"
    echo "$output"
    [ "$status" -eq 0 ]
    # each file read back by our loader (every expert a slice of its layer's
    # tensor) and by gguf-py: the same logits, 1e-4 (measured 1.2e-6 to 1.6e-6)
    for dt in f32 f16 bf16 q8_0; do
        run "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" gguf-logits "$d.$dt.gguf" "$d/tokens.txt" "$d.$dt.ref.f64"
        echo "$output"
        [ "$status" -eq 0 ]
        logits "$d.$dt.gguf" "$d/tokens.txt" "$d.$dt.ours.f32"
        run "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" compare "$d.$dt.ours.f32" "$d.$dt.ref.f64" 1e-4
        echo "$dt: $output"
        [ "$status" -eq 0 ]
    done
    # F32 holds the weights: the GGUF's logits are the HF directory's, bit for bit
    logits "$d" "$d/tokens.txt" "$d.hf.f32"
    cmp "$d.hf.f32" "$d.f32.ours.f32"
}

@test "a mixture llama.cpp's qwen3moe would compute otherwise (no renormalisation, a dense layer) has no GGUF: 65" {
    [ -x "$GRPO_PY" ] || skip "no test venv (make venv)"
    for v in "plain" "dense --norm-topk --dense-layers 1"; do
        set -- $v
        "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" make-tiny qwen3_moe "$1" "${@:2}"
        "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_tiny_tokenizer.py" "$1"
        run "$BIN" --export "$1" "$1.gguf" f32
        echo "$output"
        [ "$status" -eq 65 ]
        [[ "$output" == *"llama.cpp's qwen3moe renormalises the top-k weights and has no dense FFN layers"* ]]
        [ ! -e "$1.gguf" ]
    done
    no_temp_left .
}

@test "SmolLM2 GGUF exported to Q8_0: keys and tokenizer copied, every tensor gguf-py's quantize of the source" {
    [ -x "$GRPO_PY" ] || skip "no test venv (make venv)"
    [ -f "$SMOL" ] || skip "no model (make models)"
    run "$BIN" --export "$SMOL" smol.q8_0.gguf q8_0
    echo "$output"
    [ "$status" -eq 0 ]
    no_temp_left .
    # Q8_0 of the dequantized Q4_1/Q8_0 source, byte for byte, for the
    # global tensors and blocks 0 and 29 (names, shapes, types: all of them)
    run "$GRPO_PY" "$CHECK" --data-layers 0,29 from-gguf "$SMOL" smol.q8_0.gguf q8_0
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "SmolLM2 exported to F32 loads back with the same logits, bit for bit" {
    [ -f "$SMOL" ] || skip "no model (make models)"
    run "$BIN" --export "$SMOL" smol.f32.gguf f32
    echo "$output"
    [ "$status" -eq 0 ]
    smol_tokens toks.txt
    logits "$SMOL" toks.txt src.f32
    logits smol.f32.gguf toks.txt out.f32
    cmp src.f32 out.f32
}

@test "SmolLM2's tokenizer from a Hugging Face directory gives the GGUF's own tokenizer arrays" {
    [ -x "$GRPO_PY" ] || skip "no test venv (make venv)"
    [ -f "$SMOL" ] || skip "no model (make models)"
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_tok_dir.py" "$SMOL" tokdir
    run "$BIN" --export "$SMOL" smol.bf16.gguf bf16 tokdir
    echo "$output"
    [ "$status" -eq 0 ]
    run "$GRPO_PY" "$CHECK" same-keys "$SMOL" smol.bf16.gguf tokenizer.ggml.model tokenizer.ggml.pre \
        tokenizer.ggml.tokens tokenizer.ggml.token_type tokenizer.ggml.merges tokenizer.ggml.bos_token_id \
        tokenizer.ggml.eos_token_id tokenizer.chat_template
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "a tokenizer of another size than the model is a data error; nothing is written" {
    [ -x "$GRPO_PY" ] || skip "no test venv (make venv)"
    [ -f "$SMOL" ] || skip "no model (make models)"
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" make-tiny llama tiny
    run "$BIN" --export tiny out.gguf q8_0 "$SMOL"
    echo "$output"
    [ "$status" -eq 65 ]
    [[ "$output" == *"tokenizer has 49152 tokens, the model's vocabulary 97"* ]]
    [ ! -e out.gguf ]
    no_temp_left .
}

@test "a model with YaRN RoPE or sliding windows: --format gguf refuses it in one line (65), writing nothing" {
    [ -x "$GRPO_PY" ] || skip "no test venv (make venv)"
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" make-tiny llama "$T/w" --yarn --window 4
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_tiny_tokenizer.py" "$T/w"
    run grpo-export --model "$T/w" --format gguf --out "$T/w.gguf"
    echo "$output"
    [ "$status" -eq 65 ]
    [ "${#lines[@]}" -eq 1 ]
    [[ "$output" == *"--format gguf does not write YaRN RoPE, sliding windows or attention sinks"* ]]
    [ ! -e "$T/w.gguf" ]
}
