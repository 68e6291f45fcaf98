#!/usr/bin/env bats
# gpt-oss's MXFP4 experts from Hugging Face safetensors (lib/ckpt/hf_mxfp4.c):
# a tiny random gpt_oss whose experts are _blocks and _scales as transformers
# lays them out (tests/ref/make_oss_mxfp4.py). Loaded as float32 its logits
# are the float64 reference's on transformers' dequantization; --weights
# mxfp4 keeps the experts as the file's blocks and gives the records of the
# float32 model byte for byte; malformed blocks and scales are 65 naming the
# tensor. LoRA on the experts' blocks as the frozen base (grpo-update
# --base-weights mxfp4, auto's choice here): the float32 base's step to
# float32 rounding, its checkpoint rolled out on that base with the
# trainer's own log-probs; of a bf16 file (make_oss_mxfp4.py --dtype bf16),
# the other matrices held bf16, the same; an adapter on the experts themselves (PEFT's
# target_parameters) rolled out unmerged over the blocks, against the
# reference's merge. grpo-export --format hf writes them back as the
# source's blocks byte for byte (their dequantization by mxfp4_ref.py's
# transcription of transformers' the float32 model's bit for bit), and
# dequantized once trained, merged with an adapter, or under f32. The kernels' bits:
# test_packed_mxfp4, mxfp4_ref.bats; the gradients against float64:
# train_grad.bats.
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

@test "a LoRA checkpoint on the float32 base rolls out with the base's experts kept, as its float32 merge" {
    needs_oss
    grpo-update --model "$OSS" --in "$BATS_FILE_TMPDIR/batch.jsonl" --out l1 --lr 1e-2 --lora-r 4 --base-weights f32
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

@test "--base-weights mxfp4 (and auto here): LoRA on the experts' blocks, the float32 base's step; rolled out on that base, its log-probs the trainer's" {
    needs_oss
    B="$BATS_FILE_TMPDIR/batch.jsonl"
    grpo-update --model "$OSS" --in "$B" --out mx --lr 1e-2 --lora-r 4 --base-weights mxfp4 --metrics m-mx.jsonl
    grpo-update --model "$OSS" --in "$B" --out au --lr 1e-2 --lora-r 4 2> /dev/null
    grpo-update --model "$OSS" --in "$B" --out t1 --lr 1e-2 --lora-r 4 --base-weights mxfp4 --threads 1 2> /dev/null
    diff -r mx au
    diff -r mx t1
    jq -e '.flags.base_weights == "mxfp4"' mx/grpo/state.json
    # the same values as the float32 base, other float32 sums: loss and gradient norm within 1e-6 relative
    # (measured 7.5e-10 and 1.4e-8), not the same bytes
    grpo-update --model "$OSS" --in "$B" --out f --lr 1e-2 --lora-r 4 --base-weights f32 --metrics m-f.jsonl 2> /dev/null
    jq -e -s '(.[0].loss - .[1].loss | fabs) < 1e-6 * (.[1].loss | fabs) and
              (.[0].grad_norm - .[1].grad_norm | fabs) < 1e-6 * .[1].grad_norm' m-mx.jsonl m-f.jsonl
    ! cmp -s mx/adapter_model.safetensors f/adapter_model.safetensors || false
    # rolled out on that base (--weights auto or mxfp4): the adapter unmerged, the experts the file's blocks
    args=(--model mx --in "$(P)" -k 4 --max-new-tokens 8 --seed 1)
    run -0 grpo-rollout "${args[@]}" --weights auto --progress --out r.jsonl
    [[ "$output" == *"weights mxfp4 frozen base (float32 activations, "*" kernel; LoRA adapter unmerged; 48 of 57 matrices from the file's MXFP4 blocks)"* ]]
    jq -e -s 'all(.sampler == {"engine":"grpo","device":"cpu","weights":"mxfp4","base":"frozen","kv_cache":"f32"})' r.jsonl
    grpo-rollout "${args[@]}" --weights mxfp4 --out r2.jsonl 2> /dev/null
    cmp r.jsonl r2.jsonl
    # the trainer's own log-probs: per-token |difference| measured mean 4.2e-7, max 1.7e-6; bound 3e-6
    jq -c '. + {advantage: (.sample - 1.5)}' r.jsonl > adv.jsonl
    grpo-update --model mx --in adv.jsonl --out u --lr 1e-2 --old-logp recompute --is-correction token \
        --metrics m-u.jsonl 2> /dev/null
    jq -e '."sampling/sampling_logp_difference/mean" < 3e-6' m-u.jsonl
    # taken as pi_old by it, and the checkpoint continues on its base
    grpo-update --model mx --in adv.jsonl --out d --lr 1e-2 2> /dev/null
    jq -e '.step == 2 and .flags.base_weights == "mxfp4" and .flags.recompute_old == false' d/grpo/state.json
    # the float32 base's values: exact for a fresh trainer on an f32 base too, not on a q8 one
    jq -c 'del(.policy_step)' adv.jsonl > any.jsonl
    grpo-update --model "$OSS" --in any.jsonl --out f2 --lr 1e-2 --lora-r 4 --base-weights f32 2> /dev/null
    jq -e '.flags.recompute_old == false' f2/grpo/state.json
    grpo-update --model "$OSS" --in any.jsonl --out q2 --lr 1e-2 --lora-r 4 --base-weights q8 2> /dev/null
    jq -e '.flags.recompute_old == true' q2/grpo/state.json
    run grpo-update --model mx --in adv.jsonl --out x --lr 1e-2 --base-weights f32
    [ "$status" -eq 64 ]; assert_one_line_error grpo-update "mx was trained with --base-weights mxfp4"
    [ ! -e x ]
    # --weights f32 merges: the experts' values are the file's, the records float32's
    grpo-rollout "${args[@]}" --weights f32 --out f32.jsonl 2> /dev/null
    jq -e -s 'all(.sampler.weights == "f32" and .sampler.base == null)' f32.jsonl
}

@test "a bf16 gpt-oss (its own checkpoints' dtype): the mxfp4 base keeps the rest bf16, the file's model; rolled out on it, its log-probs the trainer's" {
    needs_oss
    B="$BATS_FILE_TMPDIR/batch.jsonl"
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_oss_mxfp4.py" bf16 --dtype bf16
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_tiny_tokenizer.py" bf16
    grpo-update --model bf16 --in "$B" --out mx --lr 1e-2 --lora-r 4 --metrics m-mx.jsonl 2> /dev/null
    grpo-update --model bf16 --in "$B" --out t1 --lr 1e-2 --lora-r 4 --base-weights mxfp4 --threads 1 2> /dev/null
    diff -r mx t1
    jq -e '.flags.base_weights == "mxfp4"' mx/grpo/state.json
    # the file's values, as the float32 base widens them, other float32 sums: loss and gradient norm
    # within 1e-6 relative (a bf16 rounding of the float32 model's would be ~1e-3 off)
    grpo-update --model bf16 --in "$B" --out f --lr 1e-2 --lora-r 4 --base-weights f32 --metrics m-f.jsonl 2> /dev/null
    jq -e -s '(.[0].loss - .[1].loss | fabs) < 1e-6 * (.[1].loss | fabs) and
              (.[0].grad_norm - .[1].grad_norm | fabs) < 1e-6 * .[1].grad_norm' m-mx.jsonl m-f.jsonl
    # rolled out on that base: the experts the file's blocks, the rest bf16 panels (48 + 8 attention
    # matrices + the embeddings + the head)
    args=(--model mx --in "$(P)" -k 4 --max-new-tokens 8 --seed 1)
    run -0 grpo-rollout "${args[@]}" --weights auto --progress --out r.jsonl
    [[ "$output" == *"weights mxfp4 frozen base (float32 activations, "*" kernel; LoRA adapter unmerged; attention bf16, embeddings bf16, LM head bf16; 48 of 58 matrices from the file's MXFP4 blocks)"* ]]
    jq -e -s 'all(.sampler == {"engine":"grpo","device":"cpu","weights":"mxfp4","base":"frozen","kv_cache":"f32"})' r.jsonl
    # the trainer's own log-probs (the mean bound 3e-6 of the float32 file's)
    jq -c '. + {advantage: (.sample - 1.5)}' r.jsonl > adv.jsonl
    grpo-update --model mx --in adv.jsonl --out u --lr 1e-2 --old-logp recompute --is-correction token \
        --metrics m-u.jsonl 2> /dev/null
    jq -e '."sampling/sampling_logp_difference/mean" < 3e-6' m-u.jsonl
}

@test "LoRA on the MXFP4 experts themselves (target_parameters): the float32 base's step; rolled out over the blocks, unmerged" {
    needs_oss
    B="$BATS_FILE_TMPDIR/batch.jsonl"
    grpo-update --model "$OSS" --in "$B" --out mx --lr 1e-2 --lora-r 4 --lora-targets all --metrics m-mx.jsonl 2> /dev/null
    jq -e '.flags.base_weights == "mxfp4"' mx/grpo/state.json
    jq -e '.target_parameters == ["mlp.experts.gate_up_proj","mlp.experts.down_proj"]' mx/adapter_config.json
    # the same values as the float32 base, other float32 sums: loss and gradient norm within 1e-6 relative
    grpo-update --model "$OSS" --in "$B" --out f --lr 1e-2 --lora-r 4 --lora-targets all --base-weights f32 \
        --metrics m-f.jsonl 2> /dev/null
    jq -e -s '(.[0].loss - .[1].loss | fabs) < 1e-6 * (.[1].loss | fabs) and
              (.[0].grad_norm - .[1].grad_norm | fabs) < 1e-6 * .[1].grad_norm' m-mx.jsonl m-f.jsonl
    # each rolled out with --weights auto over the file's blocks, the adapter unmerged (a merge
    # would widen the experts); --weights f32 merged: every one the reference's merge of PEFT's delta (1e-4)
    args=(--in "$(P)" -k 2 --max-new-tokens 12 --seed 3)
    for c in mx f; do
        run -0 grpo-rollout --model $c "${args[@]}" --weights auto --progress --out $c-auto.jsonl
        [[ "$output" == *"weights mxfp4 frozen base (float32 activations, "*"LoRA adapter unmerged; 48 of 57 matrices from the file's MXFP4 blocks)"* ]]
        ref_check check_rollout.py $c $c-auto.jsonl 1e-4
    done
    run -0 grpo-rollout --model f "${args[@]}" --weights f32 --progress --out f-f32.jsonl
    [[ "$output" != *"MXFP4 blocks"* ]]
    ref_check check_rollout.py f f-f32.jsonl 1e-4
    run grpo-rollout --model f "${args[@]}" --weights mxfp4 --out f-mx.jsonl
    cmp f-auto.jsonl f-mx.jsonl
    # the adapter moved them from the base's
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/check_rollout.py" "$OSS" f-f32.jsonl 1e-3
    [ "$status" -eq 1 ]
}

@test "--format hf: an adapter on the MXFP4 experts merged into them, written dequantized with the note" {
    needs_oss
    B="$BATS_FILE_TMPDIR/batch.jsonl"
    grpo-update --model "$OSS" --in "$B" --out e --lr 1e-2 --lora-r 4 --lora-targets gate,up,down 2> /dev/null
    run --separate-stderr grpo-export --model e --format hf --out ex
    [ "$status" -eq 0 ]
    [ "$stderr" = "grpo-export: note: the experts of layer 0 hold values MXFP4 does not (trained, or never MXFP4): every layer's are written as bf16, and config.json has no quantization_config" ]
    jq -e 'has("quantization_config") | not' ex/config.json
    "$GRPO_PY" - ex/model.safetensors <<'PY'
import sys
from safetensors.torch import load_file
t = load_file(sys.argv[1])
assert not any(k.endswith(("_blocks", "_scales")) for k in t), sorted(t)
assert t["model.layers.0.mlp.experts.gate_up_proj"].shape == (8, 64, 64)
PY
    # float32: the merge itself, the reference's merge of PEFT's delta (1e-4)
    grpo-export --model e --format hf --dtype f32 --out e32
    grpo-rollout --model e --in "$(P)" -k 2 --max-new-tokens 12 --seed 3 --weights f32 --out r.jsonl
    ref_check check_rollout.py e32 r.jsonl 1e-4
}

@test "--base-weights mxfp4: full fine-tuning, a model without MXFP4 experts: 64 with one line, nothing written; auto is f32 there" {
    needs_oss
    B="$BATS_FILE_TMPDIR/batch.jsonl"
    run grpo-update --model "$OSS" --in "$B" --out c --lr 1e-2 --base-weights mxfp4
    [ "$status" -eq 64 ]; assert_one_line_error grpo-update "--base-weights mxfp4: full fine-tuning trains every weight"
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" make-tiny gpt_oss bf
    run grpo-update --model bf --in "$B" --out c --lr 1e-2 --lora-r 4 --base-weights mxfp4
    [ "$status" -eq 64 ]
    assert_one_line_error grpo-update "--base-weights mxfp4: the experts of bf were not loaded from MXFP4 blocks"
    [ ! -e c ]
    # auto: f32 on a model without them, and for full fine-tuning
    grpo-update --model bf --in "$B" --out a --lr 1e-2 --lora-r 4 2> /dev/null
    jq -e '.flags.base_weights == "f32"' a/grpo/state.json
    grpo-update --model "$OSS" --in "$B" --out full --lr 1e-2 2> /dev/null
    jq -e '.flags.base_weights == "f32"' full/grpo/state.json
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

# blocks SRC OUT: OUT's experts are SRC's _blocks and _scales byte for byte,
# U8 of the same shapes, and OUT has no dequantized expert matrix
blocks() {
    "$GRPO_PY" - "$1/model.safetensors" "$2/model.safetensors" <<'PY'
import sys
from safetensors.torch import load_file
a, b = load_file(sys.argv[1]), load_file(sys.argv[2])
pairs = [k for k in a if k.endswith(("_blocks", "_scales"))]
assert len(pairs) == 8 and sorted(pairs) == sorted(k for k in b if k.endswith(("_blocks", "_scales"))), sorted(b)
for k in pairs:
    assert b[k].dtype == a[k].dtype and b[k].shape == a[k].shape and b[k].numpy().tobytes() == a[k].numpy().tobytes(), k
assert not any(k.endswith(("experts.gate_up_proj", "experts.down_proj")) for k in b), sorted(b)
PY
}

@test "an HF export of the MXFP4 model keeps its experts: the source's _blocks and _scales byte for byte, quantization_config, the same records" {
    needs_oss
    # the source with its other weights bf16's values, so a bf16 export is exact throughout
    cp -r "$OSS" src
    edit src "import torch
for k in t:
    if t[k].dtype == np.float32: t[k] = torch.from_numpy(t[k]).to(torch.bfloat16).float().numpy()"
    run --separate-stderr grpo-export --model src --format hf --out hf
    [ "$status" -eq 0 ] && [ -z "$stderr" ]
    blocks src hf
    jq -e '.torch_dtype == "bfloat16"' hf/config.json
    cmp <(jq -S .quantization_config src/config.json) <(jq -S .quantization_config hf/config.json)
    # the rest bf16 in the order the safetensors package writes (float tensors by name, then U8 ones)
    "$GRPO_PY" - hf/model.safetensors <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
h = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])
h.pop("__metadata__")
names = list(h)
rank = lambda k: h[k]["dtype"] == "U8"
assert names == sorted(names, key=lambda k: (rank(k), k)), names
assert {h[k]["dtype"] for k in names} == {"BF16", "U8"}, names
PY
    args=(--in "$(P)" -k 2 --max-new-tokens 8 --seed 5 --weights f32)
    grpo-rollout --model src "${args[@]}" --out a.jsonl
    grpo-rollout --model hf "${args[@]}" --out b.jsonl
    cmp <(jq -c 'del(.policy)' a.jsonl) <(jq -c 'del(.policy)' b.jsonl)
    # and the export of the export is the same file
    grpo-export --model hf --format hf --dtype f16 --out hf2
    blocks hf hf2
    grpo-export --model hf --format hf --out hf3
    cmp hf/model.safetensors hf3/model.safetensors
}

@test "the written blocks dequantized by transformers' convert_moe_packed_tensors are the model's float32 experts bit for bit" {
    needs_oss
    grpo-export --model "$OSS" --format hf --out hf
    grpo-export --model "$OSS" --format hf --dtype f32 --out f32
    "$GRPO_PY" - "$GRPO_ROOT/tests/ref" hf/model.safetensors f32/model.safetensors <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import torch
from mxfp4_ref import convert_moe_packed_tensors
from safetensors.torch import load_file
mx, f = load_file(sys.argv[2]), load_file(sys.argv[3])
n = negz = 0
for k in mx:
    if not k.endswith("_blocks"):
        continue
    w = k[:-len("_blocks")]
    # transformers' [E, out, in] transposed to the bf16 layout's [E, in, out], as it loads them
    ref = convert_moe_packed_tensors(mx[k], mx[w + "_scales"], dtype=torch.float32).transpose(1, 2).contiguous()
    assert ref.shape == f[w].shape and ref.numpy().tobytes() == f[w].numpy().tobytes(), w
    negz += int(((ref == 0) & torch.signbit(ref)).sum())
    n += 1
assert n == 4 and negz > 0, (n, negz)  # code 8 read as -0 as transformers reads it
PY
}

@test "--format hf: a LoRA checkpoint keeps the base's MXFP4 experts; a full fine-tuning step, or --dtype f32, writes them dequantized" {
    needs_oss
    B="$BATS_FILE_TMPDIR/batch.jsonl"
    grpo-update --model "$OSS" --in "$B" --out lora --lr 1e-2 --lora-r 4 --base-weights f32 2> /dev/null
    run --separate-stderr grpo-export --model lora --format hf --out lx
    [ "$status" -eq 0 ] && [ -z "$stderr" ]
    blocks "$OSS" lx
    # the checkpoint's config.json has no quantization_config: gpt-oss's own is written
    jq -e 'has("quantization_config") | not' lora/config.json
    jq -e '.quantization_config == {"modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
           "model.embed_tokens", "lm_head"], "quant_method": "mxfp4"}' lx/config.json
    grpo-update --model "$OSS" --in "$B" --out full --lr 1e-2 2> /dev/null
    run --separate-stderr grpo-export --model full --format hf --out fx
    [ "$status" -eq 0 ]
    [ "$stderr" = "grpo-export: note: the experts of layer 0 hold values MXFP4 does not (trained, or never MXFP4): every layer's are written as bf16, and config.json has no quantization_config" ]
    jq -e 'has("quantization_config") | not' fx/config.json
    # --dtype f32 writes them float32 as the GGUF export does, without a note
    run --separate-stderr grpo-export --model "$OSS" --format hf --dtype f32 --out f32
    [ "$status" -eq 0 ] && [ -z "$stderr" ]
    jq -e 'has("quantization_config") | not' f32/config.json
    jq -e '.quantization_config.quant_method == "mxfp4"' "$OSS/config.json"
    for d in fx f32; do
        "$GRPO_PY" - $d/model.safetensors <<'PY'
import sys
from safetensors.torch import load_file
t = load_file(sys.argv[1])
assert not any(k.endswith(("_blocks", "_scales")) for k in t), sorted(t)
assert t["model.layers.1.mlp.experts.gate_up_proj"].shape == (8, 64, 64)
assert t["model.layers.1.mlp.experts.down_proj"].shape == (8, 32, 64)
PY
    done
    args=(--in "$(P)" -k 2 --max-new-tokens 8 --seed 5 --weights f32)
    grpo-rollout --model "$OSS" "${args[@]}" --out a.jsonl
    grpo-rollout --model f32 "${args[@]}" --out b.jsonl
    cmp <(jq -c 'del(.policy)' a.jsonl) <(jq -c 'del(.policy)' b.jsonl)
}
