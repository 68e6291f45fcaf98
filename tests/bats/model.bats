#!/usr/bin/env bats
# The model forward (lib/model) against an independent float64 PyTorch
# implementation of the HF architectures (tests/ref/model_ref.py; its
# mixture-of-experts block checked against transformers' own), through
# the driver mode of build/tests/test_model, which also checks that prefill,
# one-token decode and a batch with a copied KV prefix agree.
# needs: venv models
load helpers

BIN="$GRPO_ROOT/build/tests/test_model"
SMOL="$GRPO_ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf"

# run_model DIR TOKENS OUT: our logits for TOKENS, checked paths, TAP output.
run_model() {
    GRPO_MODEL_DIR="$1" GRPO_MODEL_TOKENS="$2" GRPO_MODEL_OUT="$3" run "$BIN"
    echo "$output"
    [ "$status" -eq 0 ]
}

# against_ref DIR OUT TOL [SAYS]: run_model on DIR's tokens.txt into DIR/OUT (its
# output holding SAYS), within TOL of DIR/ref.f64.
against_ref() {
    run_model "$1" "$1/tokens.txt" "$1/$2"
    [[ "$output" == *"${4:-}"* ]]
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" compare "$1/$2" "$1/ref.f64" "$3"
    echo "$(basename "$1") $2: $output"
    [ "$status" -eq 0 ]
}

# data_error DIR SAYS: the model in DIR is one line of data error (65) holding SAYS.
data_error() {
    GRPO_MODEL_DIR="$1" GRPO_MODEL_TOKENS="$1/tokens.txt" run "$BIN"
    echo "$output"
    [ "$status" -eq 65 ]
    [ "${#lines[@]}" -eq 1 ]
    [[ "$output" == *"$2"* ]]
}

# tiny_ref DIR ARCH [OPTIONS]: a tiny model (model_ref.py make-tiny) and its
# reference logits, DIR/ref.f64 (the reference's output in $output).
tiny_ref() {
    local d="$1" arch="$2"
    shift 2
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" make-tiny "$arch" "$d" "$@"
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" logits "$d" "$d/tokens.txt" "$d/ref.f64"
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "tiny llama/qwen2/qwen3 (tied, untied, llama3 rope, F32 and BF16) match the PyTorch reference" {
    [ -x "$GRPO_PY" ] || skip "no test venv (make venv)"
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" tiny-suite "$T/tiny"
    echo "$output"
    [ "$status" -eq 0 ]
    n=0
    for d in "$T"/tiny/*/; do
        # Tolerance 1e-4 absolute on logits up to ~55: fp32 rounding through
        # 2 layers of width <= 96 is ~1e-7 relative per op, so a few 1e-6 of
        # the largest logit; 1e-4 leaves 10x room yet catches any wrong op
        # (those move logits by 1e-2 or more). BF16 variants: the reference
        # reads the same bf16 weights, so the tolerance is the same.
        against_ref "${d%/}" ours.f32 1e-4
        n=$((n + 1))
    done
    [ "$n" -eq 7 ]
}

@test "tiny qwen3_moe (renormalised or not, a dense layer, every other layer sparse) matches the PyTorch reference" {
    [ -x "$GRPO_PY" ] || skip "no test venv (make venv)"
    n=0
    for v in "norm --norm-topk" "dense0 --dense-layers 0" "step2 --sparse-step 2 --norm-topk"; do
        set -- $v
        d="$T/moe-$1"
        shift
        tiny_ref "$d" qwen3_moe "$@"
        [[ "$output" == *"min top-k margin"* ]]
        # 1e-4 as for the dense models (measured 1.2e-6 to 1.6e-6); the
        # routing is the reference's: its smallest top-k gap (above, 9e-4 or
        # more) is far wider than float32's rounding
        against_ref "$d" ours.f32 1e-4
        # the experts packed as grpo-rollout --weights bf16 packs them, each in
        # its own place: 5e-2 (measured 1.6e-2 to 1.8e-2, as the dense qwen3's 1.65e-2)
        GRPO_MODEL_PACK=bf16 against_ref "$d" bf16.f32 5e-2 "weights packed bf16"
        n=$((n + 1))
    done
    [ "$n" -eq 3 ]
}

@test "the reference's mixture-of-experts block is transformers' Qwen2MoeSparseMoeBlock without its shared expert" {
    py="${GRPO_PEFT_PY:-$GRPO_ROOT/.venv-peft/bin/python}"
    [ -x "$py" ] || skip "no transformers venv (make venv)"
    run "$py" "$GRPO_ROOT/tests/ref/check_moe_block.py"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"ok 2 - norm_topk_prob True"* ]]
}

@test "a qwen3_moe or gpt_oss config with an expert setting we do not know is one data error naming it" {
    [ -x "$GRPO_PY" ] || skip "no test venv (make venv)"
    for v in "qwen3_moe num_experts shared_expert_intermediate_size" "gpt_oss num_local_experts num_shared_experts"; do
        set -- $v
        "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" make-tiny "$1" "$T/$1"
        sed -i "s/\"$2\": 8,/\"$2\": 8, \"$3\": 64,/" "$T/$1/config.json"
        data_error "$T/$1" "config.json: key \"$3\": an expert setting $1 does not have"
    done
}

@test "tiny models with YaRN RoPE and sliding-window layers (gpt-oss's attention options) match the PyTorch reference" {
    [ -x "$GRPO_PY" ] || skip "no test venv (make venv)"
    # 1e-4 as for the other tiny models (measured 1.2e-6 to 2.2e-6; each
    # option alone moves the reference's logits by more than 1)
    tiny_ref "$T/llama-yarn" llama --yarn
    against_ref "$T/llama-yarn" ours.f32 1e-4
    tiny_ref "$T/qwen3-window" qwen3 --window 5
    against_ref "$T/qwen3-window" ours.f32 1e-4
    tiny_ref "$T/qwen2-both" qwen2 --yarn --window 6
    against_ref "$T/qwen2-both" ours.f32 1e-4
}

@test "tiny gpt_oss (sinks, biases, YaRN, sliding layers, biased experts, clamped SwiGLU) matches the PyTorch reference" {
    [ -x "$GRPO_PY" ] || skip "no test venv (make venv)"
    tiny_ref "$T/oss" gpt_oss
    [[ "$output" == *"min top-k margin"* ]]
    # 1e-4 as for the other tiny models (measured 3.8e-6); the reference's
    # top-k margin (3.5e-2 of a logit) is far wider than float32's rounding;
    # in the reference about 1 in 12 gate and 1 in 6 up values cross the clamp
    against_ref "$T/oss" ours.f32 1e-4
}

@test "layer_types of the wrong length, an unknown layer type, a sliding layer without a window: one data error each" {
    [ -x "$GRPO_PY" ] || skip "no test venv (make venv)"
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" make-tiny llama "$T/m" --window 4
    cp "$T/m/config.json" "$T/config.json"
    for edit in 'c["layer_types"].append("full_attention")' 'c["layer_types"][1] = "chunked_attention"' \
        'del c["sliding_window"]'; do
        "$GRPO_PY" -c 'import json, sys; c = json.load(open(sys.argv[1])); '"$edit"'; json.dump(c, open(sys.argv[2], "w"))' \
            "$T/config.json" "$T/m/config.json"
        data_error "$T/m" 'config.json: key "'
    done
}

@test "the forward paths under ASan agree on a tiny qwen3 model" {
    [ -x "$GRPO_PY" ] || skip "no test venv (make venv)"
    [ -x "$GRPO_ROOT/build/tests-asan/test_model" ] || skip "no ASan build (make unit-asan)"
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" make-tiny qwen3 "$T/q3" --tied --dtype bf16
    GRPO_MODEL_DIR="$T/q3" GRPO_MODEL_TOKENS="$T/q3/tokens.txt" GRPO_MODEL_OUT="$T/q3.f32" \
        run "$GRPO_ROOT/build/tests-asan/test_model"
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "SmolLM2 GGUF logits match PyTorch on gguf-py-dequantized weights" {
    [ -x "$GRPO_PY" ] || skip "no test venv (make venv)"
    [ -f "$SMOL" ] || skip "no model (make models)"
    smol_tokens toks.txt
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" gguf-logits "$SMOL" toks.txt ref.f64
    echo "$output"
    [ "$status" -eq 0 ]
    run_model "$SMOL" toks.txt ours.f32
    # 1e-3: 30 layers of fp32 against float64 on logits up to ~35; measured ~5e-5.
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" compare ours.f32 ref.f64 1e-3
    echo "$output"
    [ "$status" -eq 0 ]
    # the same with the weights packed as grpo-rollout packs them (on a CPU with AVX-512)
    GRPO_MODEL_PACK=1 run_model "$SMOL" toks.txt packed.f32
    if grep -q avx512f /proc/cpuinfo; then [[ "$output" == *"weights packed"* ]]; fi
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" compare packed.f32 ref.f64 1e-3
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "an HF directory with a missing tensor (a layer's, an expert's) is a data error naming it" {
    [ -x "$GRPO_PY" ] || skip "no test venv (make venv)"
    for c in "llama model.layers.1.mlp.up_proj.weight" "qwen3_moe model.layers.1.mlp.experts.5.up_proj.weight"; do
        set -- $c
        rm -rf "$T/m"
        "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" make-tiny "$1" "$T/m"
        "$GRPO_PY" - "$T/m/model.safetensors" "$2" <<'EOF'
import sys
from safetensors.torch import load_file, save_file
t = load_file(sys.argv[1])
del t[sys.argv[2]]
save_file(t, sys.argv[1])
EOF
        GRPO_MODEL_DIR="$T/m" GRPO_MODEL_TOKENS="$T/m/tokens.txt" run "$BIN"
        echo "$output"
        [ "$status" -eq 65 ]
        [[ "$output" == *"tensor $2 is missing"* ]]
    done
}

@test "a mis-shaped tensor and an unsupported architecture are data errors naming them" {
    [ -x "$GRPO_PY" ] || skip "no test venv (make venv)"
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" make-tiny qwen2 "$T/m"
    "$GRPO_PY" - "$T/m/model.safetensors" <<'EOF'
import sys
from safetensors.torch import load_file, save_file
t = load_file(sys.argv[1])
t["model.layers.0.self_attn.k_proj.bias"] = t["model.layers.0.self_attn.k_proj.bias"][:5].clone()
save_file(t, sys.argv[1])
EOF
    GRPO_MODEL_DIR="$T/m" GRPO_MODEL_TOKENS="$T/m/tokens.txt" run "$BIN"
    echo "$output"
    [ "$status" -eq 65 ]
    [[ "$output" == *"k_proj.bias has shape [5], expected [32]"* ]]
    sed -i 's/Qwen2ForCausalLM/GPTNeoXForCausalLM/' "$T/m/config.json"
    GRPO_MODEL_DIR="$T/m" GRPO_MODEL_TOKENS="$T/m/tokens.txt" run "$BIN"
    echo "$output"
    [ "$status" -eq 65 ]
    [[ "$output" == *'unsupported architecture "GPTNeoXForCausalLM"'* ]]
}

@test "a GGUF of an unsupported architecture is a data error naming it" {
    [ -x "$GRPO_PY" ] || skip "no test venv (make venv)"
    "$GRPO_PY" - "$T/gpt2.gguf" <<'EOF2'
import sys
import numpy as np
from gguf import GGUFWriter
w = GGUFWriter(sys.argv[1], "gpt2")
w.add_block_count(1)
w.add_tensor("token_embd.weight", np.ones((4, 8), dtype=np.float32))
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
EOF2
    echo "1 2" > toks.txt
    GRPO_MODEL_DIR="$T/gpt2.gguf" GRPO_MODEL_TOKENS=toks.txt run "$BIN"
    echo "$output"
    [ "$status" -eq 65 ]
    [[ "$output" == *'unsupported architecture "gpt2"'* ]]
}

@test "a declared size beyond the weights (num_hidden_layers 1e9, a flipped byte in block_count): 65 naming file and fields" {
    [ -x "$GRPO_PY" ] || skip "no test venv (make venv)"
    make_tiny_llama "$T/m"
    jq '.num_hidden_layers = 1000000000' "$T/m/config.json" > c.json && mv c.json "$T/m/config.json"
    run -65 grpo-rollout --model "$T/m" -k 1 --max-new-tokens 2 --in <(echo '{"id":"p","prompt_tokens":[1,4,5]}')
    assert_one_line_error grpo-rollout "$T/m/config.json: the sizes it declares \(num_hidden_layers 1000000000, hidden_size 64, .*\) need [0-9.e+]+ weights, and the tensors of $T/m/model.safetensors hold"
    [ -f "$SMOL" ] || skip "no model (make models)"
    cp "$SMOL" s.gguf
    "$GRPO_PY" - s.gguf <<'EOF'
import sys
key = b"llama.block_count"
with open(sys.argv[1], "r+b") as f:
    at = f.read(1 << 20).index(key) + len(key) + 4  # the u32 after the key and its type
    f.seek(at + 2)
    f.write(b"\x40")  # 30 layers become 4194334
EOF
    run -65 grpo-rollout --model s.gguf -k 1 --max-new-tokens 2 --in <(echo '{"id":"p","prompt_tokens":[1,4,5]}')
    assert_one_line_error grpo-rollout "s.gguf: the sizes it declares \(llama.block_count 4194334, llama.embedding_length 576, .*\) need [0-9.e+]+ weights, and the tensors of s.gguf hold"
}
