#!/usr/bin/env bats
# grpo-rollout --weights f32|bf16|q8 (and grpo-reward --rm-weights): the
# matrices packed once in float32, bf16 or 8-bit blocks. Log-probabilities
# against the float64 reference of tests/ref/model_ref.py at each format's
# tolerance (and not at float32's, which shows the format was used); records
# byte-identical across --batch, --threads and --shard in every format; a
# Q8_0 GGUF's blocks taken straight into q8's give the records its weights
# widened to float32 give (a file mixing F16 matrices in too). --kv-cache
# f32|bf16 chooses the cache apart from the weights.
# needs: venv models
load helpers

setup_file() {
    export TINY="$BATS_FILE_TMPDIR/tiny"
    export G="$GRPO_ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf"
    make_tiny_llama "$TINY"
    printf '%s\n' '{"id":"p1","messages":[{"role":"user","content":"add 2 and 3"}]}' \
        '{"id":"p2","messages":[{"role":"user","content":"hello"}]}' \
        '{"id":"p3","prompt_tokens":[1,4,5,6,7,2,4,1]}' > "$BATS_FILE_TMPDIR/prompts.jsonl"
}

needs_tiny() { [ -d "$TINY" ] || skip "no test venv (make venv)"; }
P() { echo "$BATS_FILE_TMPDIR/prompts.jsonl"; }

# check_lp MODEL FILE TOL MEAN_TOL: every logprob within TOL of the float64
# reference, and their mean |difference| within MEAN_TOL
check_lp() {
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/check_rollout.py" "$1" "$2" "$3" "$4"
    echo "$output" | grep -v '^ok' || true
    [ "$status" -eq 0 ]
}

@test "--weights: f32 is the float32 kernel's bytes; a bad value is 64; \$GRPO_WEIGHTS is the default" {
    needs_tiny
    grpo-rollout --model "$TINY" -k 2 --max-new-tokens 8 --in "$(P)" --out default.jsonl
    grpo-rollout --model "$TINY" -k 2 --max-new-tokens 8 --weights f32 --in "$(P)" --out f32.jsonl
    cmp default.jsonl f32.jsonl # helpers.bash sets GRPO_WEIGHTS=f32
    GRPO_WEIGHTS=q8 grpo-rollout --model "$TINY" -k 2 --max-new-tokens 8 --in "$(P)" --out env.jsonl
    grpo-rollout --model "$TINY" -k 2 --max-new-tokens 8 --weights q8 --in "$(P)" --out q8.jsonl
    cmp env.jsonl q8.jsonl
    ! cmp -s f32.jsonl q8.jsonl || false
    run -64 grpo-rollout --model "$TINY" --weights f16 --in "$(P)"
    assert_one_line_error grpo-rollout "--weights"
    run -64 env GRPO_WEIGHTS=int4 grpo-rollout --model "$TINY" --in "$(P)"
    assert_one_line_error grpo-rollout "--weights: expected one of auto[|]f32[|]bf16[|]q8[|]q4k[|]mxfp4, got 'int4'"
}

@test "--weights auto: bf16 where the CPU has AVX512-BF16, else f32, as --progress says" {
    needs_tiny
    run -0 grpo-rollout --model "$TINY" -k 1 --max-new-tokens 2 --weights auto --progress --in "$(P)" --out a.jsonl
    if grep -qw avx512_bf16 /proc/cpuinfo; then
        [[ "$output" == *"weights bf16 (AVX512-BF16 kernel)"* ]]
        grpo-rollout --model "$TINY" -k 1 --max-new-tokens 2 --weights bf16 --in "$(P)" --out b.jsonl
    else
        [[ "$output" == *"weights f32"* ]]
        grpo-rollout --model "$TINY" -k 1 --max-new-tokens 2 --weights f32 --in "$(P)" --out b.jsonl
    fi
    cmp a.jsonl b.jsonl
    run -0 grpo-rollout --model "$TINY" -k 1 --max-new-tokens 2 --weights q8 --progress --in "$(P)" --out /dev/null
    [[ "$output" == *"weights q8 ("* ]]
    # the KV cache goes with the weights: bf16 with bf16 or q8 where AVX-512 or AVX2 reads it, else f32
    if { grep -qw avx512bw /proc/cpuinfo && grep -qw avx512vl /proc/cpuinfo; } ||
        { grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; }; then
        [[ "$output" == *"MiB (bf16, "* ]]
    else
        [[ "$output" == *"MiB (f32, "* ]]
    fi
    run -0 grpo-rollout --model "$TINY" -k 1 --max-new-tokens 2 --weights f32 --progress --in "$(P)" --out /dev/null
    [[ "$output" == *"MiB (f32, "* ]]
}

@test "--weights bf16: log-probabilities of the bf16 weights, within bf16's tolerance of float64, not float32's" {
    needs_tiny
    grpo-rollout --model "$TINY" -k 2 --max-new-tokens 16 --temperature 0.7 --weights bf16 --in "$(P)" --out r.jsonl
    # x and W rounded to 8 significant bits (relative 2^-9 each) through two
    # layers of width 64: measured max 0.023, mean 0.0047 over 96
    # tokens; the bounds are about 4x those
    check_lp "$TINY" r.jsonl 0.1 0.02
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/check_rollout.py" "$TINY" r.jsonl 1e-4
    [ "$status" -ne 0 ] # float32's tolerance does not hold: the weights were bf16
}

@test "--weights q8: log-probabilities of the 8-bit weights, within q8's tolerance of float64, not float32's" {
    needs_tiny
    grpo-rollout --model "$TINY" -k 2 --max-new-tokens 16 --temperature 0.7 --weights q8 --in "$(P)" --out r.jsonl
    # W and x quantized per 32-block to 8 bits (half a step of max/127 each):
    # measured max 0.063, mean 0.017 over 96 tokens; bounds about 4x
    check_lp "$TINY" r.jsonl 0.25 0.07
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/check_rollout.py" "$TINY" r.jsonl 1e-4
    [ "$status" -ne 0 ]
}

@test "--weights q8 of a Q8_0 GGUF: its blocks straight into q8's, as --progress says; records as from the same weights widened" {
    needs_tiny
    grpo-export --model "$TINY" --format gguf --dtype q8_0 --out q8_0.gguf
    grpo-export --model q8_0.gguf --format gguf --dtype f32 --out f32.gguf # the Q8_0 values, exactly
    args=(--in "$(P)" -k 2 --max-new-tokens 12 --temperature 1 --seed 3 --policy p --weights q8 --progress)
    # llama: Q and K rows permuted in the file; the LM head its own tensor
    run -0 grpo-rollout --model q8_0.gguf "${args[@]}" --out direct.jsonl
    [[ "$output" == *"weights q8 ("*"; 15 of 15 matrices from the file's Q8_0 blocks)"* ]]
    run -0 grpo-rollout --model f32.gguf "${args[@]}" --out widened.jsonl
    [[ "$output" == *"weights q8 ("* && "$output" != *"matrices from the file"* ]]
    cmp direct.jsonl widened.jsonl
    # a mixed file: F16 matrices (a permuted K among them, and the head) widen as before
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/mix_gguf.py" q8_0.gguf mixed.gguf blk.0.attn_k.weight blk.1.ffn_up.weight \
        output.weight
    run -0 grpo-rollout --model mixed.gguf "${args[@]}" --out mixed.jsonl
    [[ "$output" == *"; 12 of 15 matrices from the file's Q8_0 blocks)"* ]]
    grpo-export --model mixed.gguf --format gguf --dtype f32 --out mixed-f32.gguf
    grpo-rollout --model mixed-f32.gguf "${args[@]}" --out mixed-widened.jsonl
    cmp mixed.jsonl mixed-widened.jsonl
    ! cmp -s mixed.jsonl direct.jsonl || false # F16's rounding of those matrices shows
    # other formats read the floats as before
    run -0 grpo-rollout --model q8_0.gguf "${args[@]}" --weights bf16 --out /dev/null
    [[ "$output" == *"weights bf16 ("* && "$output" != *"matrices from the file"* ]]
}

@test "--weights bf16 and q8: --batch, --threads and --shard change no byte of the records" {
    needs_tiny
    for w in bf16 q8; do
        args=(--model "$TINY" --in "$(P)" -k 3 --max-new-tokens 12 --temperature 1 --seed 5 --weights "$w")
        grpo-rollout "${args[@]}" --batch 3 --threads 1 --out "a-$w.jsonl"
        grpo-rollout "${args[@]}" --batch 9 --threads 2 --out "b-$w.jsonl"
        cmp "a-$w.jsonl" "b-$w.jsonl"
        grpo-rollout "${args[@]}" --shard 1/2 --out "s-$w.jsonl"
        [ -s "s-$w.jsonl" ]
        cmp "s-$w.jsonl" <(grep -F -f <(jq -r .id "s-$w.jsonl" | sort -u) "a-$w.jsonl")
    done
}

@test "--kv-cache: f32 or bf16 whatever the weights, as --progress says; auto is the default; a bad value is 64" {
    needs_tiny
    args=(--model "$TINY" --in "$(P)" -k 2 --max-new-tokens 12 --temperature 0.7 --seed 3 --progress)
    run -0 grpo-rollout "${args[@]}" --weights f32 --kv-cache bf16 --out kb.jsonl
    [[ "$output" == *"MiB (bf16, "* ]]
    run -0 grpo-rollout "${args[@]}" --weights bf16 --kv-cache f32 --out /dev/null
    [[ "$output" == *"MiB (f32, "* ]]
    grpo-rollout "${args[@]}" --weights f32 --out default.jsonl 2> /dev/null
    grpo-rollout "${args[@]}" --weights f32 --kv-cache auto --out auto.jsonl 2> /dev/null
    grpo-rollout "${args[@]}" --weights f32 --kv-cache f32 --out kf.jsonl 2> /dev/null
    cmp default.jsonl auto.jsonl
    cmp default.jsonl kf.jsonl # auto with f32 weights is an f32 cache
    ! cmp -s kf.jsonl kb.jsonl || false
    run -64 grpo-rollout --model "$TINY" --kv-cache f16 --in "$(P)"
    assert_one_line_error grpo-rollout "--kv-cache"
}

@test "--kv-cache bf16 with f32 weights: log-probabilities within bf16's tolerance of float64, not float32's; --batch and --threads change no byte" {
    needs_tiny
    args=(--model "$TINY" --in "$(P)" -k 3 --max-new-tokens 16 --temperature 0.7 --seed 5 --weights f32 --kv-cache bf16)
    grpo-rollout "${args[@]}" --batch 3 --threads 1 --out a.jsonl
    grpo-rollout "${args[@]}" --batch 9 --threads 2 --out b.jsonl
    cmp a.jsonl b.jsonl
    # only keys and values rounded: the bounds of bf16 weights hold with room
    check_lp "$TINY" a.jsonl 0.1 0.02
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/check_rollout.py" "$TINY" a.jsonl 1e-4
    [ "$status" -ne 0 ] # float32's tolerance does not hold: the cache was bf16
}

@test "SmolLM2 with bf16 and q8 weights: log-probabilities within the stated tolerance of float64" {
    needs_tiny
    [ -f "$G" ] || skip "no model (make models)"
    printf '%s\n' '{"id":"q","messages":[{"role":"user","content":"What is 2+3?"}]}' \
        '{"id":"r","messages":[{"role":"user","content":"Name a colour and say why you like it."}]}' > q.jsonl
    for w in bf16 q8; do
        grpo-rollout --model "$G" -k 2 --max-new-tokens 16 --temperature 0.8 --weights "$w" --in q.jsonl --out "$w.jsonl"
    done
    # docs/weights.md: over 175 tokens bf16 moved
    # a log-probability by 0.015 on average and 0.10 at most, q8 by 0.074 and
    # 0.96 (it quantizes the activations too); the mean bounds are about 3x
    # those, the max ones 3x and 2x (one token in a hundred moves that far)
    check_lp "$G" bf16.jsonl 0.3 0.05
    check_lp "$G" q8.jsonl 2 0.2
}

@test "--rm-weights: the reward model in bf16 and q8 scores near float32; a bad value is 64" {
    needs_tiny
    rm_dir="$T/rm"
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/rm_ref.py" make llama "$rm_dir" --label-key id2label --seed 11
    printf '%s\n' '{"id":"a","messages":[{"role":"user","content":"hi"}],"completion":"hello there"}' \
        '{"id":"b","messages":[{"role":"user","content":"2+2"}],"completion":"4"}' > recs.jsonl
    for w in f32 bf16 q8; do
        grpo-reward --fn rm --rm-model "$rm_dir" --rm-weights "$w" --in recs.jsonl --out "$w.jsonl"
    done
    # measured: bf16 0.007 and q8 0.015 from float32's score at most; bound 0.06
    paste <(jq .reward f32.jsonl) <(jq .reward bf16.jsonl) <(jq .reward q8.jsonl) |
        awk '{ d1 = $1 - $2; d2 = $1 - $3; if (d1 < 0) d1 = -d1; if (d2 < 0) d2 = -d2;
               if (d1 > 0.06 || d2 > 0.06 || (d1 == 0 && d2 == 0)) { print "far or equal:", $0; exit 1 } }'
    run -64 grpo-reward --fn rm --rm-model "$rm_dir" --rm-weights f16 --in recs.jsonl
    assert_one_line_error grpo-reward "--rm-weights"
}

@test "records name their sampler: engine, device, weights and KV cache as used" {
    needs_tiny
    args=(--model "$TINY" --in "$(P)" -k 1 --max-new-tokens 4 --seed 3)
    grpo-rollout "${args[@]}" --weights f32 --out f.jsonl
    grpo-rollout "${args[@]}" --weights bf16 --kv-cache f32 --out b.jsonl
    grpo-rollout "${args[@]}" --weights q8 --kv-cache bf16 --out q.jsonl
    # the fields come last, after policy, on every record; the tiny model is no checkpoint: step 0
    [ "$(jq -c '[keys_unsorted[-3:]]' f.jsonl | sort -u)" = '[["policy","policy_step","sampler"]]' ]
    [ "$(jq -c .policy_step f.jsonl | sort -u)" = 0 ]
    [ "$(jq -c .sampler f.jsonl | sort -u)" = '{"engine":"grpo","device":"cpu","weights":"f32","kv_cache":"f32"}' ]
    [ "$(jq -c .sampler b.jsonl | sort -u)" = '{"engine":"grpo","device":"cpu","weights":"bf16","kv_cache":"f32"}' ]
    [ "$(jq -c .sampler q.jsonl | sort -u)" = '{"engine":"grpo","device":"cpu","weights":"q8","kv_cache":"bf16"}' ]
}

@test "records name the optimizer step of the checkpoint that sampled them (policy_step); a bad state.json is 65" {
    needs_tiny
    cp -r "$TINY" ck
    mkdir ck/grpo
    echo '{"step":7}' > ck/grpo/state.json
    grpo-rollout --model ck --in "$(P)" -k 1 --max-new-tokens 2 --out r.jsonl
    [ "$(jq -c .policy_step r.jsonl | sort -u)" = 7 ]
    echo '{"step":-1}' > ck/grpo/state.json
    run -65 grpo-rollout --model ck --in "$(P)" -k 1 --max-new-tokens 2 --out r2.jsonl
    assert_one_line_error grpo-rollout 'ck/grpo/state.json: field "step": expected an integer >= 0'
    [ ! -e r2.jsonl ]
}
