#!/usr/bin/env bats
# grpo-update --device: the choice of CPU or GPU and its errors everywhere;
# on a machine with an NVIDIA GPU and a CUDA build, training there against
# the CPU's step (LoRA over a packed frozen base among them). Without a GPU
# the GPU tests skip visibly (the device path's plumbing is checked on the
# CPU by tests/unit/test_train_device.c and test_frozen_device.c, on a
# backend that keeps its memory apart as a GPU does).
#
# Tolerances on the GPU (bf16 products, float32 sums): with SGD the update
# is lr times the gradient, compared to the CPU's float32 step as
# update_ref.py close-delta does (the largest difference over the largest
# update, per tensor): 5e-2, from the 0.5-2.2% that bf16 operands moved the
# tiny models' logits and log-probs in docs/gpu.md's emulation; the
# metrics' loss and grad_norm within 5e-2 relative.
# needs: venv
load helpers

setup_file() {
    update_fixture
    [ -x "$GRPO_PY" ] || return 0
    for arch in qwen2 qwen3; do
        "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" make-tiny "$arch" "$BATS_FILE_TMPDIR/tiny_$arch"
        "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_tiny_tokenizer.py" "$BATS_FILE_TMPDIR/tiny_$arch"
    done
}

B() { echo "$BATS_FILE_TMPDIR/batch.jsonl"; }
ref() { "$GRPO_PY" "$GRPO_ROOT/tests/ref/update_ref.py" "$@"; }

# Skips unless --device cuda can train here (a CUDA build and a device).
needs_gpu() {
    needs_tiny
    run grpo-update --model "$TINY" --in "$(B)" --out "$BATS_FILE_TMPDIR/probe" --device cuda
    [ "$status" -ne 69 ] || skip "no CUDA device ($output)"
    [ "$status" -eq 0 ]
}

# close_metrics A.jsonl B.jsonl TOL: loss and grad_norm within TOL relative
close_metrics() {
    "$GRPO_PY" - "$1" "$2" "$3" << 'EOF'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
tol = float(sys.argv[3])
assert len(a) == len(b) and a
for x, y in zip(a, b):
    for k in ("loss", "grad_norm"):
        u, v = x[k], y[k]
        assert abs(u - v) <= tol * max(abs(u), abs(v)) + 1e-9, (k, u, v)
EOF
}

@test "--device: a bad value is 64; cuda without a GPU or a CUDA build is 69 and one line, nothing written" {
    needs_tiny
    run -64 grpo-update --model "$TINY" --in "$(B)" --out c --device gpu
    assert_one_line_error grpo-update "--device"
    run grpo-update --model "$TINY" --in "$(B)" --out c --device cuda
    [ "$status" -eq 0 ] && skip "this machine has a CUDA device"
    [ "$status" -eq 69 ]
    assert_one_line_error grpo-update "--device cuda: (this build has no CUDA support \(make CUDA=1\)|no CUDA device)"
    [ ! -e c ]
}

@test "--device cuda --base-weights q4k without a GPU or a CUDA build: 69 and the device's one line, as without a packed base" {
    needs_tiny
    run grpo-update --model "$TINY" --in "$(B)" --out c --device cuda --lora-r 4 --base-weights q4k
    [ "$status" -eq 0 ] && skip "this machine has a CUDA device"
    [ "$status" -eq 69 ]
    assert_one_line_error grpo-update "--device cuda: (this build has no CUDA support \(make CUDA=1\)|no CUDA device)"
    [[ "$output" != *"CPU only"* ]] # a packed base is no longer refused on a device
    [ ! -e c ]
}

@test "--device auto without a GPU trains on the CPU: the bytes of --device cpu" {
    needs_tiny
    run grpo-update --model "$TINY" --in "$(B)" --out probe --device cuda
    [ "$status" -eq 0 ] && skip "this machine has a CUDA device"
    grpo-update --model "$TINY" --in "$(B)" --out cpu --lr 1e-3 --device cpu 2> /dev/null
    grpo-update --model "$TINY" --in "$(B)" --out auto --lr 1e-3 --device auto 2> /dev/null
    cmp cpu/model.safetensors auto/model.safetensors
    cmp cpu/grpo/optimizer.safetensors auto/grpo/optimizer.safetensors
}

# step_vs_cpu MODEL TOL: an SGD step of MODEL, full and LoRA, on the GPU
# against the CPU's: the update (LoRA: the adapter) within TOL, the metrics
# within 5e-2
step_vs_cpu() {
    for lora in "" "--lora-r 4"; do
        rm -rf cpu gpu cpu.jsonl gpu.jsonl
        flags=(--model "$1" --in "$(B)" --optimizer sgd --lr 1e-2 --beta 0.04 --max-grad-norm 0 $lora)
        grpo-update "${flags[@]}" --device cpu --out cpu --metrics cpu.jsonl 2> /dev/null
        grpo-update "${flags[@]}" --device cuda --out gpu --metrics gpu.jsonl 2> /dev/null
        if [ -z "$lora" ]; then
            ref close-delta "$1/model.safetensors" gpu/model.safetensors cpu/model.safetensors "$2"
        else # B starts at zero: the update is the tensor
            ref close gpu/adapter_model.safetensors cpu/adapter_model.safetensors "$2"
        fi
        close_metrics gpu.jsonl cpu.jsonl 5e-2
    done
}

@test "GPU: an SGD step of each architecture, full and LoRA, is the CPU's step within bf16 tolerance" {
    needs_gpu
    for m in "$TINY" "$BATS_FILE_TMPDIR/tiny_qwen2" "$BATS_FILE_TMPDIR/tiny_qwen3"; do step_vs_cpu "$m" 5e-2; done
}

@test "GPU: every loss kind's step is the CPU's within bf16 tolerance" {
    needs_gpu
    for loss in grpo bnpo dr_grpo dapo cispo sapo; do
        rm -rf cpu gpu cpu.jsonl gpu.jsonl
        flags=(--model "$TINY" --in "$(B)" --optimizer sgd --lr 1e-2 --loss "$loss" --max-grad-norm 0)
        grpo-update "${flags[@]}" --device cpu --out cpu --metrics cpu.jsonl 2> /dev/null
        grpo-update "${flags[@]}" --device cuda --out gpu --metrics gpu.jsonl 2> /dev/null
        ref close-delta "$TINY/model.safetensors" gpu/model.safetensors cpu/model.safetensors 5e-2
        close_metrics gpu.jsonl cpu.jsonl 5e-2
    done
}

@test "GPU: the same batch and seed give the same checkpoint bytes twice (AdamW, clipping; LoRA with dropout)" {
    needs_gpu
    for extra in "--lr 1e-3 --max-grad-norm 0.1 --iterations 2" "--lora-r 4 --lora-dropout 0.1 --lr 1e-3 --seed 3"; do
        rm -rf a b
        grpo-update --model "$TINY" --in "$(B)" --out a --device cuda $extra 2> /dev/null
        grpo-update --model "$TINY" --in "$(B)" --out b --device cuda $extra 2> /dev/null
        for f in a/*.safetensors a/grpo/optimizer.safetensors; do cmp "$f" "b/${f#a/}"; done
    done
}

@test "GPU: a checkpoint trained on the GPU continues on the CPU and the other way round" {
    needs_gpu
    needs_bf16 # the GPU's checkpoint records --compute bf16
    grpo-update --model "$TINY" --in "$(B)" --out g1 --device cuda --lr 1e-3 2> /dev/null
    grpo-update --model g1 --in "$(B)" --out c2 --device cpu --lr 1e-3 2> /dev/null
    grep -q '"step":2' c2/grpo/state.json
    grpo-update --model "$TINY" --in "$(B)" --out c1 --device cpu --compute bf16 --lr 1e-3 2> /dev/null
    grpo-update --model c1 --in "$(B)" --out g2 --device cuda --lr 1e-3 2> /dev/null
    grep -q '"step":2' g2/grpo/state.json
    # two steps each way land close to each other (AdamW's first steps move by about lr)
    ref close c2/model.safetensors g2/model.safetensors 5e-2
}

@test "GPU: a mixture of experts' SGD step (qwen3_moe; gpt_oss: sinks, window, YaRN, biases), full and LoRA, is the CPU's within bf16 tolerance; --router-aux-coef is 64" {
    needs_gpu
    # 2 of 2 experts: no top-k choice for bf16 rounding to flip. qwen3_moe
    # holds the dense tolerance; gpt_oss 0.25: the CPU's --compute bf16
    # against its f32 (the GPU's arithmetic on the CPU) moves its sinks'
    # update (a sum that cancels, 3.6e-7 at this lr) by 0.17 of it and its
    # experts' biases' by 0.088 (qwen3_moe's worst 0.025, LoRA 0.014 and
    # gpt_oss's 0.042)
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" make-tiny qwen3_moe moe2 --norm-topk --experts 2 --top-k 2
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" make-tiny gpt_oss oss2 --experts 2 --top-k 2
    for m in moe2 oss2; do "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_tiny_tokenizer.py" "$m" > /dev/null; done
    step_vs_cpu moe2 5e-2
    step_vs_cpu oss2 0.25
    # the router's load-balancing loss has no CUDA op: refused before the model loads
    run -64 grpo-update --model moe2 --in "$(B)" --out aux --device cuda --router-aux-coef 0.01
    assert_one_line_error grpo-update "--router-aux-coef 0.01: the router's load-balancing loss runs on the CPU only"
    [ ! -e aux ]
}

# LoRA over a frozen packed base: the device's products read its values
# rounded to bf16 (q8's and q4k's; bf16's are exact). Emulated on the CPU
# (tests/unit/frozen_bf16.h's products in this very step) the adapter moved
# by 0.0105 (q4k), 0.0171 (q8) and 0.0087 (bf16) of its largest value, the
# loss and grad_norm by at most 0.3%: the dense tolerance, 5e-2, holds.
@test "GPU: LoRA over a frozen base packed as q4k, q8 or bf16 (--base-weights) is the CPU's step within bf16 tolerance" {
    needs_gpu
    for f in q4k q8 bf16; do
        rm -rf cpu gpu cpu.jsonl gpu.jsonl
        flags=(--model "$TINY" --in "$(B)" --optimizer sgd --lr 1e-2 --max-grad-norm 0 --lora-r 4 --base-weights $f)
        grpo-update "${flags[@]}" --device cpu --out cpu --metrics cpu.jsonl 2> /dev/null
        grpo-update "${flags[@]}" --device cuda --out gpu --metrics gpu.jsonl 2> /dev/null
        jq -e --arg f $f '.flags.base_weights == $f' gpu/grpo/state.json
        ref close gpu/adapter_model.safetensors cpu/adapter_model.safetensors 5e-2
        close_metrics gpu.jsonl cpu.jsonl 5e-2
    done
}

@test "GPU: --compute f32 is refused on the device: 64, nothing written" {
    needs_gpu
    run -64 grpo-update --model "$TINY" --in "$(B)" --out c --device cuda --compute f32
    assert_one_line_error grpo-update "--compute f32 on a device"
    [ ! -e c ]
}

# NCCL refuses two ranks on one GPU, so on a machine of one GPU two ranks
# must fail cleanly (every rank's one line naming NCCL, nothing written);
# with a GPU per rank they must train the one-process step.
@test "GPU: mpirun -np 2 --device cuda: the one-process step with a GPU per rank, else NCCL's refusal and nothing written" {
    needs_gpu
    command -v mpirun > /dev/null || skip "no mpirun"
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
    flags=(--model "$TINY" --in "$(B)" --device cuda --optimizer sgd --lr 1e-2 --threads 1)
    run timeout 300 mpirun --oversubscribe --bind-to none -np 2 grpo-update "${flags[@]}" --out two
    echo "$output"
    if [ "$(nvidia-smi -L 2> /dev/null | wc -l)" -ge 2 ]; then
        [ "$status" -eq 0 ]
        grpo-update "${flags[@]}" --out one 2> /dev/null
        ref close-delta "$TINY/model.safetensors" two/model.safetensors one/model.safetensors 1e-3
    else
        [ "$status" -ne 0 ]
        [ "$status" -ne 124 ] # refused, not hung
        [[ "$output" == *nccl* || "$output" == *NCCL* ]]
        [ ! -e two ]
    fi
}
