#!/usr/bin/env bats
# grpo-update on a tiny random llama (tests/ref/model_ref.py) with a 97-token
# tokenizer: flags, failure modes, the checkpoint it writes, resuming,
# determinism, micro-batches, --recompute, LoRA, kill -9, and a learning run.
# needs: venv
load helpers

setup_file() { update_fixture; }

B() { echo "$BATS_FILE_TMPDIR/batch.jsonl"; }
ref() { "$GRPO_PY" "$GRPO_ROOT/tests/ref/update_ref.py" "$@"; }

@test "--help lists every flag with its default; --version" {
    run grpo-update --help
    [ "$status" -eq 0 ]
    for f in --model --out --in --ref --loss --importance-level --epsilon --epsilon-high --beta --iterations \
        --old-logp --is-correction --mask-truncated --temperature --max-new-tokens --optimizer --lr --betas --adam-eps \
        --weight-decay --lr-schedule --warmup-steps --total-steps --max-grad-norm --micro-batch --recompute \
        --lora-r --lora-alpha --lora-dropout --lora-targets --rslora --metrics --seed --threads --device \
        --group-sums --progress; do
        printf '%s\n' "$output" | grep -q -- "  $f " || { echo "missing $f"; false; }
    done
    run grpo-update --version
    [ "$status" -eq 0 ]
}

@test "usage errors exit 64 with one line" {
    run grpo-update --out x
    [ "$status" -eq 64 ]; assert_one_line_error grpo-update "--model is required"
    run grpo-update --model m
    [ "$status" -eq 64 ]; assert_one_line_error grpo-update "--out is required"
    run grpo-update --model m --out x --loss ppo
    [ "$status" -eq 64 ]; assert_one_line_error grpo-update "--loss"
    run grpo-update --model m --out x --lr-schedule cosine
    [ "$status" -eq 64 ]
    run grpo-update --model m --out x --betas 0.9
    [ "$status" -eq 64 ]; assert_one_line_error grpo-update "betas"
}

@test "ranges decided once: --adam-eps 0 and --epsilon 1 are 64 with one line, nothing written" {
    needs_tiny
    # AdamW divides by sqrt(v) + eps, v = 0 where a weight has no gradient: eps 0 is 0/0
    run grpo-update --model "$TINY" --in "$(B)" --out c --metrics m.jsonl --adam-eps 0
    [ "$status" -eq 64 ]; assert_one_line_error grpo-update "--adam-eps: 0 is out of range \(0, 1\]"
    # 1 - epsilon is the lower clip bound of the ratio: at 0 it could never bind
    run grpo-update --model "$TINY" --in "$(B)" --out c --metrics m.jsonl --epsilon 1
    [ "$status" -eq 64 ]; assert_one_line_error grpo-update "--epsilon: 1 is out of range \[0, 1\)"
    [ ! -e c ]
    [ ! -e m.jsonl ]
    no_temp_left .
    # just inside both ranges: a step
    grpo-update --model "$TINY" --in "$(B)" --out c --adam-eps 1e-30 --epsilon 0.99 2> /dev/null
    jq -e '.flags.adam_eps == 1e-30 and .flags.epsilon == 0.99' c/grpo/state.json
}

@test "bad LoRA targets, --ref with LoRA: 64 (--device: update_device.bats)" {
    needs_tiny
    run grpo-update --model "$TINY" --in "$(B)" --out c --lora-r 4 --lora-targets q,zz
    [ "$status" -eq 64 ]; assert_one_line_error grpo-update "zz"
    run grpo-update --model "$TINY" --in "$(B)" --out c --lora-r 4 --ref "$TINY"
    [ "$status" -eq 64 ]
    [ ! -e c ]
}

@test "an update in place with --beta > 0 would replace its own KL reference: 64, the checkpoint untouched" {
    needs_tiny
    cp -r "$TINY" m
    # step 0: the reference is --model itself
    run grpo-update --model m --in "$(B)" --out ./m/ --beta 0.04
    [ "$status" -eq 64 ]
    assert_one_line_error grpo-update "--out ./m/ is the KL reference of --beta 0.04"
    diff -r "$TINY" m
    # a later step: the reference the state names
    grpo-update --model m --in "$(B)" --out c1 --beta 0.04 2> /dev/null
    run grpo-update --model c1 --in "$(B)" --out m --beta 0.04
    [ "$status" -eq 64 ]
    diff -r "$TINY" m
    # in place is fine without the KL term, with an explicit other --ref, and with LoRA
    grpo-update --model c1 --in "$(B)" --out c1 --beta 0 2> /dev/null
    jq -e '.step == 2' c1/grpo/state.json
    grpo-update --model c1 --in "$(B)" --out c1 --beta 0.04 --ref "$TINY" 2> /dev/null
    grpo-update --model m --in "$(B)" --out a --lora-r 4 2> /dev/null
    grpo-update --model a --in "$(B)" --out a --beta 0.04 2> /dev/null
    jq -e '.step == 2' a/grpo/state.json
    no_temp_left .
}

@test "missing model or batch: 66, nothing written" {
    needs_tiny
    run grpo-update --model nope --in "$(B)" --out c
    [ "$status" -eq 66 ]; assert_one_line_error grpo-update "nope"
    run grpo-update --model "$TINY" --in nope.jsonl --out c
    [ "$status" -eq 66 ]; assert_one_line_error grpo-update "nope.jsonl"
    [ ! -e c ]
    no_temp_left .
}

@test "bad records: 65 naming file, line and field; nothing written" {
    needs_tiny
    head -n 2 "$(B)" > b.jsonl
    sed -n 3p "$(B)" | jq -c '.logprobs = .logprobs[1:]' >> b.jsonl
    run grpo-update --model "$TINY" --in b.jsonl --out c
    [ "$status" -eq 65 ]; assert_one_line_error grpo-update 'b.jsonl:3: field "logprobs"'
    head -n 1 "$(B)" | jq -c '.completion_tokens[0] = 97' > v.jsonl
    run grpo-update --model "$TINY" --in v.jsonl --out c
    [ "$status" -eq 65 ]; assert_one_line_error grpo-update 'v.jsonl:1: field "completion_tokens"'
    head -n 1 "$(B)" | jq -c 'del(.prompt_tokens)' > p.jsonl
    run grpo-update --model "$TINY" --in p.jsonl --out c
    [ "$status" -eq 65 ]; assert_one_line_error grpo-update 'p.jsonl:1: .*prompt_tokens'
    head -n 2 "$(B)" > t.jsonl
    sed -n 3p "$(B)" | jq -c '.temperature = 0.5' >> t.jsonl
    run grpo-update --model "$TINY" --in t.jsonl --out c
    [ "$status" -eq 65 ]; assert_one_line_error grpo-update 't.jsonl:3: field "temperature"'
    # id: a string in every record, as every stage requires
    local f
    for f in 'del(.id)' '.id = null' '.id = 7'; do
        head -n 1 "$(B)" > i.jsonl
        sed -n 2p "$(B)" | jq -c "$f" >> i.jsonl
        run grpo-update --model "$TINY" --in i.jsonl --out c
        [ "$status" -eq 65 ]
        assert_one_line_error grpo-update 'i.jsonl:2: field "id": expected a string'
    done
    [ ! -e c ]
    no_temp_left .
}

@test "--temperature other than the batch's is 65; all advantages null is 65" {
    needs_tiny
    run grpo-update --model "$TINY" --in "$(B)" --out c --temperature 0.7
    [ "$status" -eq 65 ]; assert_one_line_error grpo-update "sampled at temperature 1"
    jq -c '.advantage = null' "$(B)" > n.jsonl
    run grpo-update --model "$TINY" --in n.jsonl --out c
    [ "$status" -eq 65 ]; assert_one_line_error grpo-update "no record to train on"
    [ ! -e c ]
}

@test "full fine-tuning writes an HF checkpoint with optimizer and state; a second update resumes" {
    needs_tiny
    run grpo-update --model "$TINY" --in "$(B)" --out c1 --lr 1e-3
    [ "$status" -eq 0 ]
    for f in config.json model.safetensors tokenizer.json tokenizer_config.json generation_config.json \
        grpo/optimizer.safetensors grpo/state.json; do [ -s "c1/$f" ] || { echo "missing $f"; false; }; done
    jq -e '.step == 1 and .schedule.step == 1 and .rng.next_index == 1 and .parent == env.TINY
           and .flags.lr == 0.001 and .flags.loss == "grpo" and .flags.ref == env.TINY
           and (.batch_sha256 | test("^[0-9a-f]{64}$"))' c1/grpo/state.json
    [ "$(jq -r .batch_sha256 c1/grpo/state.json)" = "$(sha256sum "$(B)" | cut -c1-64)" ]
    "$GRPO_PY" - c1 <<'PY'
import sys
from safetensors.numpy import load_file
from safetensors import safe_open
d = sys.argv[1]
w = load_file(d + "/model.safetensors")
o = load_file(d + "/grpo/optimizer.safetensors")
assert "model.layers.0.self_attn.q_proj.weight" in w and w["model.embed_tokens.weight"].shape == (97, 64)
assert set(o) == {p + n for n in w for p in ("exp_avg.", "exp_avg_sq.")}, sorted(o)[:4]
for n in w:
    assert o["exp_avg." + n].shape == w[n].shape
with safe_open(d + "/grpo/optimizer.safetensors", "np") as f:
    assert f.metadata() == {"format": "grpo", "optimizer": "adamw"}
PY
    ref differ "$TINY/model.safetensors" c1/model.safetensors
    run grpo-update --model c1 --in "$(B)" --out c2 --lr 1e-3
    [ "$status" -eq 0 ]
    jq -e '.step == 2 and .rng.next_index == 2 and .flags.ref == env.TINY and .parent == "c1"' c2/grpo/state.json
    # the checkpoint is an HF directory the rollout loads
    echo '{"id":"a","prompt_tokens":[1,5,6]}' | grpo-rollout --model c2 -k 2 --max-new-tokens 3 > r.jsonl
    [ "$(wc -l < r.jsonl)" -eq 2 ]
}

@test "the same command writes the same bytes; --recompute changes nothing, --threads only float rounding" {
    needs_tiny
    grpo-update --model "$TINY" --in "$(B)" --out a --lr 1e-3 --beta 0.1
    grpo-update --model "$TINY" --in "$(B)" --out b --lr 1e-3 --beta 0.1
    diff -r a b
    grpo-update --model "$TINY" --in "$(B)" --out c --lr 1e-3 --beta 0.1 --recompute
    cmp a/model.safetensors c/model.safetensors
    cmp a/grpo/optimizer.safetensors c/grpo/optimizer.safetensors
    # OpenBLAS's sums follow its thread count on some CPUs (AMD Zen: 2e-5 of
    # the largest weight here); where they do not (Intel), the same bytes
    grpo-update --model "$TINY" --in "$(B)" --out d --lr 1e-3 --beta 0.1 --recompute --threads 1
    if ! cmp -s a/model.safetensors d/model.safetensors; then
        ref close a/model.safetensors d/model.safetensors 2e-4
        ref close a/grpo/optimizer.safetensors d/grpo/optimizer.safetensors 2e-4
    fi
}

@test "--micro-batch small and large give the same gradient to 1e-5" {
    needs_tiny
    grpo-update --model "$TINY" --in "$(B)" --out small --lr 1e-3 --micro-batch 20
    grpo-update --model "$TINY" --in "$(B)" --out large --lr 1e-3 --micro-batch 100000
    # AdamW's first moment after one step is 0.1 * gradient
    ref close small/grpo/optimizer.safetensors large/grpo/optimizer.safetensors 1e-5
}

@test "--group-sums: the same gradient; the same bytes for any --micro-batch of a group or more; cuda refused" {
    needs_tiny
    # the batch's groups are 4 records of at most 18 tokens: 72 tokens or fewer
    grpo-update --threads 1 --model "$TINY" --in "$(B)" --out plain --lr 1e-3
    grpo-update --threads 1 --model "$TINY" --in "$(B)" --out g72 --lr 1e-3 --group-sums --micro-batch 72
    grpo-update --threads 1 --model "$TINY" --in "$(B)" --out gbig --lr 1e-3 --group-sums --micro-batch 100000
    ref close plain/grpo/optimizer.safetensors gbig/grpo/optimizer.safetensors 1e-5
    cmp g72/model.safetensors gbig/model.safetensors
    cmp g72/grpo/optimizer.safetensors gbig/grpo/optimizer.safetensors
    jq -e '.flags.group_sums == true' gbig/grpo/state.json
    jq -e '.flags.group_sums == false' plain/grpo/state.json
    # micro-batches smaller than a group still sum the whole gradient
    grpo-update --threads 1 --model "$TINY" --in "$(B)" --out g20 --lr 1e-3 --group-sums --micro-batch 20
    ref close plain/grpo/optimizer.safetensors g20/grpo/optimizer.safetensors 1e-5
    run grpo-update --model "$TINY" --in "$(B)" --out c --group-sums --device cuda
    [ "$status" -eq 64 ]; assert_one_line_error grpo-update "--group-sums"
    [ ! -e c ]
}

@test "null advantages are skipped and counted; --mask-truncated leaves length completions out" {
    needs_tiny
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/update_ref.py" make-batch m.jsonl 16 97 --null-adv 3 --truncated 6
    run grpo-update --model "$TINY" --in m.jsonl --out c --mask-truncated
    [ "$status" -eq 0 ]
    printf '%s\n' "$output" | grep -q "10 completions (3 skipped without advantage, 3 masked)"
    run grpo-update --model "$TINY" --in m.jsonl --out d
    [ "$status" -eq 0 ]
    printf '%s\n' "$output" | grep -q "13 completions (3 skipped without advantage, 0 masked)"
}

@test "the stderr line names completion tokens and prompt + completion tokens (the metrics' tokens)" {
    needs_tiny
    grpo-update --model "$TINY" --in "$(B)" --out c --lr 1e-3 --metrics m.jsonl 2> err
    local comp all
    comp=$(jq -s '[.[].completion_tokens | length] | add' "$(B)")
    all=$(jq -s '[.[] | (.prompt_tokens | length) + (.completion_tokens | length)] | add' "$(B)")
    [ "$comp" -lt "$all" ]
    jq -e --argjson all "$all" '.tokens == $all' m.jsonl
    grep -q " $comp completion tokens trained on, $all tokens with the prompts (metrics \"tokens\")" err ||
        { cat err; false; }
}

@test "--progress: each phase on stderr (loading, log-prob passes, each iteration's tokens/s, saving); stdout clean" {
    needs_tiny
    grpo-update --model "$TINY" --in "$(B)" --out c --iterations 2 --old-logp recompute --progress > out 2> err
    [ ! -s out ]
    tr '\r' '\n' < err > lines
    for what in "loading $TINY" "reference log-probs .* tokens [0-9]*/s" "old log-probs .* tokens" \
        "step 1 (iteration 1/2) .* tokens [0-9]*/s" "step 2 (iteration 2/2) .* tokens [0-9]*/s" "saving c [0-9.]*s"; do
        grep -q "^grpo-update $what" lines || { echo "no '$what' in:"; cat lines; false; }
    done
    # the summary stays the last line, a line of its own
    tail -n 1 err | grep -q '^grpo-update: step 2: 16 completions'
    # without a terminal and without --progress: the summary line alone
    grpo-update --model "$TINY" --in "$(B)" --out c2 2> quiet.err
    [ "$(wc -l < quiet.err)" -eq 1 ]
    grep -q '^grpo-update: step 1: ' quiet.err
}

@test "--metrics appends one line per optimizer step with TRL's names" {
    needs_tiny
    grpo-update --model "$TINY" --in "$(B)" --out c --lr 1e-3 --iterations 2 --metrics m.jsonl
    [ "$(wc -l < m.jsonl)" -eq 2 ]
    jq -e -s '.[0].step == 1 and .[1].step == 2' m.jsonl
    jq -e -s 'all(.[]; has("loss") and has("policy_loss") and has("kl") and has("clip_ratio/low_mean")
        and has("clip_ratio/high_mean") and has("clip_ratio/region_mean") and has("entropy") and has("grad_norm")
        and has("learning_rate") and has("completions/mean_length") and has("completions/clipped_ratio")
        and has("reward") and has("reward_std") and has("frac_reward_zero_std") and has("tokens")
        and has("tokens_per_second") and has("seconds"))' m.jsonl
    jq -e -s '.[0].learning_rate == 0.001 and .[0].grad_norm > 0 and .[0].entropy > 0 and .[1].kl > 0' m.jsonl
    jq -e '.step == 2' c/grpo/state.json
}

@test "schedule: linear warmup takes the first step at lr 0 and continues across checkpoints" {
    needs_tiny
    grpo-update --model "$TINY" --in "$(B)" --out c1 --lr 1e-3 --lr-schedule linear --warmup-steps 2 --total-steps 10 --metrics m.jsonl
    grpo-update --model c1 --in "$(B)" --out c2 --lr 1e-3 --lr-schedule linear --warmup-steps 2 --total-steps 10 --metrics m.jsonl
    grpo-update --model c2 --in "$(B)" --out c3 --lr 1e-3 --lr-schedule linear --warmup-steps 2 --total-steps 10 --metrics m.jsonl
    jq -e -s '.[0].learning_rate == 0 and .[1].learning_rate == 0.0005 and .[2].learning_rate == 0.001' m.jsonl
    jq -e '.schedule == {"name":"linear","step":3,"warmup_steps":2,"total_steps":10}' c3/grpo/state.json
}

@test "LoRA: PEFT adapter files, a continued adapter, and a conflicting --lora-r is 64" {
    needs_tiny
    grpo-update --model "$TINY" --in "$(B)" --out l1 --lr 1e-2 --lora-r 4 --lora-alpha 8 --lora-targets q,v,down
    [ -s l1/adapter_model.safetensors ]; [ -s l1/adapter_config.json ]; [ ! -e l1/model.safetensors ]
    jq -e '.peft_type == "LORA" and .r == 4 and .lora_alpha == 8 and .base_model_name_or_path == env.TINY
           and (.target_modules | sort) == ["down_proj","q_proj","v_proj"]' l1/adapter_config.json
    "$GRPO_PY" - l1 <<'PY'
import sys
from safetensors.numpy import load_file
a = load_file(sys.argv[1] + "/adapter_model.safetensors")
o = load_file(sys.argv[1] + "/grpo/optimizer.safetensors")
assert a["base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"].shape == (4, 64)
assert a["base_model.model.model.layers.1.mlp.down_proj.lora_B.weight"].shape == (64, 4)
assert abs(a["base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight"]).max() > 0  # B moved off zero
assert len(a) == 2 * 2 * 3 and set(o) == {p + n for n in a for p in ("exp_avg.", "exp_avg_sq.")}
PY
    run grpo-update --model l1 --in "$(B)" --out l2 --lr 1e-2
    [ "$status" -eq 0 ]
    jq -e '.step == 2 and .flags.lora_r == 4' l2/grpo/state.json
    run grpo-update --model l1 --in "$(B)" --out l3 --lora-r 8
    [ "$status" -eq 64 ]; assert_one_line_error grpo-update "already has an adapter \(r=4\)"
    echo '{"id":"a","prompt_tokens":[1,5,6]}' | grpo-rollout --model l2 -k 1 --max-new-tokens 3 > r.jsonl
    [ "$(wc -l < r.jsonl)" -eq 1 ]
}

@test "kill -9 at random moments, then a rerun: the same bytes as an uninterrupted run" {
    needs_tiny
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/update_ref.py" make-batch big.jsonl 64 97 --seed 3
    grpo-update --model "$TINY" --in big.jsonl --out want --lr 1e-3 --iterations 3
    for i in 1 2 3 4 5 6; do
        grpo-update --model "$TINY" --in big.jsonl --out got --lr 1e-3 --iterations 3 2>/dev/null &
        pid=$!
        sleep "0.0$((RANDOM % 10))$((RANDOM % 10))"
        kill -9 "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        # at every moment got is absent or whole
        if [ -e got ]; then diff -r want got; fi
    done
    grpo-update --model "$TINY" --in big.jsonl --out got --lr 1e-3 --iterations 3
    diff -r want got
}

@test "learning: a few dozen GRPO steps teach the tiny model to answer in digits, KL bounded" {
    needs_tiny
    for i in 0 1 2 3 4 5 6 7; do echo "{\"id\":\"q$i\",\"messages\":[{\"role\":\"user\",\"content\":\"n$i\"}]}"; done > p.jsonl
    ck="$TINY"
    for s in $(seq 1 25); do
        grpo-rollout --model "$ck" --in p.jsonl -k 8 --max-new-tokens 6 --seed "$s" --out r.jsonl 2>/dev/null
        # reward: the fraction of the completion's characters that are digits (10 of 97 tokens)
        jq -c '. + {reward: ((.completion | [scan("[0-9]")] | length) / ([(.completion | length), 1] | max))}' r.jsonl > s.jsonl
        grpo-advantage --in s.jsonl --out a.jsonl
        grpo-update --model "$ck" --ref "$TINY" --in a.jsonl --out "ck$s" --lr 3e-3 --beta 0.04 --metrics m.jsonl 2>/dev/null
        ck="ck$s"
    done
    jq -s '[.[] | [.step, .reward, .kl]]' -c m.jsonl
    # start near chance (0.1), end near the optimum (1.0). All mass on the 10
    # digits is a KL of about ln(97/10) = 2.3 from the near-uniform reference:
    # with beta the KL settles there instead of growing.
    jq -e -s '(.[0:3] | map(.reward) | add / 3) < 0.3' m.jsonl
    jq -e -s '(.[-5:] | map(.reward) | add / 5) > 0.8' m.jsonl
    jq -e -s '(.[-10:] | map(.kl) | add / 10) < 5 and .[-1].kl > 0' m.jsonl
}
