#!/usr/bin/env bats
# A mixture of experts' routing (formats/rollout.md, formats/loss.md): the
# experts grpo-rollout's engine chose at every position it ran (prompt,
# completion, multi-turn environment tokens) against the float64 reference's
# top k (tests/ref/check_routing.py over model_ref.py), and grpo-update
# --routing replay|recompute|auto: the same training where sampler and
# trainer agree (f32 weights), the records' routing used where they do not,
# bad routing refused, MPI ranks each replaying their share. The gradient
# under a replayed routing against autograd: train_grad.bats; the op:
# tests/unit/test_moe.c.
# needs: venv
load helpers

setup_file() {
    export MOE="$BATS_FILE_TMPDIR/moe" ENV="$GRPO_PY -u $GRPO_ROOT/tests/ref/test_env.py"
    [ -x "$GRPO_PY" ] || return 0
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" make-tiny qwen3_moe "$MOE" --norm-topk
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_tiny_tokenizer.py" "$MOE"
    for i in 1 2 3 4 5 6; do
        echo "{\"id\":\"p$i\",\"prompt_tokens\":[1,$((i + 4)),$((i * 3)),7]}"
    done > "$BATS_FILE_TMPDIR/prompts.jsonl"
    # f32 records with advantages: sampler and trainer agree
    GRPO_WEIGHTS=f32 grpo-rollout --model "$MOE" --in "$BATS_FILE_TMPDIR/prompts.jsonl" -k 4 --max-new-tokens 12 \
        --seed 5 --out "$BATS_FILE_TMPDIR/r32.jsonl"
    jq -c '. + {advantage: (.sample - 1.5)}' "$BATS_FILE_TMPDIR/r32.jsonl" > "$BATS_FILE_TMPDIR/a32.jsonl"
}

needs_moe() { [ -d "$MOE" ] || skip "no test venv (make venv)"; }
P() { echo "$BATS_FILE_TMPDIR/prompts.jsonl"; }
A32() { echo "$BATS_FILE_TMPDIR/a32.jsonl"; }

# check_routing MODEL FILE: every record's routing against the float64 reference's
check_routing() { ref_check check_routing.py "$@"; }

# edit_routing IN OUT PYTHON: OUT is IN with each record's routing ids (a
# bytearray b, the record r) changed by PYTHON
edit_routing() {
    "$GRPO_PY" - "$1" "$2" "$3" <<'PY'
import base64, json, sys
src, dst, code = sys.argv[1:4]
with open(src) as f, open(dst, "w") as out:
    for n, line in enumerate(f, 1):
        r = json.loads(line)
        b = bytearray(base64.b64decode(r["routing"]["ids"]))
        exec(code)
        if "routing" in r and isinstance(r["routing"], dict) and "ids" in r["routing"] and not r.get("_keep"):
            r["routing"]["ids"] = base64.b64encode(bytes(b)).decode()
        r.pop("_keep", None)
        out.write(json.dumps(r, separators=(",", ":")) + "\n")
PY
}

@test "rollout: every position's experts are the float64 reference's top k, in order; a prompt's K samples share its" {
    needs_moe
    check_routing "$MOE" "$BATS_FILE_TMPDIR/r32.jsonl"
    # ids: (prompt + completion - 1) positions x 2 layers x top 2, one byte each (below 128: jq decodes them)
    jq -e -s 'all(.[]; .routing.layers == 2 and .routing.k == 2 and .routing.experts == 8
        and (.routing.ids | @base64d | length) == ((.prompt_tokens | length) + (.completion_tokens | length) - 1) * 4)' \
        "$BATS_FILE_TMPDIR/r32.jsonl"
    "$GRPO_PY" - "$BATS_FILE_TMPDIR/r32.jsonl" <<'PY'
import base64, json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
for r in recs:
    first = next(q for q in recs if q["id"] == r["id"])
    n = len(r["prompt_tokens"]) * 4
    assert base64.b64decode(r["routing"]["ids"])[:n] == base64.b64decode(first["routing"]["ids"])[:n], r["id"]
PY
    # greedy, and bf16 weights: the routing is the sampler's own (bf16 may
    # choose otherwise than float64 where experts are close: only the shape here)
    grpo-rollout --model "$MOE" --in "$(P)" -k 1 --temperature 0 --max-new-tokens 16 --out g.jsonl
    check_routing "$MOE" g.jsonl
    grpo-rollout --model "$MOE" --in "$(P)" -k 2 --max-new-tokens 8 --weights bf16 --out b.jsonl
    jq -e -s 'length == 12 and all(.[]; .routing.layers == 2)' b.jsonl
}

@test "rollout: gpt_oss's routing (the top k of its router's logits) is the reference's" {
    needs_moe
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" make-tiny gpt_oss oss --experts 16 --top-k 4
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_tiny_tokenizer.py" oss
    grpo-rollout --model oss --in "$(P)" -k 2 --max-new-tokens 12 --seed 3 --out r.jsonl
    jq -e -s 'all(.[]; .routing == (.routing | {layers: 2, k: 4, experts: 16, ids}))' r.jsonl
    check_routing oss r.jsonl
}

@test "rollout --env: the environment's tokens were run too, and carry their routing" {
    needs_moe
    printf '%s\n' '{"id":"a","messages":[{"role":"user","content":"What is 6 times 7?"}]}' \
        '{"id":"b","messages":[{"role":"user","content":"Add 2 and 40."}]}' > chat.jsonl
    grpo-rollout --model "$MOE" -k 2 --max-new-tokens 5 --in chat.jsonl --out r.jsonl --env "$ENV script"
    jq -e -s 'length == 4 and all(.[]; (.completion_mask | index(0)) != null)' r.jsonl
    check_routing "$MOE" r.jsonl
}

@test "rollout: no routing in a dense model's records or with --routing-record off; not a --server flag" {
    needs_moe
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" make-tiny qwen3 dense
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_tiny_tokenizer.py" dense
    grpo-rollout --model dense --in "$(P)" -k 2 --max-new-tokens 4 --out d.jsonl
    grpo-rollout --model "$MOE" --in "$(P)" -k 2 --max-new-tokens 4 --routing-record off --out off.jsonl
    grpo-rollout --model "$MOE" --in "$(P)" -k 2 --max-new-tokens 4 --out on.jsonl
    jq -e -s 'length == 12 and all(.[]; has("routing") | not)' d.jsonl
    jq -e -s 'length == 12 and all(.[]; has("routing") | not)' off.jsonl
    # the same samples otherwise, byte for byte
    cmp off.jsonl <(jq -c 'del(.routing)' on.jsonl)
    run grpo-rollout --model "$MOE" --server http://127.0.0.1:9 --routing-record off --in "$(P)"
    [ "$status" -eq 64 ]
    assert_one_line_error grpo-rollout "--routing-record chooses how our engine runs: not with --server"
}

@test "update: sampler and trainer agreeing (f32), replay and recompute train the same bytes; auto replays" {
    needs_moe
    for m in replay recompute auto; do
        grpo-update --model "$MOE" --in "$(A32)" --out "c-$m" --lr 1e-3 --routing "$m" --metrics "m-$m.jsonl"
    done
    cmp c-replay/model.safetensors c-recompute/model.safetensors
    cmp c-replay/model.safetensors c-auto/model.safetensors
    jq -e '.flags.routing == "replay"' c-replay/grpo/state.json c-auto/grpo/state.json
    jq -e '.flags.routing == "recompute"' c-recompute/grpo/state.json
    # one record without routing: auto recomputes, replay refuses it (65, nothing written)
    jq -c 'if .id == "p2" and .sample == 1 then del(.routing) else . end' "$(A32)" > some.jsonl
    grpo-update --model "$MOE" --in some.jsonl --out c-some --lr 1e-3
    jq -e '.flags.routing == "recompute"' c-some/grpo/state.json
    run grpo-update --model "$MOE" --in some.jsonl --out c-bad --routing replay
    [ "$status" -eq 65 ]
    assert_one_line_error grpo-update 'some.jsonl:6: field "routing": missing \(--routing replay'
    [ ! -e c-bad ]
    # a record that does not train (no advantage) needs none
    jq -c 'if .id == "p2" and .sample == 1 then del(.routing, .advantage) else . end' "$(A32)" > skip.jsonl
    grpo-update --model "$MOE" --in skip.jsonl --out c-skip --lr 1e-3
    jq -e '.flags.routing == "replay"' c-skip/grpo/state.json
}

@test "update: routing edited to other experts moves replay's loss and checkpoint; recompute never reads it" {
    needs_moe
    # every id to the next expert (still k different ones below 8)
    edit_routing "$(A32)" edited.jsonl 'b = bytearray((x + 1) % 8 for x in b)'
    for f in a32 edited; do
        in=$([ $f = a32 ] && A32 || echo edited.jsonl)
        for m in replay recompute; do
            grpo-update --model "$MOE" --in "$in" --out "$f-$m" --lr 1e-3 --routing "$m" --metrics "$f-$m.jsonl"
        done
    done
    cmp a32-recompute/model.safetensors edited-recompute/model.safetensors
    cmp <(jq -c 'del(.seconds, .tokens_per_second)' a32-recompute.jsonl) \
        <(jq -c 'del(.seconds, .tokens_per_second)' edited-recompute.jsonl)
    run cmp -s a32-replay/model.safetensors edited-replay/model.safetensors
    [ "$status" -eq 1 ]
    # the f32 sampler's log-probs are pi_old: the loss starts at ~0 with the
    # sampler's routing (measured 8.5e-8) and far from it with other experts
    jq -e '.loss | fabs < 1e-5' a32-replay.jsonl
    jq -e '.loss | fabs > 1e-3' edited-replay.jsonl
}

@test "update: bad routing is 65 naming file, line and member, nothing written; --routing replay on a dense model 64" {
    needs_moe
    cases=(
        'r["routing"]["layers"] = 3|member "layers": the model has 2 layers with experts, the record 3'
        'r["routing"]["k"] = 1|member "k": the model has 2 experts per token, the record 1'
        'r["routing"]["experts"] = 16|member "experts": the model has 8 experts per layer, the record 16'
        'r["routing"]["ids"] = "AB$="; r["_keep"] = 1|member "ids": not base64 \(at character 2 of 4\)'
        'b = b[:-4]|member "ids": expected [0-9]+ positions \(the prompt and completion tokens but the last\) of 4 bytes, got [0-9]+ bytes'
        'b[5] = 8|member "ids": position 1, layer 0: expert 8 of 8'
        'b[7] = b[6]|member "ids": position 1, layer 1: expert [0-7] twice'
        'r["routing"] = [1, 2]|expected an object \{"layers", "k", "experts", "ids": base64\}'
    )
    for c in "${cases[@]}"; do
        edit="${c%%|*}" want="${c#*|}"
        edit_routing "$(A32)" bad.jsonl "if n == 3: $edit"
        for m in replay auto; do
            run grpo-update --model "$MOE" --in bad.jsonl --out out --routing "$m"
            [ "$status" -eq 65 ] || { echo "$edit ($m): status $status"; false; }
            assert_one_line_error grpo-update "bad.jsonl:3: field \"routing\": $want"
            [ ! -e out ]
        done
        # recompute does not read it
        grpo-update --model "$MOE" --in bad.jsonl --out out --routing recompute
        rm -rf out
    done
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" make-tiny qwen3 dense
    run grpo-update --model dense --in "$(A32)" --out out --routing replay
    [ "$status" -eq 64 ]
    assert_one_line_error grpo-update "--routing replay: dense has no mixture of experts"
    [ ! -e out ]
    # auto on a dense model: its own routing, the field unread
    grpo-update --model dense --in "$(A32)" --out dd
    jq -e '.flags.routing == "recompute"' dd/grpo/state.json
}

@test "update: a bf16 sampler's records: replay keeps pi_old near the sampler, recompute does not" {
    needs_moe
    # 32 experts, top 4: bf16 sends some tokens to other experts than float32
    # does (bench/routing.sh measured max |diff| 0.335 recompute, 0.015 replay)
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" make-tiny qwen3_moe m32 --norm-topk --experts 32 --top-k 4
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_tiny_tokenizer.py" m32
    for i in $(seq 1 12); do echo "{\"id\":\"q$i\",\"prompt_tokens\":[1,$((i + 4)),$((i * 7 % 90 + 3)),7]}"; done > p.jsonl
    grpo-rollout --model m32 --in p.jsonl -k 4 --max-new-tokens 32 --seed 7 --weights bf16 --out b.jsonl
    jq -c '. + {advantage: (.sample - 1.5)}' b.jsonl > ab.jsonl
    for m in replay recompute; do
        grpo-update --model m32 --in ab.jsonl --out "c-$m" --routing "$m" --metrics "m-$m.jsonl"
        jq -e '.flags.is_correction == "token" and .flags.recompute_old' "c-$m/grpo/state.json"
    done
    rep=$(jq '.["sampling/sampling_logp_difference/max"]' m-replay.jsonl)
    rec=$(jq '.["sampling/sampling_logp_difference/max"]' m-recompute.jsonl)
    echo "max |logpi_sampler - logpi_old|: replay $rep, recompute $rec"
    # bf16's rounding alone stays below 0.05 here; a token routed otherwise moves by 0.1 or more
    # (measured: replay 0.017, recompute 0.25)
    jq -n -e --argjson a "$rep" --argjson b "$rec" '$a < 0.05 and $b > 0.1'
}

@test "update under mpirun: each rank replays its share's routing (--group-sums: one process's bytes)" {
    needs_moe
    command -v mpirun > /dev/null || skip "no mpirun (make deps installs openmpi-bin)"
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
    export OMPI_MCA_rmaps_base_oversubscribe=1
    # routing that matters: every id to the next expert
    edit_routing "$(A32)" edited.jsonl 'b = bytearray((x + 1) % 8 for x in b)'
    grpo-update --model "$MOE" --in edited.jsonl --out one --group-sums --routing replay --threads 1
    mpirun -np 2 grpo-update --model "$MOE" --in edited.jsonl --out two --group-sums --routing replay --threads 1
    cmp one/model.safetensors two/model.safetensors
    grpo-update --model "$MOE" --in edited.jsonl --out own --group-sums --routing recompute --threads 1
    run cmp -s one/model.safetensors own/model.safetensors
    [ "$status" -eq 1 ]
}
