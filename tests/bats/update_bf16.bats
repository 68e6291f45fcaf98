#!/usr/bin/env bats
# grpo-update --compute f32|bf16|auto: bf16 matrix products with
# float32 sums, weights, gradients and AdamW state. The flag's values, the
# refusal on a CPU without AVX-512 BF16 (69), the same bytes run to run and
# for any --threads, the flag in state.json and its resume rule, auto. Gradients against
# PyTorch: train_grad.bats; the kernel: tests/unit/test_gemm_bf16.c.
# needs: venv
load helpers

setup_file() { update_fixture; }

B() { echo "$BATS_FILE_TMPDIR/batch.jsonl"; }

@test "--compute: listed by --help with exit 69; a bad value is 64 with one line" {
    run grpo-update --help
    [ "$status" -eq 0 ]
    printf '%s\n' "$output" | grep -q -- "  --compute C .*bf16"
    printf '%s\n' "$output" | grep -q "69 --compute bf16 on a CPU"
    printf '%s\n' "$output" | grep -q -- "auto: bf16 where the CPU has it, else f32"
    run grpo-update --model m --out x --compute fp16
    [ "$status" -eq 64 ]; assert_one_line_error grpo-update "--compute"
    printf '%s\n' "$output" | grep -q "f32|bf16|auto"
    run grpo-update --model m --out x --compute
    [ "$status" -eq 64 ]
}

@test "--compute bf16 on a CPU without AVX-512 BF16: 69 with one line, nothing written" {
    needs_tiny
    if grep -qw avx512_bf16 /proc/cpuinfo; then
        skip "this CPU has AVX-512 BF16 (test_train's trainer_compute_backend test covers the refusal)"
    fi
    run grpo-update --model "$TINY" --in "$(B)" --out c --compute bf16
    [ "$status" -eq 69 ]; assert_one_line_error grpo-update "no AVX-512 BF16"
    [ ! -e c ]
}

@test "--compute bf16: the same bytes twice, with --threads 1 and 2, full and LoRA; not f32's; state.json says bf16" {
    needs_tiny
    needs_bf16
    grpo-update --model "$TINY" --in "$(B)" --out a --lr 1e-3 --beta 0.1 --compute bf16 --metrics ma.jsonl 2> /dev/null
    grpo-update --model "$TINY" --in "$(B)" --out b --lr 1e-3 --beta 0.1 --compute bf16 --threads 1 2> /dev/null
    grpo-update --model "$TINY" --in "$(B)" --out c --lr 1e-3 --beta 0.1 --compute bf16 --threads 2 --recompute \
        2> /dev/null
    diff -r a b
    cmp a/model.safetensors c/model.safetensors
    cmp a/grpo/optimizer.safetensors c/grpo/optimizer.safetensors
    grpo-update --model "$TINY" --in "$(B)" --out f --lr 1e-3 --beta 0.1 2> /dev/null
    ! cmp -s a/model.safetensors f/model.safetensors || false
    jq -e '.flags.compute == "bf16"' a/grpo/state.json
    jq -e '.flags.compute == "f32"' f/grpo/state.json
    # the reference pass runs on bf16 too: at step 0 the policy is its own reference, exactly
    jq -e '.kl == 0' ma.jsonl
    grpo-update --model "$TINY" --in "$(B)" --out la --lr 1e-2 --lora-r 4 --compute bf16 --threads 1 2> /dev/null
    grpo-update --model "$TINY" --in "$(B)" --out lb --lr 1e-2 --lora-r 4 --compute bf16 --threads 2 2> /dev/null
    diff -r la lb
    jq -e '.flags.compute == "bf16" and .flags.lora_r == 4' la/grpo/state.json
}

@test "resume: the checkpoint's --compute continues; another one given is 64, nothing written" {
    needs_tiny
    # an f32 checkpoint (and one from before the flag: no flags.compute) refuses bf16 on any CPU
    grpo-update --model "$TINY" --in "$(B)" --out f1 --lr 1e-3 2> /dev/null
    run grpo-update --model f1 --in "$(B)" --out f2 --compute bf16
    [ "$status" -eq 64 ]; assert_one_line_error grpo-update "f1 was trained with --compute f32; leave --compute out"
    [ ! -e f2 ]
    jq -c 'del(.flags.compute)' f1/grpo/state.json > s && mv s f1/grpo/state.json
    run grpo-update --model f1 --in "$(B)" --out f2 --compute bf16
    [ "$status" -eq 64 ]
    jq -c '.flags.compute = "fp8"' f1/grpo/state.json > s && mv s f1/grpo/state.json
    run grpo-update --model f1 --in "$(B)" --out f2
    [ "$status" -eq 65 ]; assert_one_line_error grpo-update 'flags.compute'
    [ ! -e f2 ]
    needs_bf16
    grpo-update --model "$TINY" --in "$(B)" --out b1 --lr 1e-3 --compute bf16 2> /dev/null
    run grpo-update --model b1 --in "$(B)" --out b2 --compute f32
    [ "$status" -eq 64 ]; assert_one_line_error grpo-update "b1 was trained with --compute bf16"
    [ ! -e b2 ]
    # left out, bf16 continues (the KL reference, a second model here, runs on bf16 as well)
    cp -r b1 b1ref
    grpo-update --model b1 --in "$(B)" --out b2 --lr 1e-3 --beta 0.1 --ref b1ref --metrics m.jsonl 2> /dev/null
    grpo-update --model b1 --in "$(B)" --out b3 --lr 1e-3 --beta 0.1 --ref b1ref --compute bf16 2> /dev/null
    jq -e '.step == 2 and .flags.compute == "bf16"' b2/grpo/state.json
    cmp b2/model.safetensors b3/model.safetensors
    jq -e '.kl == 0' m.jsonl
}

@test "--compute auto: bf16 where the CPU has AVX-512 BF16, else f32, the bytes of that choice; a checkpoint continues with its own" {
    needs_tiny
    want=f32
    if grep -qw avx512_bf16 /proc/cpuinfo && grep -qw avx512bw /proc/cpuinfo; then want=bf16; fi
    grpo-update --model "$TINY" --in "$(B)" --out a --lr 1e-3 --beta 0.1 --compute auto 2> /dev/null
    jq -e --arg w "$want" '.flags.compute == $w' a/grpo/state.json
    grpo-update --model "$TINY" --in "$(B)" --out e --lr 1e-3 --beta 0.1 --compute "$want" 2> /dev/null
    cmp a/model.safetensors e/model.safetensors
    cmp a/grpo/optimizer.safetensors e/grpo/optimizer.safetensors
    # an f32 checkpoint continues as f32 under auto on any CPU (not refused as bf16 would be),
    # the same bytes as with --compute left out
    grpo-update --model "$TINY" --in "$(B)" --out f1 --lr 1e-3 --compute f32 2> /dev/null
    grpo-update --model f1 --in "$(B)" --out f2 --lr 1e-3 --compute auto 2> /dev/null
    grpo-update --model f1 --in "$(B)" --out f3 --lr 1e-3 2> /dev/null
    jq -e '.step == 2 and .flags.compute == "f32"' f2/grpo/state.json
    cmp f2/model.safetensors f3/model.safetensors
    needs_bf16
    # and a bf16 one as bf16
    grpo-update --model a --in "$(B)" --out a2 --lr 1e-3 --compute auto 2> /dev/null
    jq -e '.step == 2 and .flags.compute == "bf16"' a2/grpo/state.json
}
