#!/usr/bin/env bats
# grpo-update --base-weights f32|bf16|q8|q4k|auto: LoRA over a frozen base held
# packed (the adapter, its gradients and AdamW state float32). The flag's
# values, the refusal of full fine-tuning on a packed base (64, nothing
# written), the same bytes run to run and for any --threads, the flag in
# state.json and its resume rule. A checkpoint of such a run rolled out on
# that base (--weights auto or its format: the adapter unmerged, the
# trainer's own log-probs, taken as pi_old by a trainer on the same base
# format only); --weights f32 merging into the base's rounded values. A
# mixture of experts (qwen3_moe) the same, each expert's matrices packed apart.
# grpo-export --dtype q4_k's file as such a base. Gradients against PyTorch
# on the dequantized base: train_grad.bats.
# needs: venv
load helpers

setup_file() { update_fixture; }

B() { echo "$BATS_FILE_TMPDIR/batch.jsonl"; }

@test "--base-weights q8, q4k or bf16 with full fine-tuning: 64 with one line naming the way, nothing written" {
    needs_tiny
    for f in q8 q4k bf16; do
        run grpo-update --model "$TINY" --in "$(B)" --out c --lr 1e-3 --base-weights $f
        [ "$status" -eq 64 ]; assert_one_line_error grpo-update "full fine-tuning trains every weight"
        printf '%s\n' "$output" | grep -q "use an f32 base"
        [ ! -e c ]
    done
    # f32 and auto train in full as before
    grpo-update --model "$TINY" --in "$(B)" --out a --lr 1e-3 --base-weights auto 2> /dev/null
    grpo-update --model "$TINY" --in "$(B)" --out f --lr 1e-3 2> /dev/null
    diff -r a f
    jq -e '.flags.base_weights == "f32"' a/grpo/state.json
}

@test "--base-weights auto for LoRA: the file's format (Q8_0 GGUF q8, bf16 safetensors bf16, f32 f32); the same as naming it" {
    needs_tiny
    grpo-export --model "$TINY" --format gguf --dtype q8_0 --out q8.gguf 2> /dev/null
    grpo-export --model "$TINY" --format hf --dtype bf16 --out hf-bf16 2> /dev/null
    for src in q8.gguf:q8 hf-bf16:bf16 "$TINY":f32; do
        m=${src%:*} f=${src##*:}
        rm -rf a n
        grpo-update --model "$m" --in "$(B)" --out a --lr 1e-2 --lora-r 4 --beta 0 2> /dev/null
        jq -e --arg f $f '.flags.base_weights == $f' a/grpo/state.json
        grpo-update --model "$m" --in "$(B)" --out n --lr 1e-2 --lora-r 4 --beta 0 --base-weights $f 2> /dev/null
        diff -r a n
        # continued with auto: the checkpoint's own
        grpo-update --model a --in "$(B)" --out a2 --lr 1e-2 --beta 0 2> /dev/null
        jq -e --arg f $f '.flags.base_weights == $f' a2/grpo/state.json
        rm -rf a2
    done
}

@test "--base-weights: listed by --help; a bad value is 64 with one line" {
    run grpo-update --help
    [ "$status" -eq 0 ]
    printf '%s\n' "$output" | grep -q -- "  --base-weights F .*q8 (8-bit blocks) or q4k"
    run grpo-update --model m --out x --base-weights q4
    [ "$status" -eq 64 ]; assert_one_line_error grpo-update "--base-weights"
    printf '%s\n' "$output" | grep -q "f32|bf16|q8|q4k|mxfp4|auto"
}

@test "LoRA over a q8, a q4k and a bf16 base: the same bytes twice and for --threads 1 and 2; not f32's; state.json names it" {
    needs_tiny
    for f in q8 q4k bf16; do
        grpo-update --model "$TINY" --in "$(B)" --out $f-a --lr 1e-2 --lora-r 4 --beta 0.1 --base-weights $f \
            --metrics m-$f.jsonl 2> /dev/null
        grpo-update --model "$TINY" --in "$(B)" --out $f-b --lr 1e-2 --lora-r 4 --beta 0.1 --base-weights $f \
            --threads 1 2> /dev/null
        grpo-update --model "$TINY" --in "$(B)" --out $f-c --lr 1e-2 --lora-r 4 --beta 0.1 --base-weights $f \
            --threads 2 --recompute 2> /dev/null
        diff -r $f-a $f-b
        cmp $f-a/adapter_model.safetensors $f-c/adapter_model.safetensors
        jq -e --arg f $f '.flags.base_weights == $f and .flags.lora_r == 4' $f-a/grpo/state.json
        # the reference (the base, adapter off) runs on the same packed base: at step 0 no KL
        jq -e '.kl == 0' m-$f.jsonl
    done
    grpo-update --model "$TINY" --in "$(B)" --out f32 --lr 1e-2 --lora-r 4 --beta 0.1 2> /dev/null
    ! cmp -s f32/adapter_model.safetensors q8-a/adapter_model.safetensors || false
    ! cmp -s f32/adapter_model.safetensors bf16-a/adapter_model.safetensors || false
    ! cmp -s q8-a/adapter_model.safetensors bf16-a/adapter_model.safetensors || false
    ! cmp -s f32/adapter_model.safetensors q4k-a/adapter_model.safetensors || false
    ! cmp -s q8-a/adapter_model.safetensors q4k-a/adapter_model.safetensors || false
}

@test "resume: the checkpoint's --base-weights continues; another one given is 64, nothing written" {
    needs_tiny
    grpo-update --model "$TINY" --in "$(B)" --out q1 --lr 1e-2 --lora-r 4 --base-weights q8 2> /dev/null
    grpo-update --model q1 --in "$(B)" --out q2 --lr 1e-2 2> /dev/null
    grpo-update --model q1 --in "$(B)" --out q3 --lr 1e-2 --base-weights q8 2> /dev/null
    grpo-update --model q1 --in "$(B)" --out q4 --lr 1e-2 --base-weights auto 2> /dev/null
    jq -e '.step == 2 and .flags.base_weights == "q8"' q2/grpo/state.json
    diff -r q2 q3
    diff -r q2 q4
    run grpo-update --model q1 --in "$(B)" --out q5 --base-weights f32
    [ "$status" -eq 64 ]; assert_one_line_error grpo-update "q1 was trained with --base-weights q8; leave --base-weights out"
    [ ! -e q5 ]
    # a checkpoint without flags.base_weights is f32's; an unknown value is 65
    jq -c 'del(.flags.base_weights)' q1/grpo/state.json > s && mv s q1/grpo/state.json
    run grpo-update --model q1 --in "$(B)" --out q5 --base-weights bf16
    [ "$status" -eq 64 ]; assert_one_line_error grpo-update "trained with --base-weights f32"
    jq -c '.flags.base_weights = "q4"' q1/grpo/state.json > s && mv s q1/grpo/state.json
    run grpo-update --model q1 --in "$(B)" --out q5
    [ "$status" -eq 65 ]; assert_one_line_error grpo-update 'flags.base_weights'
    [ ! -e q5 ]
}

# merged_check MODEL CKPT OUT: OUT (CKPT exported merged, float32) is the base
# MODEL's matrices rounded as CKPT's flags.base_weights says (gguf-py's Q8_0
# or bf16, round to nearest even; each expert's matrix apart, the embeddings
# and the LM head too, a mixture's router, mlp.gate, kept float32) plus the
# adapter's product, to 1e-6
merged_check() {
    "$GRPO_PY" - "$@" <<'PY'
import json, sys
import numpy as np
import gguf
from safetensors.numpy import load_file
base_dir, ckpt, out = sys.argv[1:4]
fmt = json.load(open(ckpt + "/grpo/state.json"))["flags"]["base_weights"]
base, got = load_file(base_dir + "/model.safetensors"), load_file(out + "/model.safetensors")
ad = load_file(ckpt + "/adapter_model.safetensors")
cfg = json.load(open(ckpt + "/adapter_config.json"))
scale = cfg["lora_alpha"] / cfg["r"]
def rounded(w):  # the frozen base's values: Q8_0 blocks (gguf-py) or bf16, round to nearest even
    if fmt == "q8":
        q = gguf.quants.quantize(w, gguf.GGMLQuantizationType.Q8_0)
        return gguf.quants.dequantize(q, gguf.GGMLQuantizationType.Q8_0).reshape(w.shape)
    b = w.astype(np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) >> 16 << 16
    return b.astype(np.uint32).view(np.float32)
worst = unrounded = 0.0
n_rounded = n_adapted = 0
for n, w in base.items():
    w = w.astype(np.float32)
    layer_matrix = (".self_attn." in n or ".mlp." in n) and not n.endswith(".mlp.gate.weight") and w.ndim == 2
    packed = layer_matrix or n in ("model.embed_tokens.weight", "lm_head.weight")
    want = rounded(w) if packed else w
    n_rounded += packed
    a = "base_model.model." + n.removesuffix(".weight") + ".lora_A.weight"
    if a in ad:
        delta = scale * (ad[a.replace("lora_A", "lora_B")].astype(np.float64) @ ad[a].astype(np.float64))
        want = want + delta
        n_adapted += 1
        unrounded = max(unrounded, float(np.abs(w + delta - got[n]).max()))
    worst = max(worst, float(np.abs(want - got[n]).max() / max(1.0, np.abs(want).max())))
print(fmt, n_rounded, "matrices rounded,", n_adapted, "adapted; merged vs reference", worst,
      "vs the unrounded base", unrounded)
assert worst < 1e-6, worst
assert unrounded > 1e-4, unrounded  # the rounding is visible: the check can tell them apart
PY
}

@test "a LoRA checkpoint on a q8 or bf16 base merges into that base's values (gguf-py's Q8_0, bf16 rounding)" {
    needs_tiny
    for f in q8 bf16; do
        grpo-update --model "$TINY" --in "$(B)" --out $f --lr 1e-1 --lora-r 4 --base-weights $f 2> /dev/null
        grpo-export --model $f --format hf --dtype f32 --out $f-hf 2> /dev/null
        merged_check "$TINY" $f $f-hf
    done
}

@test "qwen3_moe (LoRA on every expert too) on a q8, q4k or bf16 base: same bytes for any --threads, merged into the rounded experts, rolled out on that base" {
    needs_tiny
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" make-tiny qwen3_moe moe --norm-topk
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_tiny_tokenizer.py" moe
    jq -c '{id, prompt_tokens}' "$(B)" | awk '!seen[$0]++' > prompts.jsonl
    for f in q8 q4k bf16; do
        grpo-update --model moe --in "$(B)" --out $f --lr 1e-1 --lora-r 4 --lora-targets all --base-weights $f \
            2> /dev/null
        grpo-update --model moe --in "$(B)" --out $f-1 --lr 1e-1 --lora-r 4 --lora-targets all --base-weights $f \
            --threads 1 2> /dev/null
        diff -r $f $f-1
        jq -e --arg f $f '.flags.base_weights == $f' $f/grpo/state.json
        # 2 layers x (4 attention + 8 experts x 3) matrices rounded, every one adapted, and the
        # embeddings and the head
        grpo-export --model $f --format hf --dtype f32 --out $f-hf 2> /dev/null
        # (gguf-py has no Q4_K quantizer to compare with: the dense q4k merge test below bounds it)
        if [ $f != q4k ]; then
            run merged_check moe $f $f-hf
            echo "$output"
            [ "$status" -eq 0 ]
            [[ "$output" == *"58 matrices rounded, 56 adapted"* ]]
        fi
        # on that base, the adapter unmerged: the trainer's own log-probs (mean bound 3e-6, as on a dense base)
        grpo-rollout --model $f --weights auto -k 4 --max-new-tokens 8 --seed 1 --in prompts.jsonl --progress \
            2> ro-$f.log | jq -c '. + {advantage: (.sample - 1.5)}' > r-$f.jsonl
        grep -q "weights $f frozen base (float32 activations, .* kernel; LoRA adapter unmerged)" ro-$f.log
        [ "$(jq -r .sampler.base r-$f.jsonl | sort -u)" = frozen ]
        grpo-update --model $f --in r-$f.jsonl --out u-$f --lr 1e-2 --old-logp recompute --is-correction token \
            --metrics m-$f.jsonl 2> /dev/null
        jq -e '."sampling/sampling_logp_difference/mean" < 3e-6' m-$f.jsonl
        # the merged export rolls out as any model: the same prompts, each record with its routing
        grpo-rollout --model $f-hf --weights f32 -k 4 --max-new-tokens 8 --seed 1 --in prompts.jsonl \
            2> /dev/null > x-$f.jsonl
        [ "$(wc -l < x-$f.jsonl)" -eq "$(wc -l < r-$f.jsonl)" ]
        [ "$(jq -c 'select(.routing.layers != 2)' x-$f.jsonl | wc -l)" -eq 0 ]
    done
}

# frozen_records F: prompts from the batch, a LoRA checkpoint F trained on a
# frozen base of format F, and its records r-F.jsonl rolled out with
# --weights auto, each with an advantage
frozen_records() {
    [ -s prompts.jsonl ] || jq -c '{id, prompt_tokens}' "$(B)" | awk '!seen[$0]++' > prompts.jsonl
    grpo-update --model "$TINY" --in "$(B)" --out $1 --lr 1e-1 --lora-r 4 --base-weights $1 2> /dev/null
    grpo-rollout --model $1 --weights auto -k 4 --max-new-tokens 8 --seed 1 --in prompts.jsonl --progress \
        2> ro-$1.log | jq -c '. + {advantage: (.sample - 1.5)}' > r-$1.jsonl
}

@test "a LoRA checkpoint on a q8, q4k or bf16 base rolls out on that base (--weights auto or its format): the sampler says so, the same bytes for any --threads and --batch, the update takes its log-probs" {
    needs_tiny
    for f in q8 q4k bf16; do
        frozen_records $f
        want="{\"engine\":\"grpo\",\"device\":\"cpu\",\"weights\":\"$f\",\"base\":\"frozen\",\"kv_cache\":\"f32\"}"
        [ "$(jq -c .sampler r-$f.jsonl | sort -u)" = "$want" ]
        grep -q "weights $f frozen base (float32 activations, .* kernel; LoRA adapter unmerged)" ro-$f.log
        # the base's own format named: the same records; and for one thread, one prompt's samples at a time
        # (every product, the head's too, on the packed blocks: no row depends on the rows beside it)
        grpo-rollout --model $f --weights $f -k 4 --max-new-tokens 8 --seed 1 --in prompts.jsonl 2> /dev/null |
            jq -c '. + {advantage: (.sample - 1.5)}' | cmp - r-$f.jsonl
        grpo-rollout --model $f --weights auto -k 4 --max-new-tokens 8 --seed 1 --in prompts.jsonl --threads 1 \
            --batch 4 2> /dev/null | jq -c '. + {advantage: (.sample - 1.5)}' | cmp - r-$f.jsonl
        # the trainer's own log-probs: per-token |difference| measured mean 3.0e-7 (q8, q4k) and 2.8e-7
        # (bf16), max 1.4e-6; the mean bound 3e-6 (a bf16 or q8 rollout of the merged model: 1e-2 or more)
        grpo-update --model $f --in r-$f.jsonl --out u-$f --lr 1e-2 --old-logp recompute --is-correction token \
            --metrics m-$f.jsonl 2> /dev/null
        jq -e '."sampling/sampling_logp_difference/mean" < 3e-6' m-$f.jsonl
        # auto: the records' log-probs are pi_old, no correction
        grpo-update --model $f --in r-$f.jsonl --out d-$f --lr 1e-2 2> /dev/null
        jq -e '.flags.recompute_old == false and .flags.is_correction == "none"' d-$f/grpo/state.json
    done
}

@test "frozen-base records: exact only for a trainer on a base of that format with a float32 cache; --weights f32 still merges" {
    needs_tiny
    frozen_records q8
    jq -c 'del(.policy_step)' r-q8.jsonl > any-step.jsonl
    # a fresh adapter on the same base format: exact; on a bf16 or f32 base: recomputed, corrected
    grpo-update --model "$TINY" --in any-step.jsonl --out same --lr 1e-2 --lora-r 4 --base-weights q8 2> /dev/null
    jq -e '.flags.recompute_old == false' same/grpo/state.json
    for f in bf16 f32; do
        grpo-update --model "$TINY" --in any-step.jsonl --out other-$f --lr 1e-2 --lora-r 4 --base-weights $f 2> err
        jq -e '.flags.recompute_old == true and .flags.is_correction == "token"' other-$f/grpo/state.json
        grep -q "(64 of 64 records not sampled with the trainer's arithmetic)" err
    done
    # a bf16 cache asked for: not the trainer's attention
    grpo-rollout --model q8 --weights auto --kv-cache bf16 -k 4 --max-new-tokens 8 --seed 1 --in prompts.jsonl 2> /dev/null |
        jq -c '. + {advantage: (.sample - 1.5)}' > kv.jsonl
    [ "$(jq -c .sampler.kv_cache kv.jsonl | sort -u)" = '"bf16"' ]
    grpo-update --model q8 --in kv.jsonl --out kv --lr 1e-2 2> /dev/null
    jq -e '.flags.recompute_old == true' kv/grpo/state.json
    # --weights f32: the adapter merged into the base's rounded values, as before
    grpo-rollout --model q8 --weights f32 -k 4 --max-new-tokens 8 --seed 1 --in prompts.jsonl --progress \
        2> f32.log > f32.jsonl
    [ "$(jq -c .sampler f32.jsonl | sort -u)" = '{"engine":"grpo","device":"cpu","weights":"f32","kv_cache":"f32"}' ]
    ! grep -q "frozen base" f32.log || false
}

@test "a LoRA checkpoint on a q4k base merges into that base's Q4_K values: at most 16 values a sub-block of 32, near the base" {
    needs_tiny
    grpo-update --model "$TINY" --in "$(B)" --out q4k --lr 1e-1 --lora-r 4 --base-weights q4k 2> /dev/null
    grpo-export --model q4k --format hf --dtype f32 --out q4k-hf 2> /dev/null
    "$GRPO_PY" - "$TINY" q4k q4k-hf <<'PY'
import json, sys
import numpy as np
from safetensors.numpy import load_file
base_dir, ckpt, out = sys.argv[1:4]
base, got = load_file(base_dir + "/model.safetensors"), load_file(out + "/model.safetensors")
ad = load_file(ckpt + "/adapter_model.safetensors")
cfg = json.load(open(ckpt + "/adapter_config.json"))
scale = cfg["lora_alpha"] / cfg["r"]
most = far = moved = 0.0
checked = 0
for n, w in base.items():
    if not ((".self_attn." in n or ".mlp." in n or n in ("model.embed_tokens.weight", "lm_head.weight"))
            and w.ndim == 2):
        assert np.array_equal(got[n], w.astype(np.float32)), n  # the rest untouched
        continue
    rounded = got[n].astype(np.float64)
    a = "base_model.model." + n.removesuffix(".weight") + ".lora_A.weight"
    if a in ad:
        rounded -= scale * (ad[a.replace("lora_A", "lora_B")].astype(np.float64) @ ad[a].astype(np.float64))
    # Q4_K: every sub-block of 32 holds d sc q - dmin mn for 16 codes q: at most 16 values
    # (told apart to 1e-5: the merge's float32 rounding moves each by under 1e-6)
    for sub in rounded.reshape(-1, 32):
        v = np.sort(sub)
        most = max(most, 1 + int(np.sum(np.diff(v) > 1e-5)))
    w = w.astype(np.float64)
    far = max(far, float(np.abs(rounded - w).max() / np.abs(w).max()))
    moved = max(moved, float(np.abs(rounded - w).max()))
    checked += 1
print("# q4k: matrices", checked, "most values in a sub-block", most, "relative distance to the base", far, "moved", moved)
assert checked == 2 * 7 + 2 and most <= 16, (checked, most)  # 2 layers x 7, the embeddings and the head
assert far < 0.1, far  # the 4-bit grid of the base's own range
assert moved > 1e-4, moved  # the rounding is visible
PY
}

@test "grpo-export --dtype q4_k: our quantizer's Q4_K blocks; a q4k base from that file trains as from the float model, byte for byte" {
    needs_tiny
    # the tiny llama 256 wide: every matrix's rows whole 256-value super-blocks
    make_wide_llama wide
    grpo-export --model wide --format gguf --dtype q4_k --out q4k.gguf 2> /dev/null
    # as gguf-py reads it: every matrix Q4_K (its rows whole super-blocks), every vector
    # F32, general.file_type 14 (llama.cpp's mostly Q4_K); dequantized within 4-bit
    # rounding of the float model's (relative RMS error per matrix)
    "$GRPO_PY" - wide q4k.gguf <<'PY'
import sys
import numpy as np
import gguf
from safetensors.numpy import load_file
src, path = sys.argv[1:3]
r = gguf.GGUFReader(path)
ft = r.fields["general.file_type"]
assert int(ft.parts[ft.data[0]][0]) == 14
floats = load_file(src + "/model.safetensors")
worst, n = 0.0, 0
for t in r.tensors:
    matrix = len(t.shape) == 2
    want = gguf.GGMLQuantizationType.Q4_K if matrix else gguf.GGMLQuantizationType.F32
    assert t.tensor_type == want, (t.name, t.tensor_type)
    if t.name == "token_embd.weight":  # rows as the float model holds them (no Q/K permutation)
        x = gguf.quants.dequantize(t.data, t.tensor_type).reshape(int(t.shape[1]), int(t.shape[0]))
        w = floats["model.embed_tokens.weight"]
        worst, n = max(worst, float(np.sqrt(np.mean((x - w) ** 2) / np.mean(w ** 2)))), n + 1
    n += matrix and t.name != "token_embd.weight"
print("# matrices", n, "the embeddings' relative RMS error", worst)
assert n >= 15 and 0 < worst < 0.1, (n, worst)
PY
    # our loader reads the blocks as gguf-py's dequantizer does, exactly (the file read
    # back and written as F32, against gguf-py on the Q4_K file)
    grpo-export --model q4k.gguf --format gguf --dtype f32 --out back.gguf 2> /dev/null
    "$GRPO_PY" - q4k.gguf back.gguf <<'PY'
import sys
import numpy as np
import gguf
back = {t.name: t for t in gguf.GGUFReader(sys.argv[2]).tensors}
n = 0
for t in gguf.GGUFReader(sys.argv[1]).tensors:
    if t.tensor_type != gguf.GGMLQuantizationType.Q4_K:
        continue
    x = gguf.quants.dequantize(t.data, t.tensor_type).reshape(-1)
    y = np.asarray(back[t.name].data, dtype=np.float32).reshape(-1)
    assert np.array_equal(x, y), t.name
    n += 1
print("# Q4_K tensors read as gguf-py reads them:", n)
assert n >= 15
PY
    # the float model packed as q4k at load and the Q4_K file taken as its blocks (auto):
    # the same blocks, so the same adapter and optimizer state
    grpo-update --model wide --in "$(B)" --out a --lr 1e-1 --lora-r 4 --beta 0 --base-weights q4k 2> /dev/null
    grpo-update --model q4k.gguf --in "$(B)" --out b --lr 1e-1 --lora-r 4 --beta 0 --progress 2> b.log
    jq -e '.flags.base_weights == "q4k"' b/grpo/state.json
    cmp a/adapter_model.safetensors b/adapter_model.safetensors
    cmp a/grpo/optimizer.safetensors b/grpo/optimizer.safetensors
    # a model whose rows are not whole super-blocks (the tiny one, 64 wide): its matrices Q8_0
    grpo-export --model "$TINY" --format gguf --dtype q4_k --out t.gguf 2> /dev/null
    "$GRPO_PY" - t.gguf <<'PY'
import sys
import gguf
for t in gguf.GGUFReader(sys.argv[1]).tensors:
    want = gguf.GGMLQuantizationType.Q8_0 if len(t.shape) == 2 else gguf.GGMLQuantizationType.F32
    assert t.tensor_type == want, (t.name, t.tensor_type)
PY
    # a weight beyond what Q4_K's f16 scales hold (max |x| / 63): 65 naming the tensor, nothing written
    cp -r wide big
    "$GRPO_PY" - big/model.safetensors <<'PY'
import sys
from safetensors.torch import load_file, save_file
t = load_file(sys.argv[1])
t["model.layers.0.mlp.down_proj.weight"][0, 3] = 5e6
save_file(t, sys.argv[1], metadata={"format": "pt"})
PY
    run -65 grpo-export --model big --format gguf --dtype q4_k --out big.gguf
    assert_one_line_error grpo-export "tensor 'blk.0.ffn_down.weight': value 3 .*beyond what q4_k holds"
    [ ! -e big.gguf ]
    # q4_k is a GGUF type: hf and peft refuse it (64), nothing written
    run -64 grpo-export --model wide --format hf --dtype q4_k --out o
    assert_one_line_error grpo-export "--dtype q4_k: not a Hugging Face dtype"
    [ ! -e o ]
}

@test "a Q4_K GGUF (blocks no quantizer wrote): auto takes q4k, its blocks as they are; merged and rolled out on their values" {
    needs_tiny
    # the tiny llama 256 wide (rows of whole 256-value super-blocks), its layer
    # matrices random Q4_K blocks but layer 1's ffn_up, kept f32 (quantized by ours)
    make_wide_llama wide
    grpo-export --model wide --format gguf --dtype f32 --out f32.gguf 2> /dev/null
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/q4k_gguf.py" f32.gguf q4k.gguf --random 7 --keep blk.1.ffn_up.weight
    grpo-update --model q4k.gguf --in "$(B)" --out a --lr 1e-1 --lora-r 4 --beta 0 2> /dev/null
    jq -e '.flags.base_weights == "q4k"' a/grpo/state.json
    grpo-update --model q4k.gguf --in "$(B)" --out n --lr 1e-1 --lora-r 4 --beta 0 --base-weights q4k 2> /dev/null
    diff -r a n
    # merged: the file's values (its blocks dequantized, as the f32 export of the GGUF reads them)
    # plus the adapter's product; the kept matrix, the embeddings and the head our quantizer's
    # Q4_K of their floats
    grpo-export --model a --format hf --dtype f32 --out merged 2> /dev/null
    grpo-export --model q4k.gguf --format hf --dtype f32 --out file-hf 2> /dev/null
    "$GRPO_PY" - a merged file-hf <<'PY'
import json, sys
import numpy as np
from safetensors.numpy import load_file
ckpt, out, file_dir = sys.argv[1:4]
got, base = load_file(out + "/model.safetensors"), load_file(file_dir + "/model.safetensors")
ad = load_file(ckpt + "/adapter_model.safetensors")
cfg = json.load(open(ckpt + "/adapter_config.json"))
scale = cfg["lora_alpha"] / cfg["r"]
worst, checked = 0.0, 0
for n, w in base.items():
    a = "base_model.model." + n.removesuffix(".weight") + ".lora_A.weight"
    merged = got[n].astype(np.float64)
    if a in ad:
        merged -= scale * (ad[a.replace("lora_A", "lora_B")].astype(np.float64) @ ad[a].astype(np.float64))
    diff = float(np.abs(merged - w).max())
    # quantized by ours from their floats (the kept matrix; the embeddings and the head,
    # float32 in the file, packed with the base): 16 values a sub-block
    if n in ("model.layers.1.mlp.up_proj.weight", "model.embed_tokens.weight", "lm_head.weight"):
        most = max(1 + int(np.sum(np.diff(np.sort(s)) > 1e-5)) for s in merged.reshape(-1, 32))
        assert diff > 1e-4 and most <= 16, (diff, most)
        continue
    worst, checked = max(worst, diff / max(float(np.abs(w).max()), 1e-30)), checked + 1
print("# tensors", checked, "worst relative distance from the file's values", worst)
assert checked > 14 and worst < 1e-6, worst
PY
    # rolled out on that base: the trainer's own log-probs
    jq -c '{id, prompt_tokens}' "$(B)" | awk '!seen[$0]++' > prompts.jsonl
    grpo-rollout --model a --weights auto -k 4 --max-new-tokens 8 --seed 1 --in prompts.jsonl --progress 2> ro.log |
        jq -c '. + {advantage: (.sample - 1.5)}' > r.jsonl
    grep -q "weights q4k frozen base (float32 activations, .* kernel; LoRA adapter unmerged; 13 of 16 matrices from the file's Q4_K blocks)" ro.log
    grpo-update --model a --in r.jsonl --out u --lr 1e-2 --old-logp recompute --is-correction token \
        --metrics m.jsonl 2> /dev/null
    jq -e '."sampling/sampling_logp_difference/mean" < 3e-6' m.jsonl
}
