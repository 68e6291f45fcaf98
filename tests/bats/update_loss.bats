#!/usr/bin/env bats
# grpo-update's newer losses and masks (formats/loss.md) end to end on the
# tiny random llama: --loss cispo|sapo, --delta, --entropy-coef,
# --top-entropy-quantile, --off-policy-mask-threshold, --is-correction with
# --is-mode and --is-cap. Their arithmetic is checked against torch float64
# in train_ref.bats (tests/ref/loss_ref.py) and train_grad.bats; here: the
# flags, their failure modes, that each one acts (the checkpoint changes) and
# is off at its neutral value (the same bytes), its metrics and state flags.
# needs: venv
load helpers

setup_file() {
    update_fixture
    [ -x "$GRPO_PY" ] || return 0
    # batch.jsonl's sampler is far surer than the tiny model (~log 1/97): the
    # off-policy KL is large; far.jsonl's is far less sure: ratios far above
    # 1, so --delta binds and the trainer/sampler weights exceed any cap
    jq -c '.logprobs |= map(. - 6)' "$BATS_FILE_TMPDIR/batch.jsonl" > "$BATS_FILE_TMPDIR/far.jsonl"
}

B() { echo "$BATS_FILE_TMPDIR/batch.jsonl"; }
FAR() { echo "$BATS_FILE_TMPDIR/far.jsonl"; }

# upd OUT ARGS...: one update of the tiny model at a learning rate that moves it
upd() {
    local out=$1
    shift
    grpo-update --model "$TINY" --out "$out" --lr 1e-2 --beta 0 --metrics "$out.jsonl" "$@" 2> /dev/null
}
same() { cmp -s "$1/model.safetensors" "$2/model.safetensors"; }

@test "--help lists the new flags and both new losses" {
    run grpo-update --help
    [ "$status" -eq 0 ]
    for f in --delta --sapo-tau-pos --sapo-tau-neg --entropy-coef --top-entropy-quantile \
        --off-policy-mask-threshold --is-correction --is-mode --is-cap; do
        printf '%s\n' "$output" | grep -q -- "  $f " || { echo "missing $f"; false; }
    done
    printf '%s\n' "$output" | grep -- '  --loss ' | grep -q 'cispo or sapo'
}

@test "bad values of the new flags: 64 with one line naming the flag" {
    needs_tiny
    bad() {
        run grpo-update --model "$TINY" --in "$(B)" --out c "${@:2}"
        [ "$status" -eq 64 ] || { echo "exit $status for ${*:2}: $output"; return 1; }
        assert_one_line_error grpo-update "$1"
    }
    bad "--delta.*out of range" --delta -1
    bad "--delta: expected a number > 1 \+ --epsilon-high \(1.28\), got 1.2" --delta 1.2 --epsilon-high 0.28
    bad "--delta: only for the clipped losses, not --loss cispo" --delta 2 --loss cispo
    bad "--top-entropy-quantile.*out of range" --top-entropy-quantile 1.5
    bad "--top-entropy-quantile.*out of range" --top-entropy-quantile -0.1
    bad "--entropy-coef.*out of range" --entropy-coef -0.01
    bad "--sapo-tau-pos/--sapo-tau-neg: expected numbers > 0" --loss sapo --sapo-tau-pos 0
    bad "--off-policy-mask-threshold.*out of range" --off-policy-mask-threshold -2
    bad "--is-correction" --is-correction both
    bad "--is-mode" --is-mode clip
    bad "--is-cap.*out of range" --is-cap 0.5
    bad "--loss" --loss gspo
    [ ! -e c ]
}

@test "each term acts: the checkpoint differs from plain grpo's" {
    needs_tiny
    upd plain --in "$(FAR)"
    for args in "--loss cispo" "--loss sapo" "--delta 2" "--entropy-coef 0.5" "--top-entropy-quantile 0.2" \
        "--is-correction token --is-mode truncate" "--is-correction sequence"; do
        # shellcheck disable=SC2086
        upd x --in "$(FAR)" $args
        ! same plain x || { echo "$args changed nothing"; false; }
        rm -rf x x.jsonl
    done
    # the mask measures the sampler, not pi_old: with pi_old recomputed (ratios 1,
    # nothing clipped) the completions it drops would have had a gradient
    upd plain2 --in "$(B)" --old-logp recompute
    upd x --in "$(B)" --old-logp recompute --off-policy-mask-threshold 0.5
    ! same plain2 x || false
}

@test "at their neutral values the terms are off: the same bytes as plain grpo" {
    needs_tiny
    upd plain --in "$(FAR)"
    for args in "--delta 0" "--entropy-coef 0" "--top-entropy-quantile 1" "--off-policy-mask-threshold -1" \
        "--is-correction none" "--sapo-tau-pos 3 --sapo-tau-neg 0.5"; do
        # shellcheck disable=SC2086
        upd x --in "$(FAR)" $args
        same plain x || { echo "$args changed the checkpoint"; false; }
        rm -rf x x.jsonl
    done
    # a cap no weight reaches leaves the sequence correction a no-op only when old == sampler:
    # here the trainer's old log-probs are far from the sampler's, so it acts (above)
}

@test "metrics: the new terms' records, null where a term is off" {
    needs_tiny
    upd p --in "$(FAR)"
    jq -e '."clip_ratio/delta_mean" == null and .cispo_clip_ratio == null and ."entropy_mask/masked_ratio" == null
        and ."off_policy_mask/masked_ratio" == null and ."sampling/importance_sampling_ratio/mean" == null
        and ."clip_ratio/region_mean" > 0' p.jsonl
    upd c --in "$(FAR)" --loss cispo
    jq -e '.cispo_clip_ratio > 0 and .cispo_clip_ratio <= 1 and ."clip_ratio/low_mean" == null
        and ."clip_ratio/high_mean" == null and ."clip_ratio/region_mean" == null' c.jsonl
    upd s --in "$(FAR)" --loss sapo
    jq -e '.cispo_clip_ratio == null and ."clip_ratio/region_mean" == null and (.loss | type) == "number"' s.jsonl
    upd d --in "$(FAR)" --delta 2
    jq -e '."clip_ratio/delta_mean" > 0 and ."clip_ratio/delta_mean" < 1' d.jsonl
    upd e --in "$(B)" --top-entropy-quantile 0.25
    jq -e '."entropy_mask/masked_ratio" >= 0.7 and ."entropy_mask/masked_ratio" < 0.8' e.jsonl
    upd o --in "$(B)" --off-policy-mask-threshold 0.5
    # every completion with A < 0 is far off-policy here, and only those are dropped
    want=$(jq -s '(map(select(.advantage < 0)) | length) / length' "$(B)")
    jq -e --argjson w "$want" '."off_policy_mask/masked_ratio" == $w' o.jsonl
    upd t --in "$(FAR)" --is-correction token --is-mode truncate --is-cap 2
    jq -e '."sampling/importance_sampling_ratio/max" == 2 and ."sampling/importance_sampling_ratio/min" > 0
        and ."sampling/sampling_logp_difference/mean" > 1
        and ."sampling/sampling_logp_difference/max" >= ."sampling/sampling_logp_difference/mean"' t.jsonl
    upd m --in "$(FAR)" --is-correction sequence --is-mode mask
    jq -e '."sampling/importance_sampling_ratio/min" == 0 and ."sampling/importance_sampling_ratio/max" <= 3' m.jsonl
}

@test "state.json records the new flags" {
    needs_tiny
    upd c --in "$(B)" --loss sapo --sapo-tau-pos 2 --entropy-coef 0.01 --top-entropy-quantile 0.5 \
        --off-policy-mask-threshold 1 --is-correction sequence --is-mode truncate --is-cap 4
    jq -e '.flags.loss == "sapo" and .flags.sapo_tau_pos == 2 and .flags.sapo_tau_neg == 1.05
        and .flags.entropy_coef == 0.01 and .flags.top_entropy_quantile == 0.5
        and .flags.off_policy_mask_threshold == 1 and .flags.is_correction == "sequence"
        and .flags.is_mode == "truncate" and .flags.is_cap == 4 and .flags.delta == 0' c/grpo/state.json
}

@test "the entropy threshold is the whole batch's: micro-batches change only float rounding" {
    needs_tiny
    upd a --in "$(B)" --top-entropy-quantile 0.3 --off-policy-mask-threshold 0 --is-correction token
    upd b --in "$(B)" --top-entropy-quantile 0.3 --off-policy-mask-threshold 0 --is-correction token --micro-batch 16
    jq -e -s '.[0]."entropy_mask/masked_ratio" == .[1]."entropy_mask/masked_ratio"
        and .[0]."off_policy_mask/masked_ratio" == .[1]."off_policy_mask/masked_ratio"' a.jsonl b.jsonl
    # AdamW's first moment after one step is 0.1 * gradient
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/update_ref.py" close a/grpo/optimizer.safetensors b/grpo/optimizer.safetensors 1e-5
}

# with_sampler IN OUT W KV: IN's records with our engine's sampler field
with_sampler() {
    jq -c --arg w "$3" --arg kv "$4" '. + {sampler: {engine: "grpo", device: "cpu", weights: $w, kv_cache: $kv}}' "$1" > "$2"
}

@test "records sampled in bf16 (or by a server): pi_old recomputed and each completion weighed by default" {
    needs_tiny
    with_sampler "$(FAR)" in-f32.jsonl f32 f32
    with_sampler "$(FAR)" in-bf16.jsonl bf16 bf16
    with_sampler "$(FAR)" in-kv.jsonl f32 bf16
    jq -c '. + {sampler: {engine: "vllm", model: "x", logprobs: "processed"}}' "$(FAR)" > in-vllm.jsonl
    # float32 records, and records without the field: the records' log-probs, no weight
    upd plain --in "$(FAR)"
    upd f32 --in in-f32.jsonl
    same plain f32
    jq -e '.flags.recompute_old == false and .flags.is_correction == "none"' f32/grpo/state.json
    jq -e '."sampling/importance_sampling_ratio/min" == null' f32.jsonl
    # one bf16 record in the batch is enough; a bf16 cache alone too; a server too
    { head -n 1 in-bf16.jsonl; tail -n +2 "$(FAR)"; } > in-one.jsonl
    for b in bf16 kv vllm one; do
        upd "d-$b" --in "in-$b.jsonl"
        jq -e '.flags.recompute_old == true and .flags.is_correction == "token" and .flags.is_mode == "mask"
            and .flags.is_cap == 3' "d-$b/grpo/state.json"
        # the sampler is far less sure than the trainer here: weights above the cap, masked
        jq -e '."sampling/importance_sampling_ratio/min" == 0 and ."sampling/sampling_logp_difference/mean" > 1' "d-$b.jsonl"
    done
    # a server's raw log-probs (before temperature and truncation) cannot be weighed: pi_old recomputed only
    jq -c '. + {sampler: {engine: "vllm", model: "x", logprobs: "raw"}}' "$(FAR)" > in-raw.jsonl
    upd raw --in in-raw.jsonl
    jq -e '.flags.recompute_old == true and .flags.is_correction == "none"' raw/grpo/state.json
    # the summary line says so
    grpo-update --model "$TINY" --out s --lr 1e-2 --beta 0 --in in-one.jsonl 2> err
    grep -q "; pi_old recomputed, sampler correction token (1 of $(wc -l < in-one.jsonl) records not sampled with the trainer's arithmetic)$" err
    # the default is the explicit flags' step, bit for bit
    upd explicit --in in-bf16.jsonl --old-logp recompute --is-correction token
    same d-bf16 explicit
    # explicit flags win over the default
    upd off --in in-bf16.jsonl --is-correction none --old-logp records
    same plain off
    jq -e '.flags.recompute_old == false and .flags.is_correction == "none"' off/grpo/state.json
    upd seq --in in-bf16.jsonl --is-correction sequence
    jq -e '.flags.recompute_old == true and .flags.is_correction == "sequence"' seq/grpo/state.json
    upd rec --in in-bf16.jsonl --is-correction none
    jq -e '.flags.recompute_old == true and .flags.is_correction == "none"' rec/grpo/state.json
    # float32 records are the arithmetic of a float32 trainer on a float32 base only: not of a
    # LoRA run on a q8 base, nor of bf16 products
    upd q8 --in in-f32.jsonl --lora-r 4 --base-weights q8
    jq -e '.flags.recompute_old == true and .flags.is_correction == "token"' q8/grpo/state.json
    upd f32lora --in in-f32.jsonl --lora-r 4
    jq -e '.flags.recompute_old == false and .flags.is_correction == "none"' f32lora/grpo/state.json
    if grep -qw avx512_bf16 /proc/cpuinfo; then
        upd cbf16 --in in-f32.jsonl --compute bf16
        jq -e '.flags.recompute_old == true and .flags.is_correction == "token"' cbf16/grpo/state.json
    fi
}

@test "--old-logp records with an importance correction is 64; a malformed sampler field is 65 naming it" {
    needs_tiny
    run -64 grpo-update --model "$TINY" --in "$(B)" --out c --old-logp records --is-correction token
    assert_one_line_error grpo-update "--old-logp records with --is-correction token"
    run -64 grpo-update --model "$TINY" --in "$(B)" --out c --old-logp sometimes
    assert_one_line_error grpo-update "--old-logp"
    for bad in '"bf16"' '{}' '{"engine":""}' '{"engine":"grpo","device":"tpu","weights":"f32","kv_cache":"f32"}' \
        '{"engine":"grpo","device":"cpu","weights":"f16","kv_cache":"f32"}' '{"engine":"grpo","device":"cpu","weights":"f32"}' \
        '{"engine":"grpo","device":"cpu","weights":"q8","base":"thawed","kv_cache":"f32"}' \
        '{"engine":"vllm","model":"x","logprobs":"sampled"}'; do
        { head -n 1 "$(B)"; head -n 1 "$(B)" | jq -c --argjson s "$bad" '. + {sampler: $s}'; } > bad.jsonl
        run -65 grpo-update --model "$TINY" --in bad.jsonl --out c
        assert_one_line_error grpo-update 'bad.jsonl:2: field "sampler"'
        [ ! -e c ]
    done
}

@test "records of an older checkpoint (policy_step): off-policy, so pi_old recomputed and weighed; staleness in the metrics" {
    needs_tiny
    jq -c '. + {policy_step: 0}' "$(B)" > in-0.jsonl
    # step 0 trained on records of step 0: on-policy, the records' log-probs, as without the field
    upd s0 --in in-0.jsonl
    upd plain --in "$(B)"
    same s0 plain
    jq -e '."policy_staleness/mean" == 0 and ."policy_staleness/max" == 0' s0.jsonl
    jq -e '."policy_staleness/mean" == null and ."policy_staleness/max" == null' plain.jsonl
    jq -e '.flags.recompute_old == false and .flags.is_correction == "none"' s0/grpo/state.json
    # checkpoint 1 trained on them: one step stale
    grpo-update --model s0 --out s1 --lr 1e-2 --beta 0 --in in-0.jsonl --metrics s1.jsonl 2> err
    jq -e '."policy_staleness/mean" == 1 and ."policy_staleness/max" == 1' s1.jsonl
    jq -e '.flags.recompute_old == true and .flags.is_correction == "token"' s1/grpo/state.json
    grep -q "records of a checkpoint up to 1 steps older)$" err
    # half of them from step 1: mean 0.5, max 1
    { head -n 8 in-0.jsonl; tail -n +9 in-0.jsonl | jq -c '.policy_step = 1'; } > in-mixed.jsonl
    grpo-update --model s0 --out s2 --lr 1e-2 --beta 0 --in in-mixed.jsonl --metrics s2.jsonl 2> /dev/null
    jq -e '."policy_staleness/mean" == 0.5 and ."policy_staleness/max" == 1' s2.jsonl
    # a bad value is 65 naming the field
    { head -n 1 in-0.jsonl; head -n 1 in-0.jsonl | jq -c '.policy_step = -2'; } > bad.jsonl
    run -65 grpo-update --model "$TINY" --in bad.jsonl --out c
    assert_one_line_error grpo-update 'bad.jsonl:2: field "policy_step"'
}
