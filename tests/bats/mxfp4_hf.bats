#!/usr/bin/env bats
# gpt-oss's MXFP4 experts from Hugging Face safetensors (lib/ckpt/hf_mxfp4.c):
# a tiny random gpt_oss whose experts are _blocks and _scales as transformers
# lays them out (tests/ref/make_oss_mxfp4.py). Loaded as float32 its logits
# are the float64 reference's on transformers' dequantization; --weights
# mxfp4 keeps the experts as the file's blocks and gives the records of the
# float32 model byte for byte; malformed blocks and scales are 65 naming the
# tensor. The kernels' bits: test_packed_mxfp4, mxfp4_ref.bats.
# needs: venv
load helpers

setup_file() {
    export OSS="$BATS_FILE_TMPDIR/oss"
    [ -x "$GRPO_PY" ] || return 0
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_oss_mxfp4.py" "$OSS"
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_tiny_tokenizer.py" "$OSS"
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/update_ref.py" make-batch "$BATS_FILE_TMPDIR/batch.jsonl" 16 97
    for i in 1 2 3 4 5 6; do
        echo "{\"id\":\"p$i\",\"prompt_tokens\":[1,$((i + 4)),$((i * 3)),7]}"
    done > "$BATS_FILE_TMPDIR/prompts.jsonl"
}

needs_oss() { [ -d "$OSS" ] || skip "no test venv (make venv)"; }
P() { echo "$BATS_FILE_TMPDIR/prompts.jsonl"; }

# edit DIR PYTHON: runs PYTHON with t = DIR's tensors (numpy), then writes them back
edit() {
    "$GRPO_PY" - "$1/model.safetensors" "$2" <<'PY'
import sys
import numpy as np
from safetensors.numpy import load_file, save_file
t = load_file(sys.argv[1])
exec(sys.argv[2])
save_file(t, sys.argv[1], metadata={"format": "pt"})
PY
}

@test "MXFP4 experts load as float32: logits are the float64 reference's on transformers' dequantization (1e-4)" {
    needs_oss
    GRPO_MODEL_DIR="$OSS" GRPO_MODEL_TOKENS="$OSS/tokens.txt" GRPO_MODEL_OUT=ours.f32 \
        run -0 "$GRPO_ROOT/build/tests/test_model"
    run -0 "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" logits "$OSS" "$OSS/tokens.txt" ref.f64
    echo "$output"
    # 1e-4 as for the bf16 gpt_oss (measured 2.2e-6; the smallest top-k margin 4.8e-3)
    run -0 "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" compare ours.f32 ref.f64 1e-4
    echo "$output"
}

@test "--weights mxfp4: the experts from the file's blocks, the records the float32 model's byte for byte" {
    needs_oss
    args=(--model "$OSS" --in "$(P)" -k 4 --max-new-tokens 16 --seed 5 --progress)
    run -0 grpo-rollout "${args[@]}" --weights mxfp4 --out mx.jsonl
    # 2 layers x 8 experts x gate, up, down from the blocks; q, k, v, o and the head as f32
    [[ "$output" == *"experts mxfp4"*"; 48 of 57 matrices from the file's MXFP4 blocks)"* ]]
    run -0 grpo-rollout "${args[@]}" --weights f32 --out f32.jsonl
    [[ "$output" != *"experts mxfp4"* ]]
    # each product one float32 FMA chain over the same exact values: the same bits
    cmp <(jq -c 'del(.sampler)' f32.jsonl) <(jq -c 'del(.sampler)' mx.jsonl)
    jq -e -s 'all(.sampler == {"engine":"grpo","device":"cpu","weights":"mxfp4","kv_cache":"f32"})' mx.jsonl
    # and the float64 reference's log-probs within 1e-4 (as f32's)
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/check_rollout.py" "$OSS" mx.jsonl 1e-4
    echo "$output" | grep -v '^ok' || true
    [ "$status" -eq 0 ]
    grpo-rollout "${args[@]}" --weights mxfp4 --batch 1 --threads 1 --out mx1.jsonl
    cmp mx.jsonl mx1.jsonl
    # auto keeps them too, whatever it packs the rest in
    run -0 grpo-rollout "${args[@]}" --weights auto --out auto.jsonl
    [[ "$output" == *"experts mxfp4"*"48 of 57 matrices from the file's MXFP4 blocks)"* ]]
}

@test "a LoRA checkpoint on the MXFP4 base rolls out with the base's experts kept, as its float32 merge" {
    needs_oss
    grpo-update --model "$OSS" --in "$BATS_FILE_TMPDIR/batch.jsonl" --out l1 --lr 1e-2 --lora-r 4
    args=(--model l1 --in "$(P)" -k 2 --max-new-tokens 12 --seed 3 --progress)
    run -0 grpo-rollout "${args[@]}" --weights mxfp4 --out mx.jsonl
    [[ "$output" == *"48 of 57 matrices from the file's MXFP4 blocks)"* ]]
    grpo-rollout "${args[@]}" --weights f32 --out f32.jsonl
    cmp <(jq -c 'del(.sampler)' f32.jsonl) <(jq -c 'del(.sampler)' mx.jsonl)
    # mxfp4 records are the trainer's arithmetic: no sampler correction is measured
    jq -c '. + {advantage: 0.5}' mx.jsonl > adv.jsonl
    grpo-update --model l1 --in adv.jsonl --out l2 --lr 1e-2 --metrics m.jsonl
    jq -e '."sampling/sampling_logp_difference/mean" == null' m.jsonl
}

@test "--weights mxfp4 on experts that are not MXFP4 is 64" {
    needs_oss
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" make-tiny gpt_oss bf
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_tiny_tokenizer.py" bf
    run grpo-rollout --model bf --in "$(P)" -k 1 --max-new-tokens 4 --weights mxfp4 --out r.jsonl
    [ "$status" -eq 64 ]
    assert_one_line_error grpo-rollout "bf: mxfp4 weights: the model's experts were not loaded from MXFP4 blocks"
    [ ! -e r.jsonl ]
}

@test "malformed MXFP4 blocks or scales are 65 naming the tensor, as float32 and as mxfp4" {
    needs_oss
    L1=model.layers.1.mlp.experts
    cases=(
        "t['$L1.down_proj_blocks'] = t['$L1.down_proj_blocks'][:, :32].copy()|tensor $L1.down_proj_blocks: expected U8 of shape \[8, 64, 1, 16\] \(MXFP4\), got U8 of shape \[8, 32, 1, 16\]"
        "t['$L1.gate_up_proj_scales'] = t['$L1.gate_up_proj_scales'].astype(np.float32)|tensor $L1.gate_up_proj_scales: expected U8 of shape \[8, 64, 2\] \(MXFP4\), got F32"
        "t['$L1.down_proj_scales'][3, 5, 0] = 255|tensor $L1.down_proj_scales: expert 3, row 5, block 0: scale byte 255 is MXFP4's NaN"
        "t['$L1.gate_up_proj_scales'][2, 9, 1] = 254; t['$L1.gate_up_proj_blocks'][2, 9, 1, 0] = 0x77|tensor $L1.gate_up_proj_scales: expert 2, row 4, block 1: scale byte 254 makes a value beyond float32"
        "del t['$L1.down_proj_scales']|tensor $L1.down_proj_scales is missing \(MXFP4 takes _blocks and _scales\)"
    )
    for c in "${cases[@]}"; do
        rm -rf bad && cp -r "$OSS" bad
        edit bad "${c%%|*}"
        for w in f32 mxfp4; do
            run grpo-rollout --model bad --in "$(P)" -k 1 --max-new-tokens 4 --weights "$w" --out r.jsonl
            [ "$status" -eq 65 ]
            assert_one_line_error grpo-rollout "bad/model.safetensors: ${c#*|}"
            [ ! -e r.jsonl ]
        done
    done
}

@test "an HF export of the MXFP4 model: dequantized, no quantization_config, the same records" {
    needs_oss
    grpo-export --model "$OSS" --format hf --dtype f32 --out hf
    jq -e 'has("quantization_config") | not' hf/config.json
    jq -e '.quantization_config.quant_method == "mxfp4"' "$OSS/config.json"
    # the stacked experts as transformers' bf16/f32 layout, no blocks or scales
    "$GRPO_PY" - hf/model.safetensors <<'PY'
import sys
from safetensors.numpy import load_file
t = load_file(sys.argv[1])
assert not any(k.endswith("_blocks") or k.endswith("_scales") for k in t), sorted(t)
assert t["model.layers.0.mlp.experts.gate_up_proj"].ndim == 3
PY
    args=(--in "$(P)" -k 2 --max-new-tokens 8 --seed 5 --weights f32)
    grpo-rollout --model "$OSS" "${args[@]}" --out a.jsonl
    grpo-rollout --model hf "${args[@]}" --out b.jsonl
    cmp <(jq -c 'del(.policy)' a.jsonl) <(jq -c 'del(.policy)' b.jsonl)
}
