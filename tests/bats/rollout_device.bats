#!/usr/bin/env bats
# grpo-rollout --device: the choice of CPU or GPU, its errors, and (on a
# machine with an NVIDIA GPU and a CUDA build) the GPU's records against
# the CPU's, mixtures of experts and gpt-oss's attention among them.
# Without a GPU the GPU tests skip visibly (the device path's plumbing is
# checked on the CPU by tests/unit/test_fake_device.c).
# needs: venv
load helpers

setup_file() {
    export TINY="$BATS_FILE_TMPDIR/tiny"
    [ -x "$GRPO_PY" ] || return 0
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" make-tiny llama "$TINY"
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_tiny_tokenizer.py" "$TINY"
    for i in $(seq 1 12); do
        printf '{"id":"p%d","prompt_tokens":[1,%d,%d,%d,2]}\n' "$i" $((i + 3)) $((i * 5 % 90 + 3)) $((i * 11 % 90 + 3))
    done > "$BATS_FILE_TMPDIR/prompts.jsonl"
}

needs_tiny() { [ -d "$TINY" ] || skip "no test venv (make venv)"; }

P() { echo "$BATS_FILE_TMPDIR/prompts.jsonl"; }

# Skips unless --device cuda can run here (a CUDA build and a device).
needs_gpu() {
    run grpo-rollout --model "$TINY" --device cuda -k 1 --max-new-tokens 1 --in "$(P)" --out /dev/null
    [ "$status" -ne 69 ] || skip "no CUDA device ($output)"
    [ "$status" -eq 0 ]
}

@test "--device cpu is the CPU path; auto (the default without GRPO_DEVICE) without a GPU is the same bytes" {
    needs_tiny
    grpo-rollout --model "$TINY" -k 3 --max-new-tokens 10 --device cpu --in "$(P)" --out cpu.jsonl
    [ "$(wc -l < cpu.jsonl)" -eq 36 ]
    run grpo-rollout --model "$TINY" --device cuda -k 1 --max-new-tokens 1 --in "$(P)" --out /dev/null
    if [ "$status" -eq 69 ]; then # no GPU here: auto must pick the CPU
        grpo-rollout --model "$TINY" -k 3 --max-new-tokens 10 --device auto --in "$(P)" --out auto.jsonl
        cmp cpu.jsonl auto.jsonl
        GRPO_DEVICE= grpo-rollout --model "$TINY" -k 3 --max-new-tokens 10 --in "$(P)" --out default.jsonl
        cmp cpu.jsonl default.jsonl
    fi
}

@test "--device cuda without a GPU or a CUDA build: exit 69 and one line; a bad value: 64" {
    needs_tiny
    run -64 grpo-rollout --model "$TINY" --device gpu --in "$(P)"
    assert_one_line_error grpo-rollout "--device"
    run grpo-rollout --model "$TINY" --device cuda -k 1 --max-new-tokens 1 --in "$(P)" --out /dev/null
    [ "$status" -eq 0 ] && skip "this machine has a CUDA device"
    [ "$status" -eq 69 ]
    assert_one_line_error grpo-rollout "--device cuda: (this build has no CUDA support \(make CUDA=1\)|no CUDA device)"
}

# gpu_vs_cpu T B1 B2: at temperature T, the GPU's records with --batch B1
# and B2 are the same bytes and agree with the CPU's (compare_rollouts.py);
# the model $MODEL (default the tiny llama), $EXTRA flags added.
gpu_vs_cpu() {
    flags=(--model "${MODEL:-$TINY}" -k 4 --max-new-tokens 24 --temperature "$1" --seed 3 --in "$(P)"
        ${KV:+--kv-cache "$KV"} ${EXTRA:-})
    grpo-rollout "${flags[@]}" --device cpu --out "cpu_$1.jsonl"
    grpo-rollout "${flags[@]}" --device cuda --batch "$2" --out "gpu_$1_a.jsonl"
    grpo-rollout "${flags[@]}" --device cuda --batch "$3" --out "gpu_$1_b.jsonl"
    cmp "gpu_$1_a.jsonl" "gpu_$1_b.jsonl"
    [ "$(jq -c .sampler "gpu_$1_a.jsonl" | sort -u)" = "{\"engine\":\"grpo\",\"device\":\"cuda\",\"weights\":\"bf16\",\"kv_cache\":\"${KV:-bf16}\"}" ]
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/compare_rollouts.py" "gpu_$1_a.jsonl" "cpu_$1.jsonl" 0.05 0.5
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "GPU: records in the CPU's format, log-probs within bf16 tolerance, the same bytes whatever --batch" {
    needs_tiny
    needs_gpu
    # greedy: a token differs from the CPU's only where two logits are within bf16 rounding
    KV=f32 gpu_vs_cpu 0 4 32
    # sampling at T = 1 draws the same numbers on both (on the device: no truncation)
    KV=f32 gpu_vs_cpu 1 8 48
}

@test "GPU: --kv-cache bf16 (auto's choice on the device): records within bf16 tolerance of the CPU's, the same bytes whatever --batch" {
    needs_tiny
    needs_gpu
    run -0 grpo-rollout --model "$TINY" -k 2 --max-new-tokens 4 --device cuda --kv-cache bf16 --progress --in "$(P)" \
        --out /dev/null
    [[ "$output" == *"MiB (bf16, "* ]]
    run -0 grpo-rollout --model "$TINY" -k 2 --max-new-tokens 4 --device cuda --progress --in "$(P)" --out /dev/null
    [[ "$output" == *"MiB (bf16, "* ]] # auto on a device
    KV=bf16 gpu_vs_cpu 0 4 32
    KV=bf16 gpu_vs_cpu 1 8 48
}

# moe_fixtures: in the test's folder, qwen3_moe and gpt_oss (its experts
# MXFP4) of 2 experts each, every token taking both (moe2, oss2), and of 8
# experts, top 2 (moe8, oss8)
moe_fixtures() {
    local two=num_local_experts=2,num_experts_per_tok=2,experts_per_token=2
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" make-tiny qwen3_moe moe2 --norm-topk --experts 2 --top-k 2
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" make-tiny qwen3_moe moe8 --norm-topk
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_oss_mxfp4.py" oss2 --shape "$two"
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_oss_mxfp4.py" oss8
    for m in moe2 moe8 oss2 oss8; do "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_tiny_tokenizer.py" "$m"; done
}

@test "GPU: mixtures of experts whose tokens take every expert (qwen3_moe; gpt_oss with MXFP4 experts, sinks, window, YaRN): records within bf16 tolerance of the CPU's, the same bytes whatever --batch" {
    needs_tiny
    needs_gpu
    moe_fixtures > /dev/null
    # 2 of 2 experts: no top-k choice for bf16 rounding to flip, so the dense
    # tolerance holds (the CPU's own bf16 weights against its f32 on these:
    # log-probs within 0.014 and 0.019 greedy, 0.017 and 0.029 at T = 1).
    # The routing record is left out: two experts' order may swap at a tie.
    # --weights mxfp4: gpt_oss's experts stay the file's blocks (exact in
    # float32 on the CPU; expanded to bf16, exactly, on the device).
    for m in moe2 oss2; do
        mx=$([ "$m" = oss2 ] && echo "--weights mxfp4")
        MODEL=$PWD/$m EXTRA="--routing-record off $mx" KV=f32 gpu_vs_cpu 0 4 32
        MODEL=$PWD/$m EXTRA="--routing-record off $mx" KV=f32 gpu_vs_cpu 1 8 48
    done
}

@test "GPU: mixtures of 8 experts, top 2 (qwen3_moe; gpt_oss with MXFP4 experts): the routing recorded, records near the CPU's" {
    needs_tiny
    needs_gpu
    moe_fixtures > /dev/null
    for m in moe8 oss8; do
        flags=(--model "$m" -k 4 --max-new-tokens 24 --temperature 0 --seed 3 --in "$(P)" --kv-cache f32
            $([ "$m" = oss8 ] && echo "--weights mxfp4"))
        grpo-rollout "${flags[@]}" --device cpu --out "cpu_$m.jsonl"
        grpo-rollout "${flags[@]}" --device cuda --out "gpu_$m.jsonl"
        # a routing per record of the CPU's shape (layers, k, experts)
        [ "$(jq -c '.routing | [.layers, .k, .experts]' "gpu_$m.jsonl" | sort -u)" = \
            "$(jq -c '.routing | [.layers, .k, .experts]' "cpu_$m.jsonl" | sort -u)" ]
        grpo-rollout "${flags[@]}" --device cpu --routing-record off --out "cpu_$m.off.jsonl"
        grpo-rollout "${flags[@]}" --device cuda --routing-record off --out "gpu_$m.off.jsonl"
        # where a token's k-th and (k+1)-th experts are within bf16 rounding
        # it goes to the other expert, and its log-probs move by more than
        # the dense tolerance: the CPU's own bf16 weights against its f32 on
        # oss8 differ by 0.31 on shared prefixes, 0.84 of the tokens shared
        run "$GRPO_PY" "$GRPO_ROOT/tests/ref/compare_rollouts.py" "gpu_$m.off.jsonl" "cpu_$m.off.jsonl" 1.0 0.5
        echo "$output"
        [ "$status" -eq 0 ]
    done
}

@test "GPU: SmolLM2-shaped random weights: greedy tokens the CPU's where the margin allows, log-probs within 0.1" {
    needs_tiny
    needs_gpu
    local shapes="$BATS_FILE_TMPDIR/shapes"
    "$GRPO_PY" "$GRPO_ROOT/bench/gpu_models.py" "$shapes" smollm2-135m
    for i in 1 2 3 4; do
        printf '{"id":"s%d","prompt_tokens":[%s]}\n' "$i" "$(seq 1 32 | awk -v i="$i" '{ printf "%s%d", (NR > 1 ? "," : ""), 3 + (NR * 7 + i * 13) % 94 }')"
    done > smol.jsonl
    flags=(--model "$shapes/smollm2-135m" -k 1 --max-new-tokens 16 --temperature 0 --in smol.jsonl)
    grpo-rollout "${flags[@]}" --device cpu --weights f32 --out cpu.jsonl
    grpo-rollout "${flags[@]}" --device cuda --out gpu.jsonl
    # random weights give near-uniform rows (log-probs near -6.7 of
    # ln 49152 = -10.8), so near-ties are many: the CPU's own bf16 weights
    # against its f32 share 41 of these 64 tokens, part twice at near-ties
    # (log-probs within 0.006) and agree within 0.029 before
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/compare_rollouts.py" gpu.jsonl cpu.jsonl 0.1 0.25 greedy
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "GPU: --progress names the device" {
    needs_tiny
    needs_gpu
    grpo-rollout --model "$TINY" -k 2 --max-new-tokens 4 --device cuda --progress --in "$(P)" --out /dev/null 2> err.txt
    grep -q 'device cuda (' err.txt
}
