#!/usr/bin/env bats
# gpt-oss from a GGUF as llama.cpp writes and reads it (lib/ckpt/gguf_config.c,
# load_gguf.c): tiny gpt_oss Hugging Face directories (model_ref.py make-tiny
# gpt_oss; make_oss_mxfp4.py, MXFP4 experts), YaRN truncated as llama.cpp
# computes it, converted by the pinned llama.cpp's own convert_hf_to_gguf.py
# (tests/ref/convert_oss_gguf.py, in .venv-peft). Our logits on the GGUF
# against llama.cpp's (build/llama_logits) and the float64 reference of the
# HF source; the MXFP4 experts (GGML type 39) kept packed by --weights mxfp4
# give the records of the HF MXFP4 directory byte for byte; malformed tensors
# and variants llama.cpp computes otherwise are 65 in one line. grpo-export
# --format gguf of gpt-oss loaded back by llama.cpp: its logits, the MXFP4
# experts kept as they came, the refusals. LoRA on the GGUF's MXFP4 experts
# as its frozen base: the HF source's step byte for byte; the converter's
# q8_0 GGUF as that base, its Q8_0 matrices held as the file's blocks (the
# gradients against autograd on their values: train_ref.py); an adapter on the
# experts themselves merged into a GGUF export, llama.cpp's logits on it ours.
# needs: venv llama.cpp
load helpers

SRC="$GRPO_ROOT/build/llama.cpp/src"
LOGITS="$GRPO_ROOT/build/llama_logits"

setup_file() {
    export OSS="$BATS_FILE_TMPDIR/oss" MX="$BATS_FILE_TMPDIR/mx"
    local peft="${GRPO_PEFT_PY:-$GRPO_ROOT/.venv-peft/bin/python}"
    [ -x "$GRPO_PY" ] && [ -x "$peft" ] && [ -f "$SRC/convert_hf_to_gguf.py" ] || return 0
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" make-tiny gpt_oss "$OSS" --yarn-truncate
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_oss_mxfp4.py" "$MX" --yarn-truncate
    for d in "$OSS" "$MX"; do
        "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_tiny_tokenizer.py" "$d"
        "$peft" "$GRPO_ROOT/tests/ref/convert_oss_gguf.py" "$SRC" "$d" "$d.gguf" > "$d.convert.log" 2>&1 ||
            { cat "$d.convert.log"; return 1; }
    done
    for i in 1 2 3 4 5 6; do
        echo "{\"id\":\"p$i\",\"prompt_tokens\":[1,$((i + 4)),$((i * 3)),7]}"
    done > "$BATS_FILE_TMPDIR/prompts.jsonl"
}

needs_oss() { [ -f "$OSS.gguf" ] || skip "no test venvs or llama.cpp source (make venv llama-cpp)"; }
needs_logits() { [ -x "$LOGITS" ] || skip "tests/llama/llama_logits not built (make llama-cpp)"; }
P() { echo "$BATS_FILE_TMPDIR/prompts.jsonl"; }

# ours MODEL TOKENS OUT: our logits at every position of TOKENS (test_model's driver)
ours() { GRPO_MODEL_DIR="$1" GRPO_MODEL_TOKENS="$2" GRPO_MODEL_OUT="$3" run -0 "$GRPO_ROOT/build/tests/test_model"; }

# compare OURS REF TOL: model_ref.py's max abs difference, shown, within TOL
compare() {
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" compare "$@"
    echo "$output"
    [ "$status" -eq 0 ]
}

# edit SRC OUT PYTHON: SRC rewritten with kv and t changed (tests/ref/edit_gguf.py)
edit() { "$GRPO_PY" "$GRPO_ROOT/tests/ref/edit_gguf.py" "$SRC" "$@"; }

@test "llama.cpp's converter's gpt-oss GGUF: our logits are llama.cpp's and the float64 reference's of its source (1e-4)" {
    needs_oss; needs_logits
    run --separate-stderr "$LOGITS" "$OSS.gguf" "$OSS/tokens.txt" llama.f64
    echo "$stderr"
    [ "$status" -eq 0 ]
    ours "$OSS.gguf" "$OSS/tokens.txt" ours.f32
    # llama.cpp in float32, a float32 cache, no flash attention: 1e-4 as for
    # qwen3moe (llama_cpp.bats; measured 4.9e-6). Its YaRN truncates the
    # ramp: with Hugging Face's truncate false these differ by about 2.
    compare ours.f32 llama.f64 1e-4
    run -0 "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" logits "$OSS" "$OSS/tokens.txt" ref.f64
    compare ours.f32 ref.f64 1e-4
    # and the HF directory itself gives the same model
    ours "$OSS" "$OSS/tokens.txt" hf.f32
    compare hf.f32 ref.f64 1e-4
}

@test "MXFP4 experts (GGML type 39) as float32: the float64 reference's of the HF MXFP4 source; llama.cpp's within its 8-bit activations' error" {
    needs_oss; needs_logits
    "$GRPO_PY" - "$SRC/gguf-py" "$MX.gguf" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
from gguf import GGUFReader
types = {t.name: t.tensor_type.name for t in GGUFReader(sys.argv[2]).tensors}
assert all(types[f"blk.{l}.ffn_{k}_exps.weight"] == "MXFP4" for l in (0, 1) for k in ("gate", "up", "down")), types
PY
    ours "$MX.gguf" "$MX/tokens.txt" ours.f32
    run -0 "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" logits "$MX" "$MX/tokens.txt" ref.f64
    # the exact values: 1e-4 as float32 weights (measured 1.6e-6)
    compare ours.f32 ref.f64 1e-4
    run --separate-stderr "$LOGITS" "$MX.gguf" "$MX/tokens.txt" llama.f64
    [ "$status" -eq 0 ]
    # llama.cpp's CPU kernels multiply MXFP4 by activations rounded to Q8_0
    # blocks (packed_mxfp4.h): 0.054 from the float64 reference, as from
    # ours (mean 0.009); a misread nibble or scale moves logits by about 1
    compare ours.f32 llama.f64 0.2
}

@test "--weights mxfp4 and auto keep the GGUF's MXFP4 experts: records of the HF MXFP4 directory byte for byte" {
    needs_oss
    args=(--in "$(P)" -k 4 --max-new-tokens 16 --seed 5 --policy p --progress)
    for w in mxfp4 auto; do
        run -0 grpo-rollout --model "$MX.gguf" "${args[@]}" --weights $w --out g-$w.jsonl
        # 2 layers x 8 experts x gate, up, down from the blocks; q, k, v, o and the head otherwise
        [[ "$output" == *"experts mxfp4"*"; 48 of 57 matrices from the file's MXFP4 blocks)"* ]]
    done
    grpo-rollout --model "$MX" "${args[@]}" --weights mxfp4 --out h.jsonl
    cmp g-mxfp4.jsonl h.jsonl
    # float32 weights: the same values widened, the same records but the sampler's weights
    run -0 grpo-rollout --model "$MX.gguf" "${args[@]}" --weights f32 --out f.jsonl
    [[ "$output" != *"experts mxfp4"* ]]
    cmp <(jq -c 'del(.sampler)' f.jsonl) <(jq -c 'del(.sampler)' h.jsonl)
    # the experts of a float32 GGUF are not MXFP4
    run grpo-rollout --model "$OSS.gguf" "${args[@]}" --weights mxfp4 --out r.jsonl
    [ "$status" -eq 64 ]
    [ ! -e r.jsonl ]
}

@test "malformed gpt-oss tensors and variants llama.cpp computes otherwise: 65 in one line naming them, nothing written" {
    needs_oss
    cases=(
        "del t['blk.1.attn_sinks.weight']|tensor blk.1.attn_sinks.weight is missing"
        "t['blk.0.ffn_up_exps.bias'][0] = t['blk.0.ffn_up_exps.bias'][0][:4]|tensor blk.0.ffn_up_exps.bias has dims \[32, 4\], expected \[32, 8\]"
        "del t['blk.0.post_attention_norm.weight']|tensor blk.0.post_attention_norm.weight is missing"
        "t['blk.1.ffn_down_exps.weight'][0][3, 5, 0] = 255|tensor blk.1.ffn_down_exps.weight: expert 3, row 5, block 0: scale byte 255 is MXFP4's NaN"
        "t['blk.0.ffn_gate_exps.weight'][0][6, 2, 17] = 254; t['blk.0.ffn_gate_exps.weight'][0][6, 2, 18] = 0x07|tensor blk.0.ffn_gate_exps.weight: expert 6, row 2, block 1: scale byte 254 makes a value beyond float32"
        "del kv['gpt-oss.expert_feed_forward_length']|key \"gpt-oss.expert_feed_forward_length\" is missing"
        "del kv['gpt-oss.attention.sliding_window']|key \"gpt-oss.attention.sliding_window\" is missing"
        "kv['gpt-oss.rope.freq_base_swa'] = [5000.0, GT.FLOAT32, None]|gpt-oss.rope.freq_base_swa 5000 differs from rope.freq_base 10000: not supported"
        "kv['gpt-oss.rope.scaling.type'][0] = 'linear'|rope scaling \"linear\" is not supported \(none or yarn\)"
        "kv['gpt-oss.attention.value_length'][0] = 8|gpt-oss.attention.value_length 8 differs from key_length 16: not supported"
        "kv['gpt-oss.expert_feed_forward_length'] = [[32, 32], GT.ARRAY, GT.UINT32]|key \"gpt-oss.expert_feed_forward_length\": expected a small non-negative integer"
    )
    for c in "${cases[@]}"; do
        edit "$MX.gguf" bad.gguf "${c%%|*}"
        for w in f32 mxfp4; do
            run grpo-rollout --model bad.gguf --in "$(P)" -k 1 --max-new-tokens 4 --weights "$w" --out r.jsonl
            [ "$status" -eq 65 ]
            assert_one_line_error grpo-rollout "bad.gguf: ${c#*|}"
            [ ! -e r.jsonl ]
        done
    done
}

@test "sliding layers: llama.cpp's pattern of n (layer l slides when l % n < n - 1) and an array per layer" {
    needs_oss; needs_logits
    ours "$OSS.gguf" "$OSS/tokens.txt" def.f32
    # both layers sliding (a pattern of 3); only layer 1 (an array). llama.cpp's
    # gpt-oss asserts that some layer slides: no all-full case to compare.
    edit "$OSS.gguf" p3.gguf "kv['gpt-oss.attention.sliding_window_pattern'] = [3, GT.UINT32, None]"
    edit "$OSS.gguf" arr.gguf "kv['gpt-oss.attention.sliding_window_pattern'] = [[0, 1], GT.ARRAY, GT.INT32]"
    for g in p3 arr; do
        run --separate-stderr "$LOGITS" $g.gguf "$OSS/tokens.txt" $g.f64
        [ "$status" -eq 0 ]
        ours $g.gguf "$OSS/tokens.txt" $g.f32
        compare $g.f32 $g.f64 1e-4
        # the window matters on these 20 tokens: not the default pattern's logits
        run "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" compare def.f32 $g.f64 1e-2
        [ "$status" -eq 1 ]
    done
}

# types GGUF: "NAME TYPE" per tensor (the pinned gguf-py: it knows MXFP4)
types() {
    "$GRPO_PY" - "$SRC/gguf-py" "$1" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
from gguf import GGUFReader
for t in GGUFReader(sys.argv[2]).tensors:
    print(t.name, t.tensor_type.name)
PY
}

@test "grpo-export --format gguf of gpt-oss: llama.cpp's logits on it are ours on the source (f32: 1e-4)" {
    needs_oss; needs_logits
    # layer_types the other way round: the pattern goes out as an array
    cp -r "$OSS" rev
    jq '.layer_types |= reverse' "$OSS/config.json" > rev/config.json
    for m in "$OSS" "$MX" rev; do
        grpo-export --model "$m" --format gguf --dtype f32 --out e.gguf
        run -0 types e.gguf
        [[ "$output" != *MXFP4* && "$output" == *"blk.1.post_attention_norm.weight F32"* ]]
        [[ "$output" == *"blk.0.attn_sinks.weight F32"* && "$output" == *"blk.0.ffn_up_exps.bias F32"* ]]
        run --separate-stderr "$LOGITS" e.gguf "$OSS/tokens.txt" llama.f64
        [ "$status" -eq 0 ]
        ours "$m" "$OSS/tokens.txt" ours.f32
        # as the converter's GGUF (measured 4.9e-6, 2.0e-6 with the MXFP4 values)
        compare ours.f32 llama.f64 1e-4
    done
    # the reversed pattern computes another model: not the first one's logits
    ours "$OSS" "$OSS/tokens.txt" first.f32
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" compare first.f32 llama.f64 1e-2
    [ "$status" -eq 1 ]
}

@test "grpo-export --format hf of a gpt-oss GGUF: a GptOssConfig with its YaRN, clamp and sliding layers; the GGUF's logits" {
    needs_oss
    # the converter's GGUF, and one whose layers slide the other way round
    jq '.layer_types |= reverse' "$OSS/config.json" > rev.json
    cp -r "$OSS" rev && mv rev.json rev/config.json
    grpo-export --model rev --format gguf --dtype f32 --out rev.gguf
    for g in "$OSS.gguf" rev.gguf; do
        rm -rf back
        grpo-export --model "$g" --format hf --dtype f32 --out back
        src=$OSS; [ "$g" = rev.gguf ] && src=rev
        # every key the source's config.json has that changes the model, equal
        jq -e --slurpfile s "$src/config.json" '. as $o | $s[0] as $s
            | ($o.model_type == "gpt_oss" and $o.architectures == ["GptOssForCausalLM"] and $o.attention_bias == true)
              and ([ "num_local_experts", "num_experts_per_tok", "intermediate_size", "swiglu_limit", "layer_types",
                     "sliding_window", "hidden_size", "head_dim", "num_attention_heads", "num_key_value_heads",
                     "rope_theta", "rms_norm_eps" ] | all(. as $k | $o[$k] == $s[$k]))
              and ($o.rope_scaling | .rope_type == "yarn" and .truncate == $s.rope_scaling.truncate
                   and .factor == $s.rope_scaling.factor and .beta_fast == $s.rope_scaling.beta_fast
                   and .beta_slow == $s.rope_scaling.beta_slow
                   and .original_max_position_embeddings == $s.rope_scaling.original_max_position_embeddings)' \
            back/config.json
        for m in "$g" back; do ours "$m" "$OSS/tokens.txt" "$(basename "$m").f32"; done
        cmp "$(basename "$g").f32" back.f32
    done
    # the two patterns are two models: their logits differ
    run ! cmp oss.gguf.f32 rev.gguf.f32
}

@test "grpo-export keeps MXFP4 experts MXFP4 under f16 and q8_0: the source's blocks; trained experts take the dtype" {
    needs_oss; needs_logits
    grpo-export --model "$MX.gguf" --format gguf --out f16.gguf
    grpo-export --model "$MX" --format gguf --dtype q8_0 --out q8.gguf
    for g in f16 q8; do
        "$GRPO_PY" - "$SRC/gguf-py" "$MX.gguf" $g.gguf <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize
src = {t.name: t for t in GGUFReader(sys.argv[2]).tensors}
n = 0
for t in GGUFReader(sys.argv[3]).tensors:
    if not t.name.endswith("_exps.weight"):
        assert t.tensor_type.name in ("F16", "Q8_0", "F32"), (t.name, t.tensor_type.name)
        continue
    s = src[t.name]
    assert t.tensor_type.name == "MXFP4", (t.name, t.tensor_type.name)
    assert np.array_equal(dequantize(t.data, t.tensor_type), dequantize(s.data, s.tensor_type)), t.name
    # the converter's bytes; from the GGUF (read as ggml reads it) its negative zeros (code 8)
    # as code 0, from the Hugging Face blocks (read as transformers reads them) kept;
    # a block of zeros may take any scale
    a = np.array(s.data, dtype=np.uint8).reshape(-1, 17).copy()
    b = np.array(t.data, dtype=np.uint8).reshape(-1, 17)
    lo, hi = a[:, 1:] & 15, a[:, 1:] >> 4
    lo[lo == 8], hi[hi == 8] = 0, 0
    if sys.argv[3] == "f16.gguf":
        a[:, 1:] = lo | hi << 4
    nz = ((lo | hi << 4) != 0).any(axis=1)
    assert np.array_equal(a[:, 1:], b[:, 1:]) and np.array_equal(a[nz, 0], b[nz, 0]), t.name
    n += 1
assert n == 6, n
PY
    done
    # llama.cpp on the f16 export: ours on it within its Q8_0 activations' error (measured 0.048)
    run --separate-stderr "$LOGITS" f16.gguf "$MX/tokens.txt" llama.f64
    [ "$status" -eq 0 ]
    ours f16.gguf "$MX/tokens.txt" ours.f32
    compare ours.f32 llama.f64 0.2
    run -0 grpo-rollout --model f16.gguf --in "$(P)" -k 1 --max-new-tokens 4 --weights mxfp4 --progress --out r.jsonl
    [[ "$output" == *"48 of 57 matrices from the file's MXFP4 blocks)"* ]]
    # a full fine-tuning step moves the experts off MXFP4's values: f16 like the rest
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/update_ref.py" make-batch batch.jsonl 8 97
    grpo-update --model "$MX" --in batch.jsonl --out c1 --lr 1e-2
    grpo-export --model c1 --format gguf --out c1.gguf
    run -0 types c1.gguf
    [[ "$output" != *MXFP4* && "$output" == *"blk.0.ffn_down_exps.weight F16"* ]]
}

@test "grpo-export of a gpt-oss llama.cpp computes otherwise: YaRN untruncated gets a note; another clamp or betas are 65" {
    needs_oss
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" make-tiny gpt_oss hf
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_tiny_tokenizer.py" hf
    # gpt-oss's own truncate false: written as llama.cpp's converter writes it, said once
    run --separate-stderr grpo-export --model hf --format gguf --out hf.gguf
    [ "$status" -eq 0 ]
    [ "$stderr" = "grpo-export: note: llama.cpp truncates YaRN's ramp, this model's config does not: in the GGUF RoPE frequencies 1 to 3 of 8 differ from the model's, as in llama.cpp's own conversion of it" ]
    cases=(
        '.swiglu_limit = 6|its SwiGLU clamp is not llama.cpp.s 7: no GGUF'
        '.rope_scaling.beta_fast = 16|its YaRN betas are not llama.cpp.s 32 and 1: no GGUF'
        '.tie_word_embeddings = true|its LM head is tied, and llama.cpp.s gpt-oss needs output.weight: no GGUF'
    )
    for c in "${cases[@]}"; do
        rm -rf bad && cp -r hf bad
        jq "${c%%|*}" hf/config.json > bad/config.json
        run grpo-export --model bad --format gguf --out bad.gguf
        [ "$status" -eq 65 ]
        assert_one_line_error grpo-export "bad: ${c#*|}"
        [ ! -e bad.gguf ]
    done
}

@test "LoRA on the GGUF's MXFP4 experts (--base-weights auto takes mxfp4): the HF source's step byte for byte, rolled out on that base" {
    needs_oss
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/update_ref.py" make-batch batch.jsonl 8 97
    grpo-update --model "$MX.gguf" --in batch.jsonl --out g --lr 1e-2 --lora-r 4 2> /dev/null
    grpo-update --model "$MX" --in batch.jsonl --out h --lr 1e-2 --lora-r 4 2> /dev/null
    jq -e '.flags.base_weights == "mxfp4"' g/grpo/state.json
    cmp g/adapter_model.safetensors h/adapter_model.safetensors
    run -0 grpo-rollout --model g --in "$(P)" -k 2 --max-new-tokens 8 --seed 1 --weights auto --progress --out g.jsonl
    [[ "$output" == *"weights mxfp4 frozen base (float32 activations, "*"48 of 57 matrices from the file's MXFP4 blocks)"* ]]
    grpo-rollout --model h --in "$(P)" -k 2 --max-new-tokens 8 --seed 1 --weights auto --out h.jsonl 2> /dev/null
    cmp <(jq -c 'del(.policy)' g.jsonl) <(jq -c 'del(.policy)' h.jsonl)
}

@test "the converter's q8_0 GGUF (MXFP4 experts, Q8_0 attention, embeddings, head) as an mxfp4 base: gradients vs autograd on its values (1e-4)" {
    needs_oss
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/train_ref.py" gptoss-mxfp4q8gguf-lora-qkvo-mxfp4base-beta grad
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "LoRA on the converter's q8_0 GGUF (auto: mxfp4): the file's Q8_0 blocks held as they are, the float32 base's step; rolled out on that base, its log-probs the trainer's" {
    needs_oss
    local peft="${GRPO_PEFT_PY:-$GRPO_ROOT/.venv-peft/bin/python}"
    cp -r "$MX" mx && "$peft" "$GRPO_ROOT/tests/ref/convert_oss_gguf.py" "$SRC" mx q8.gguf q8_0 > convert.log 2>&1 ||
        { cat convert.log; false; }
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/update_ref.py" make-batch batch.jsonl 8 97
    grpo-update --model q8.gguf --in batch.jsonl --out g --lr 1e-2 --lora-r 4 --metrics m-g.jsonl 2> /dev/null
    jq -e '.flags.base_weights == "mxfp4"' g/grpo/state.json
    # the file's values, as the float32 base widens them, other float32 sums: loss and gradient
    # norm within 1e-6 relative
    grpo-update --model q8.gguf --in batch.jsonl --out f --lr 1e-2 --lora-r 4 --base-weights f32 \
        --metrics m-f.jsonl 2> /dev/null
    jq -e -s '(.[0].loss - .[1].loss | fabs) < 1e-6 * (.[1].loss | fabs) and
              (.[0].grad_norm - .[1].grad_norm | fabs) < 1e-6 * .[1].grad_norm' m-g.jsonl m-f.jsonl
    run -0 grpo-rollout --model g --in "$(P)" -k 4 --max-new-tokens 8 --seed 1 --weights auto --progress --out r.jsonl
    [[ "$output" == *"weights mxfp4 frozen base (float32 activations, "*"; attention q8, embeddings q8, LM head q8; 58 of 58 matrices from the file's MXFP4 and Q8_0 blocks)"* ]]
    # the trainer's own log-probs (the mean bound 3e-6 of the HF source's)
    jq -c '. + {advantage: (.sample - 1.5)}' r.jsonl > adv.jsonl
    grpo-update --model g --in adv.jsonl --out u --lr 1e-2 --old-logp recompute --is-correction token \
        --metrics m-u.jsonl 2> /dev/null
    jq -e '."sampling/sampling_logp_difference/mean" < 3e-6' m-u.jsonl
}

@test "grpo-export --format gguf of an adapter on the MXFP4 experts: merged, the experts in the dtype; llama.cpp's logits ours (f32: 1e-4)" {
    needs_oss; needs_logits
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/update_ref.py" make-batch batch.jsonl 8 97
    grpo-update --model "$MX" --in batch.jsonl --out e --lr 1e-2 --lora-r 4 --lora-targets all 2> /dev/null
    jq -e '.flags.base_weights == "mxfp4" and (.flags.lora_targets | contains("gate_proj"))' e/grpo/state.json
    for d in f32 f16; do
        grpo-export --model e --format gguf --dtype $d --out e-$d.gguf
        run -0 types e-$d.gguf
        [[ "$output" != *MXFP4* && "$output" == *"blk.1.ffn_gate_exps.weight ${d^^}"* ]]
    done
    run --separate-stderr "$LOGITS" e-f32.gguf "$MX/tokens.txt" llama.f64
    [ "$status" -eq 0 ]
    ours e "$MX/tokens.txt" ours.f32
    # as the source's own export (measured 2e-6); the merge moved them from the source's
    compare ours.f32 llama.f64 1e-4
    ours "$MX" "$MX/tokens.txt" base.f32
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" compare base.f32 llama.f64 1e-3
    [ "$status" -eq 1 ]
}
